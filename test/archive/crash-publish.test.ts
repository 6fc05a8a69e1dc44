// SIGKILL `ckpt artifact publish` (the real CLI, a child process) at seeded random instants
// against a file:// archive (10% of the kills uniform over the CLI's start-up, 90% uniform over
// the rest of an uninterrupted run), and prove after every kill:
// - no native manifest exists remotely unless every declared payload is there with the declared
//   size, digest metadata and content (and nothing of the artifact exists before its declaration);
// - a local receipt exists only for a committed, verified archive;
// - no foreign file was removed or changed (planted beside and inside the artifact, and in the
//   archive root), and no local payload was touched;
// and after each round a re-run ends `published` (nothing committed yet), `adopted` (committed,
// no receipt) or `skipped` (receipt written), with the remote archive complete.
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { cp, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { openStore } from "@ckpt/object-store";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkReceipt, checkRemoteArchive } from "../helpers/archive-state.js";
import { assertForeignIntact, type BuiltArtifact, plantForeign, writeArtifact } from "../helpers/artifact.js";
import { cli, crashKills, crashSeed, runCrashSuite } from "../helpers/crash.js";

const seed = crashSeed();
const kills = crashKills(100);

describe("ckpt artifact publish under SIGKILL (file://)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let template: BuiltArtifact;
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-publish-");
    template = await writeArtifact(join(tmp.dir, "template"));
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(`keeps the archive invariants across ${kills} kills (seed ${seed})`, async () => {
    // Per round: a fresh copy of the artifact and a fresh archive root, with foreign files planted.
    let round = Number.NaN;
    let artifactDir = "";
    let remoteRoot = "";
    let localBefore = new Map<string, string>();
    let remoteBefore = new Map<string, string>();
    /** What the last killed run left: decides what the next completion must report. */
    let lastState = { committed: false, receipt: false };
    const roundDir = (r: number) => join(tmp.dir, `round${r}`);

    const prepare = async (r: number) => {
      if (!Number.isNaN(round)) await rm(roundDir(round), { recursive: true, force: true });
      round = r;
      const localRoot = join(roundDir(r), "local");
      const relative = template.dir.slice(join(tmp.dir, "template").length + 1);
      artifactDir = join(localRoot, relative);
      await mkdir(dirname(artifactDir), { recursive: true });
      await cp(template.dir, artifactDir, { recursive: true });
      await plantForeign(artifactDir, "inside"); // not selected by the manifest: never archived
      localBefore = await plantForeign(dirname(artifactDir), "beside");
      remoteRoot = join(roundDir(r), "remote");
      // Another archive's object and foreign files in the archive root: never touched.
      await mkdir(join(remoteRoot, dirname(template.archivePrefix), "iter_000000299"), { recursive: true });
      await plantForeign(join(remoteRoot, dirname(template.archivePrefix), "iter_000000299"), "other");
      remoteBefore = await plantForeign(remoteRoot, "root"); // snapshots the whole root
      lastState = { committed: false, receipt: false };
    };

    const inspect = async () => {
      const store = await openStore(`file://${remoteRoot}/${template.archivePrefix}`);
      const remote = await checkRemoteArchive(store, "", template.files);
      const receipt = await checkReceipt(artifactDir, remote);
      await assertForeignIntact(dirname(artifactDir), localBefore);
      await assertForeignIntact(remoteRoot, remoteBefore);
      return { remote, receipt };
    };

    const states: Record<string, number> = {};
    /** Most conditional-create probe objects left in one archive by killed runs (harmless). */
    let leftoverProbes = 0;
    const report = await runCrashSuite({
      seed,
      kills,
      killsPerRound: 5,
      // Most kills land after the CLI's start-up (~1 s of module loading), where the work is.
      startup: cli(["--version"]),
      command: () =>
        cli([
          "artifact",
          "publish",
          "--artifact-dir",
          artifactDir,
          "--upload-prefix",
          template.uploadPrefix,
          "--bucket",
          `file://${remoteRoot}`,
          "--json",
        ]),
      prepare,
      afterKill: async () => {
        const { remote, receipt } = await inspect();
        lastState = { committed: remote.label === "committed", receipt: receipt === "receipt" };
        const label = `${remote.label}/${receipt}`;
        states[label] = (states[label] ?? 0) + 1;
        return label;
      },
      afterCompletion: async ({ previous, result }) => {
        const out = JSON.parse(result.stdout) as { ok: boolean; status: string; uploaded: string[] };
        const expected =
          previous === "completed" || lastState.receipt
            ? "skipped"
            : lastState.committed
              ? "adopted"
              : "published";
        expect(out.ok).toBe(true);
        expect(out.status).toBe(expected);
        if (expected !== "published") expect(out.uploaded).toEqual([]);
        const { remote, receipt } = await inspect();
        expect(remote.label).toBe("committed");
        expect(receipt).toBe("receipt");
        leftoverProbes = Math.max(leftoverProbes, remote.probes);
        lastState = { committed: true, receipt: true };
      },
      budgetMs: 280_000,
      log: (line) => console.log(line),
    });
    console.log(
      `publish crash states (remote/receipt): ${JSON.stringify(states)}; leftover probes <= ${leftoverProbes}`,
    );
    expect(report.earlyKills + report.workKills).toBe(report.kills);
    expect(report.kills).toBeGreaterThanOrEqual(kills);
    // Some kills must have landed after the declaration was created, or the suite proved little.
    const beyondStart = Object.entries(states)
      .filter(([label]) => label !== "empty/no-receipt")
      .reduce((sum, [, n]) => sum + n, 0);
    expect(beyondStart).toBeGreaterThan(0);
  }, 300_000);
});
