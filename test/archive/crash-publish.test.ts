// @module-tag crash
// @module-tag s3
// SIGKILL `ckpt artifact publish` (the real CLI, a child process) at seeded random instants
// (10% of the kills uniform over the CLI's start-up, 90% uniform over the rest of an
// uninterrupted run), and prove after every kill:
// - no native manifest exists remotely unless every declared payload is there with the declared
//   size, digest metadata and content (and nothing of the artifact exists before its declaration);
// - a local receipt exists only for a committed, verified archive;
// - no foreign file was removed or changed (planted beside and inside the artifact, and in the
//   archive's store), and no local payload was touched;
// and after each round a re-run ends `published` (nothing committed yet), `adopted` (committed,
// no receipt) or `skipped` (receipt written), with the remote archive complete.
// 100+ kills against a file:// archive; a smaller run against the real S3 server (Ceph RGW).
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { cp, mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { type ObjectStore, openStore } from "@ckpt/object-store";
import { createTestBucket, makeTempDir, s3TestEnv, testCredentials } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkReceipt, checkRemoteArchive } from "../helpers/archive-state.js";
import {
  assertForeignIntact,
  type BuiltArtifact,
  plantForeign,
  seededBytes,
  sha256,
  writeArtifact,
} from "../helpers/artifact.js";
import {
  type CrashReport,
  cli,
  crashBudgetMs,
  crashKills,
  crashSeed,
  runCrashSuite,
} from "../helpers/crash.js";

const seed = crashSeed();
const kills = crashKills(100);
/** The real-S3 run is the smaller one (each run costs network round trips to Ceph). */
const S3_KILLS = 20;

/** Where a round archives to, and how the test reads and seeds that store behind ckpt's back. */
interface Target {
  /** `--bucket` (and `--credentials`) for round `r`. */
  args(r: number): string[];
  /** The run's upload prefix in round `r`. */
  uploadPrefix(r: number): string;
  /** The archive store of round `r`, read directly (not through the publisher). */
  archive(r: number): Promise<ObjectStore>;
  /** Plants objects ckpt did not create in round `r`'s store; returns a check that they are intact. */
  plantForeign(r: number): Promise<() => Promise<void>>;
}

async function runPublishSuite(
  tmp: string,
  template: BuiltArtifact,
  target: Target,
  suiteKills: number,
): Promise<{ report: CrashReport; states: Record<string, number> }> {
  let round = Number.NaN;
  let artifactDir = "";
  let localBefore = new Map<string, string>();
  let remoteIntact: () => Promise<void> = async () => {};
  /** What the last killed run left: decides what the next completion must report. */
  let lastState = { committed: false, receipt: false };
  const roundDir = (r: number) => join(tmp, `round${r}`);

  const prepare = async (r: number) => {
    if (!Number.isNaN(round)) await rm(roundDir(round), { recursive: true, force: true });
    round = r;
    artifactDir = join(roundDir(r), "local", template.iterDir);
    await mkdir(dirname(artifactDir), { recursive: true });
    await cp(template.dir, artifactDir, { recursive: true });
    await plantForeign(artifactDir, "inside"); // not selected by the manifest: never archived
    localBefore = await plantForeign(dirname(artifactDir), "beside"); // snapshots the artifact too
    remoteIntact = await target.plantForeign(r);
    lastState = { committed: false, receipt: false };
  };

  const inspect = async () => {
    const remote = await checkRemoteArchive(await target.archive(round), "", template.files);
    const receipt = await checkReceipt(artifactDir, remote);
    await assertForeignIntact(dirname(artifactDir), localBefore);
    await remoteIntact();
    return { remote, receipt };
  };

  const states: Record<string, number> = {};
  const report = await runCrashSuite({
    seed,
    kills: suiteKills,
    killsPerRound: 8,
    // Most kills land after the CLI's start-up (~1 s of module loading), where the work is.
    startup: cli(["--version"]),
    command: (r) =>
      cli([
        "artifact",
        "publish",
        "--artifact-dir",
        artifactDir,
        "--upload-prefix",
        target.uploadPrefix(r),
        ...target.args(r),
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
      states.leftoverProbes = Math.max(states.leftoverProbes ?? 0, remote.probes);
      lastState = { committed: true, receipt: true };
    },
    budgetMs: crashBudgetMs(420_000, suiteKills),
    log: (line) => console.log(line),
  });
  console.log(`publish crash states (remote/receipt): ${JSON.stringify(states)}`);
  expect(report.kills).toBeGreaterThanOrEqual(suiteKills);
  expect(report.earlyKills + report.workKills).toBe(report.kills);
  // Some kills must have landed after the archive was started, or the suite proved little.
  const beyondStart = Object.entries(states)
    .filter(([label]) => label.includes("/") && label !== "empty/no-receipt")
    .reduce((sum, [, n]) => sum + n, 0);
  expect(beyondStart).toBeGreaterThan(0);
  return { report, states };
}

describe("ckpt artifact publish under SIGKILL", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let template: BuiltArtifact;
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-publish-");
    // Enough shards that publishing (a request, or a fsync, per file) outlasts the start-up noise.
    template = await writeArtifact(join(tmp.dir, "template"), { shards: 24, modelBytes: 8 * 1024 * 1024 });
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(
    `file://: keeps the archive invariants across ${kills} kills (seed ${seed})`,
    async () => {
      const remoteRoot = (r: number) => join(tmp.dir, "file", `round${r}`, "remote");
      await runPublishSuite(
        join(tmp.dir, "file"),
        template,
        {
          args: (r) => ["--bucket", `file://${remoteRoot(r)}`],
          uploadPrefix: () => template.uploadPrefix,
          archive: (r) => openStore(`file://${remoteRoot(r)}/${template.archivePrefix}`),
          plantForeign: async (r) => {
            // Another archive's files beside this one and foreign files in the archive root.
            const other = join(remoteRoot(r), dirname(template.archivePrefix), "iter_000000299");
            await mkdir(other, { recursive: true });
            await plantForeign(other, "other");
            const before = await plantForeign(remoteRoot(r), "root"); // snapshots the whole root
            return () => assertForeignIntact(remoteRoot(r), before);
          },
        },
        kills,
      );
    },
    crashBudgetMs(450_000, kills),
  );

  it(`real S3: keeps the archive invariants across ${S3_KILLS} kills (seed ${seed})`, async () => {
    const env = s3TestEnv();
    const { bucket, cleanup } = await createTestBucket(env, "crashpub");
    const credentials = join(tmp.dir, "s3-credentials.json");
    await writeFile(credentials, JSON.stringify(testCredentials(env)));
    const rootStore = await openStore(`s3://${bucket}`, { credentials: testCredentials(env) });
    // Each round archives under its own project segment of the same bucket.
    const archivePrefix = (r: number) => template.archivePrefix.replace(/^proj\//, `proj${r + 10}/`);
    try {
      await runPublishSuite(
        join(tmp.dir, "s3"),
        template,
        {
          args: () => ["--bucket", bucket, "--credentials", credentials],
          uploadPrefix: (r) => template.uploadPrefix.replace(/^proj\//, `proj${r + 10}/`),
          archive: (r) =>
            openStore(`s3://${bucket}/${archivePrefix(r)}`, { credentials: testCredentials(env) }),
          plantForeign: async (r) => {
            const foreign = new Map([
              [`${dirname(archivePrefix(r))}/iter_000000299/model.pt`, seededBytes(70_000, r + 1)],
              [`foreign-${r}/keep.bin`, seededBytes(5_000, r + 2)],
            ]);
            for (const [key, bytes] of foreign) await rootStore.put(key, bytes);
            return async () => {
              for (const [key, bytes] of foreign) {
                const chunks: Buffer[] = [];
                for await (const chunk of await rootStore.get(key)) chunks.push(chunk as Buffer);
                if (sha256(Buffer.concat(chunks)) !== sha256(bytes))
                  throw new Error(`foreign object ${key} changed`);
              }
            };
          },
        },
        S3_KILLS,
      );
    } finally {
      await cleanup();
    }
  }, 450_000);
});
