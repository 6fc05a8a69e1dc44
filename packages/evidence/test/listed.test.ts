// Every full checkpoint carries its format, components and sizes, including the ones resume does
// not probe: those are read from the directory listing retention's scan makes and a stat of each
// component (`depth: "listed"`), never from their records, and the bundle says they were not probed.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { expect, it } from "vitest";
import { buildEvidence, type EvidenceCheckpoint, evidenceSchema } from "../src/index.js";

const iterDir = (i: number) => `iter_${String(i).padStart(9, "0")}`;

/** Writes `files` (relative path -> size) under `dir`. */
async function writeSized(dir: string, files: Record<string, number>): Promise<void> {
  for (const [path, size] of Object.entries(files)) {
    await mkdir(join(dir, path, ".."), { recursive: true });
    await writeFile(join(dir, path), Buffer.alloc(size, 1));
  }
}

/**
 * An attempt whose checkpoints no pointer names (saves that never committed: resume probes none of
 * them): a consolidated one, a DCP one, one whose optimizer state was released, an empty one.
 */
async function unprobedAttempt(): Promise<string> {
  const attempt = join(await testdir("ckpt-evidence-listed-"), "proj", "grp", "run", "20260901120000");
  const root = join(attempt, "checkpoints");
  await writeSized(join(root, iterDir(10)), { "model.pt": 100, "optim.pt": 300, "trainer.pt": 10 });
  await writeSized(join(root, iterDir(20)), {
    "model/__0_0.distcp": 50,
    "model/.metadata": 7,
    "optim/__0_0.distcp": 80,
    "optim/.metadata": 9,
    "trainer.pt": 10,
    ".posttrain-checkpoint.json": 3,
  });
  await writeSized(join(root, iterDir(30)), { "model.pt": 120, "trainer.pt": 11 });
  await mkdir(join(root, iterDir(40)));
  return attempt;
}

const layout = (c: EvidenceCheckpoint) => ({
  iteration: c.iteration,
  depth: c.depth,
  format: c.format,
  components: c.components.map((x) => [x.path, x.kind, x.present, x.bytes]),
  bytes: c.bytes,
});

it("lists the format, components and sizes of every checkpoint resume does not probe", async () => {
  const bundle = await buildEvidence(await unprobedAttempt());
  expect(evidenceSchema.parse(bundle)).toEqual(bundle);
  expect(bundle.complete).toBe(true);
  const checkpoints = bundle.attempts[0]!.checkpoints;
  expect(checkpoints.map(layout)).toEqual([
    { iteration: 40, depth: "listed", format: null, components: [], bytes: 0 },
    {
      iteration: 30,
      depth: "listed",
      format: "consolidated",
      components: [
        ["model.pt", "file", true, 120],
        ["trainer.pt", "file", true, 11],
      ],
      bytes: 131,
    },
    {
      iteration: 20,
      depth: "listed",
      format: "dcp",
      components: [
        ["model", "directory", true, 57],
        ["optim", "directory", true, 89],
        ["trainer.pt", "file", true, 10],
      ],
      bytes: 156,
    },
    {
      iteration: 10,
      depth: "listed",
      format: "consolidated",
      components: [
        ["model.pt", "file", true, 100],
        ["optim.pt", "file", true, 300],
        ["trainer.pt", "file", true, 10],
      ],
      bytes: 410,
    },
  ]);
  for (const c of checkpoints) {
    // Listed, not probed: no record was read, so no digest, and the bundle says why.
    expect([c.files, c.manifest_sha256, c.resume.resumable]).toEqual([null, null, null]);
    expect(c.resume.reason).toMatch(/^not probed: past the latest pointer.*layout from its listing$/);
    expect(c.retention.past_pointer).toBe(true);
  }
});
