// Conditional-create probes a killed publish left behind: recognised by name and size, deleted by
// the next publish that writes the archive once old enough to be abandoned, nothing else touched.
import { join } from "node:path";
import { ARTIFACT_MANIFEST } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import { commitArtifact, type PublishEvent, publishArtifact } from "../src/index.js";
import { abandonedProbes } from "../src/internal/remote.js";
import { describeEachBackend, payload, tempDir, writeTree } from "./helpers.js";

const OURS = ".posttrain-archive.probe-0123456789abcdef";
const body = (key: string, n = 1) => new TextEncoder().encode(`probe ${key} ${n}\n`);
const hourAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);

describe("abandonedProbes (pure)", () => {
  const listed = (entries: Array<[string, number, Date | undefined]>) =>
    new Map(
      entries.map(([key, size, lastModified]) => [key, { size, ...(lastModified ? { lastModified } : {}) }]),
    );

  it("chooses probes of this tool's scheme, of the probe body's size, old enough", () => {
    const now = new Date();
    const other = ".posttrain-archive.probe-fedcba9876543210";
    expect(
      abandonedProbes(
        listed([
          [OURS, body(OURS).byteLength, hourAgo],
          [other, body(other).byteLength, hourAgo],
          ["model.pt", 10, hourAgo],
        ]),
        now,
        60 * 60 * 1000,
      ),
    ).toEqual([OURS, other]);
  });

  it("never chooses a young probe, another size, another name, or an object of unknown age", () => {
    const now = new Date();
    const young = ".posttrain-archive.probe-00000000000000aa";
    expect(
      abandonedProbes(
        listed([
          [young, body(young).byteLength, new Date(now.getTime() - 1000)],
          [OURS, body(OURS).byteLength + 1, hourAgo],
          [".posttrain-archive.probe-xyz", 42, hourAgo],
          [".posttrain-archive.probe-0123456789ABCDEF", body(OURS).byteLength, hourAgo],
          [`nested/${OURS}`, body(OURS).byteLength, hourAgo],
          [".posttrain-archive.probe-00000000000000bb", body(OURS).byteLength, undefined],
        ]),
        now,
        60 * 60 * 1000,
      ),
    ).toEqual([]);
  });
});

async function artifact(): Promise<string> {
  const dir = join(await tempDir(), "iter_000000300");
  await writeTree(dir, { "model.pt": payload("model") });
  await commitArtifact(dir, { format: "consolidated", components: ["model"] });
  return dir;
}

let labels = 0;
const label = () => `iter_${String(++labels).padStart(9, "0")}`;

describeEachBackend("publish sweeps abandoned probes", (backend) => {
  it("deletes this tool's leftover probes once old enough, and nothing that only looks like one", async () => {
    const store = await backend().open(label());
    const lookalike = ".posttrain-archive.probe-fedcba9876543210";
    const planted = new Map<string, Uint8Array>([
      [OURS, body(OURS)],
      [lookalike, new TextEncoder().encode("someone else's bytes under a probe-like name")],
      [".posttrain-archive.probe-notours", body(OURS)],
    ]);
    for (const [key, bytes] of planted) await store.put(key, bytes);

    const events: PublishEvent[] = [];
    const report = await publishArtifact(await artifact(), store, { abandonedProbeAgeMs: 0 }, (e) =>
      events.push(e),
    );
    expect(report.status).toBe("published");
    expect(events.filter((e) => e.type === "probes")).toEqual([{ type: "probes", removed: [OURS] }]);
    expect(await store.head(OURS)).toBeUndefined();
    expect((await store.head(lookalike))?.size).toBe(planted.get(lookalike)!.byteLength);
    expect(await store.head(".posttrain-archive.probe-notours")).toBeDefined();
    expect(await store.head(ARTIFACT_MANIFEST.fileName)).toBeDefined();
  });

  it("keeps a probe younger than the abandonment age", async () => {
    const store = await backend().open(label());
    await store.put(OURS, body(OURS));
    const events: PublishEvent[] = [];
    await publishArtifact(await artifact(), store, {}, (e) => events.push(e));
    expect(events.some((e) => e.type === "probes")).toBe(false);
    expect(await store.head(OURS)).toBeDefined();
  });
});
