// The hostile-input corpus counted as one list (tools/corpus-count.mjs): issue 16 asks for at
// least 300 cases, with every class docs/architecture.md "Hostile inputs" names represented.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/crash.js";

interface Counted {
  readonly documented: readonly string[];
  readonly classes: Readonly<Record<string, number>>;
  readonly sources: readonly { class: string; source: string; cases: number }[];
  readonly total: number;
}

const counted = JSON.parse(
  execFileSync(process.execPath, [join(REPO_ROOT, "tools", "corpus-count.mjs"), "--json"], {
    encoding: "utf8",
  }),
) as Counted;

describe("the hostile corpus", () => {
  it("holds at least 300 cases", () => {
    expect(counted.total).toBeGreaterThanOrEqual(300);
  });

  it("reads the classes from the docs table, and counts only documented classes", () => {
    expect(counted.documented.length).toBeGreaterThanOrEqual(6);
    for (const source of counted.sources) expect(counted.documented).toContain(source.class);
  });

  it.each(counted.documented.map((c) => [c]))("has cases of the documented class %s", (name) => {
    expect(counted.classes[name]).toBeGreaterThanOrEqual(1);
  });
});
