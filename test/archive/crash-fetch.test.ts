// SIGKILL `ckpt artifact fetch` (the real CLI, a child process) at seeded random instants while
// it stages a file:// archive (10% of the kills over the CLI's start-up, 90% over the rest of an
// uninterrupted run), and prove after every kill:
// - the staging directory is absent, holds nothing but ckpt's own record, or has a valid
//   `.staged.json` whose files are all declared; when it says `complete: true` (or the local
//   native manifest, which comes after every payload, is in place) every fetched file is there
//   with the declared size and digest;
// - no foreign file or directory planted in the staging root was removed or changed;
// - the archive itself is untouched;
// and after each round a re-run completes (resuming the staged copy) and reports the staged path.
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { publishArtifact } from "@ckpt/archive-publisher";
import type { ArchiveDeclaration } from "@ckpt/manifest";
import { openStore } from "@ckpt/object-store";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkRemoteArchive, checkStaged } from "../helpers/archive-state.js";
import {
  assertForeignIntact,
  type BuiltArtifact,
  plantForeign,
  snapshotTree,
  writeArtifact,
} from "../helpers/artifact.js";
import { cli, crashKills, crashSeed, runCrashSuite } from "../helpers/crash.js";

const seed = crashSeed();
const kills = crashKills(100);

describe("ckpt artifact fetch under SIGKILL (file://)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let artifact: BuiltArtifact;
  let archiveUri: string;
  let declaration: ArchiveDeclaration;
  let archiveSnapshot: Map<string, string>;
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-fetch-");
    artifact = await writeArtifact(join(tmp.dir, "local"));
    archiveUri = `file://${join(tmp.dir, "remote")}/${artifact.archivePrefix}`;
    const store = await openStore(archiveUri);
    await publishArtifact(artifact.dir, store);
    const remote = await checkRemoteArchive(store, "", artifact.files);
    expect(remote.label).toBe("committed");
    declaration = remote.declaration!;
    archiveSnapshot = await snapshotTree(join(tmp.dir, "remote"));
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(`keeps the staging invariants across ${kills} kills (seed ${seed})`, async () => {
    let stageRoot = "";
    let foreignBefore = new Map<string, string>();
    const iterDir = () => join(stageRoot, artifact.iterDir);

    const states: Record<string, number> = {};
    const report = await runCrashSuite({
      seed,
      kills,
      killsPerRound: 8,
      startup: cli(["--version"]),
      command: () => cli(["artifact", "fetch", "--artifact-uri", archiveUri, "--dst", stageRoot, "--json"]),
      prepare: async (round) => {
        if (stageRoot !== "") await rm(stageRoot, { recursive: true, force: true });
        stageRoot = join(tmp.dir, `stage${round}`);
        await mkdir(stageRoot, { recursive: true });
        // Someone else's files in the staging root, including a directory shaped like an artifact.
        await mkdir(join(stageRoot, "iter_000000299"), { recursive: true });
        await plantForeign(join(stageRoot, "iter_000000299"), "other");
        foreignBefore = await plantForeign(stageRoot, "root");
      },
      afterKill: async () => {
        const label = await checkStaged(iterDir(), declaration);
        await assertForeignIntact(stageRoot, foreignBefore);
        expect(await snapshotTree(join(tmp.dir, "remote"))).toEqual(archiveSnapshot);
        states[label] = (states[label] ?? 0) + 1;
        return label;
      },
      afterCompletion: async ({ previous, result }) => {
        const out = JSON.parse(result.stdout) as { ok: boolean; stagedDir: string; upToDate: boolean };
        expect(out.ok).toBe(true);
        expect(out.stagedDir).toBe(iterDir());
        if (previous === "completed") expect(out.upToDate).toBe(true);
        expect(await checkStaged(iterDir(), declaration)).toBe("complete");
        await assertForeignIntact(stageRoot, foreignBefore);
        expect(await snapshotTree(join(tmp.dir, "remote"))).toEqual(archiveSnapshot);
      },
      budgetMs: 420_000,
      log: (line) => console.log(line),
    });
    console.log(`fetch crash states: ${JSON.stringify(states)}`);
    expect(report.kills).toBeGreaterThanOrEqual(kills);
    expect(report.earlyKills + report.workKills).toBe(report.kills);
    // Some kills must have found a staging record, or the suite proved little.
    const staged = Object.entries(states)
      .filter(([label]) => label !== "absent" && label !== "no-record")
      .reduce((sum, [, n]) => sum + n, 0);
    expect(staged).toBeGreaterThan(0);
  }, 450_000);
});
