import { describe, expect, it } from "vitest";
import type { FetchPlan, LocalEntry } from "../src/fetch/plan.js";
import { fetchSpaceNeeded } from "../src/fetch/space.js";

const plan = (over: Partial<FetchPlan>): FetchPlan =>
  ({ download: [], remove: [], writeManifest: true, ...over }) as unknown as FetchPlan;
const file = (path: string, size: number, resumeFrom = 0) => ({
  path,
  size,
  sha256: "0".repeat(64),
  resumeFrom,
});

describe("fetchSpaceNeeded", () => {
  it("counts what is left of each download, the manifest and the record", () => {
    const needed = fetchSpaceNeeded(
      plan({ download: [file("a", 1000), file("b", 500, 200)] }),
      70,
      30,
      new Map(),
    );
    expect(needed).toBe(1000 + 300 + 70 + 30);
    expect(fetchSpaceNeeded(plan({ writeManifest: false }), 70, 30, new Map())).toBe(30);
  });

  it("subtracts what removing the previous source's files frees, never going below zero", () => {
    const entries = new Map<string, LocalEntry>([
      ["old.pt", { size: 600, regular: true }],
      ["old.pt.part", { size: 100, regular: true }],
    ]);
    const replacing = plan({ download: [file("a", 1000)], remove: ["old.pt", "old.pt.part", "gone"] });
    expect(fetchSpaceNeeded(replacing, 70, 30, entries)).toBe(1100 - 700);
    expect(fetchSpaceNeeded(plan({ remove: ["old.pt"] }), 0, 30, entries)).toBe(0);
  });
});
