// @module-tag crash
// @module-tag s3
// SIGKILL `ckpt artifact fetch` (the real CLI, a child process) at seeded random instants while
// it stages an archive (10% of the kills over the CLI's start-up, 90% over the rest of an
// uninterrupted run), and prove after every kill:
// - the staging directory is absent, holds nothing but ckpt's own record, or has a valid
//   `.staged.json` whose files are all declared; when it says `complete: true` (or the local
//   native manifest, which comes after every payload, is in place) every fetched file is there
//   with the declared size and digest;
// - no foreign file or directory planted in the staging root (or inside the staged copy) was
//   removed or changed, and nothing but the record's files, their `.part`s and foreign files is
//   in the staged copy;
// - the archive itself is untouched;
// and after each round a re-run completes (resuming the staged copy) and reports the staged path.
// Three suites: 100+ kills against a file:// archive; a smaller run against the real S3 server;
// and a smaller run replacing ckpt's own complete copy of another archive (only the files its
// record names may go).
// Replay: CKPT_CRASH_SEED=<seed from the test name> [CKPT_CRASH_KILLS=n].
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fetchArtifact } from "@ckpt/archive-reader";
import { publishArtifact } from "@ckpt/archive-publisher";
import { ARTIFACT_MANIFEST, STAGED_RECORD, type ArchiveDeclaration, sha256Hex } from "@ckpt/manifest";
import { type ObjectStore, openStore } from "@ckpt/object-store";
import { createTestBucket, makeTempDir, s3TestEnv, testCredentials } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkRemoteArchive, checkStaged, type StagedLabel } from "../helpers/archive-state.js";
import {
  assertForeignIntact,
  type BuiltArtifact,
  plantForeign,
  snapshotTree,
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
/** The smaller suites: each run costs network round trips to Ceph, or a full staging to replace. */
const S3_KILLS = 20;
const REPLACE_KILLS = 24;

/** writeFileAtomic's temporary of the staged native manifest. */
const MANIFEST_TEMPORARY = new RegExp(
  `^\\.${ARTIFACT_MANIFEST.fileName.replaceAll(".", "\\.")}\\.tmp-\\d+-[0-9a-f]{12}$`,
);

/** A published archive as the suites read it: its URI, its declaration, and a fingerprint. */
interface Archive {
  readonly uri: string;
  readonly args: readonly string[];
  readonly declaration: ArchiveDeclaration;
  /** Key -> size and etag of every object, to prove the fetch changed nothing. */
  readonly fingerprint: () => Promise<Map<string, string>>;
  readonly store: ObjectStore;
}

async function publishedArchive(
  artifact: BuiltArtifact,
  uri: string,
  open: (uri: string) => Promise<ObjectStore>,
  args: readonly string[] = [],
): Promise<Archive> {
  const store = await open(uri);
  await publishArtifact(artifact.dir, store);
  const remote = await checkRemoteArchive(store, "", artifact.files);
  expect(remote.label).toBe("committed");
  const fingerprint = async () => {
    const out = new Map<string, string>();
    for await (const info of store.list("")) out.set(info.key, `${info.size} ${info.etag ?? ""}`);
    return out;
  };
  return { uri, args, declaration: remote.declaration!, fingerprint, store };
}

/** Which of `archives` a staging record's source names (by its manifest digest). */
function sourceOf(archives: readonly Archive[], manifestSha256: string): Archive {
  const found = archives.find((a) => a.declaration.manifest_sha256 === manifestSha256);
  if (found === undefined) throw new Error(`staging record names an unknown source ${manifestSha256}`);
  return found;
}

/** Every regular file below `dir` (relative paths). */
async function filesBelow(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return [];
      throw error;
    },
  );
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/**
 * The staged copy's state against whichever archive its record names: `checkStaged`'s invariants,
 * plus that nothing else is in it but the record's files, their `.part`s, the record's own
 * temporaries and the foreign files planted there.
 */
async function checkStage(
  iterDir: string,
  archives: readonly Archive[],
  foreignInside: ReadonlySet<string>,
): Promise<{ label: StagedLabel; source?: Archive }> {
  const recordBytes = await readFile(join(iterDir, STAGED_RECORD.fileName)).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    },
  );
  if (recordBytes === undefined) {
    // Without a record only foreign files (and a record temporary) may be there.
    const exists = await readdir(iterDir).then(
      () => true,
      () => false,
    );
    const stray = (await filesBelow(iterDir)).filter(
      (p) => !foreignInside.has(p) && !p.startsWith(`.${STAGED_RECORD.fileName}`),
    );
    if (stray.length > 0)
      throw new Error(`staged copy ${iterDir} holds ${stray.join(", ")} without a record`);
    return { label: exists ? "no-record" : "absent" };
  }
  const record = STAGED_RECORD.parse(recordBytes, join(iterDir, STAGED_RECORD.fileName));
  const source = sourceOf(archives, record.source.manifest_sha256);
  const label = await checkStaged(iterDir, source.declaration);
  const allowed = new Set(record.files.flatMap((f) => [f.path, `${f.path}.part`]));
  for (const path of await filesBelow(iterDir)) {
    if (path === STAGED_RECORD.fileName || path.startsWith(`.${STAGED_RECORD.fileName}`)) continue;
    // A kill while the native manifest was being written leaves its temporary (the next run clears it).
    if (MANIFEST_TEMPORARY.test(path)) continue;
    if (!allowed.has(path) && !foreignInside.has(path)) {
      throw new Error(`staged copy ${iterDir} holds ${path}, which neither its record nor anyone else owns`);
    }
  }
  return { label, source };
}

interface FetchSuite {
  /** The archive fetched. */
  readonly archive: Archive;
  /** Another archive a round stages first, complete, for the fetch to replace (optional). */
  readonly replaces?: Archive;
  readonly kills: number;
}

async function runFetchSuite(
  tmp: string,
  iterName: string,
  suite: FetchSuite,
): Promise<{ report: CrashReport; states: Record<string, number> }> {
  const { archive, replaces } = suite;
  const archives = replaces === undefined ? [archive] : [archive, replaces];
  let stageRoot = "";
  let foreignRoot = new Map<string, string>();
  let foreignInside = new Map<string, string>();
  const iterDir = () => join(stageRoot, iterName);
  const before = await archive.fingerprint();
  const untouched = async () => {
    expect(await archive.fingerprint()).toEqual(before);
  };
  const states: Record<string, number> = {};
  const fetchInto = (dst: string) =>
    cli(["artifact", "fetch", "--artifact-uri", archive.uri, "--dst", dst, ...archive.args, "--json"]);
  // The CLI loads its libraries once a command runs: "start-up" is a fetch with nothing to do
  // (an up-to-date copy), so that most kills land while files are being staged.
  const upToDate = join(tmp, "up-to-date");
  await fetchArtifact(archive.store, upToDate, { uri: archive.uri });

  const report = await runCrashSuite({
    seed,
    kills: suite.kills,
    killsPerRound: 8,
    startup: fetchInto(upToDate),
    untouched: (state) => state === "absent" || state === "old:complete",
    command: () => fetchInto(stageRoot),
    prepare: async (round) => {
      if (stageRoot !== "") await rm(stageRoot, { recursive: true, force: true });
      stageRoot = join(tmp, `stage${round}`);
      await mkdir(stageRoot, { recursive: true });
      // Someone else's files in the staging root, including a directory shaped like an artifact.
      await mkdir(join(stageRoot, "iter_000000299"), { recursive: true });
      await plantForeign(join(stageRoot, "iter_000000299"), "other");
      foreignInside = new Map();
      if (replaces !== undefined) {
        // ckpt's own complete copy of another archive, with someone's notes beside its files.
        await fetchArtifact(replaces.store, stageRoot, { uri: replaces.uri });
        expect((await checkStage(iterDir(), archives, new Set())).label).toBe("complete");
        await writeFile(join(iterDir(), "notes-not-ckpt.txt"), `kept by whoever wrote it, round ${round}\n`);
        foreignInside = new Map([
          ["notes-not-ckpt.txt", sha256Hex(await readFile(join(iterDir(), "notes-not-ckpt.txt")))],
        ]);
      }
      foreignRoot = await plantForeign(stageRoot, "root"); // snapshots the staged copy too
    },
    afterKill: async () => {
      const { label, source } = await checkStage(iterDir(), archives, new Set(foreignInside.keys()));
      await assertForeignIntact(
        stageRoot,
        new Map([...foreignRoot].filter(([p]) => !p.startsWith(`${iterName}/`))),
      );
      await assertForeignIntact(iterDir(), foreignInside);
      await untouched();
      const state = replaces === undefined ? label : `${source === replaces ? "old" : "new"}:${label}`;
      states[state] = (states[state] ?? 0) + 1;
      return state;
    },
    afterCompletion: async ({ previous, result }) => {
      const out = JSON.parse(result.stdout) as {
        ok: boolean;
        staged_dir: string;
        up_to_date: boolean;
        removed: string[];
      };
      expect(out.ok).toBe(true);
      expect(out.staged_dir).toBe(iterDir());
      if (previous === "completed") expect(out.up_to_date).toBe(true);
      const { label, source } = await checkStage(iterDir(), archives, new Set(foreignInside.keys()));
      expect(label).toBe("complete");
      expect(source).toBe(archive);
      // A finished run leaves none of its temporaries behind, whatever the kills before it left.
      const temporaries = (await filesBelow(iterDir())).filter((p) => p.includes(".tmp-"));
      expect(temporaries).toEqual([]);
      if (replaces !== undefined) {
        // Whatever this run removed, the other archive's record named it; and none of that
        // archive's files is left (checkStage allows only the new record's files and foreign ones).
        const theirs = new Set(replaces.declaration.files.map((f) => f.path));
        for (const path of out.removed) expect(theirs.has(path.replace(/\.part$/, ""))).toBe(true);
      }
      await assertForeignIntact(iterDir(), foreignInside);
      await untouched();
    },
    budgetMs: crashBudgetMs(420_000, suite.kills),
    log: (line) => console.log(line),
  });
  console.log(`fetch crash states: ${JSON.stringify(states)}`);
  expect(report.kills).toBeGreaterThanOrEqual(suite.kills);
  expect(report.earlyKills + report.workKills).toBe(report.kills);
  // Some kills must have found a staging record of the fetched archive, or the suite proved little.
  const staged = Object.entries(states)
    .filter(([state]) => /(^|new:)(incomplete|incomplete\+manifest|complete)$/.test(state))
    .reduce((sum, [, n]) => sum + n, 0);
  expect(staged).toBeGreaterThan(0);
  return { report, states };
}

describe("ckpt artifact fetch under SIGKILL", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let artifact: BuiltArtifact;
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-crash-fetch-");
    // Enough shards that staging (a fsync and a rename per file) outlasts the start-up noise.
    artifact = await writeArtifact(join(tmp.dir, "local"), { shards: 24, modelBytes: 8 * 1024 * 1024 });
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it(
    `file://: keeps the staging invariants across ${kills} kills (seed ${seed})`,
    async () => {
      const archive = await publishedArchive(
        artifact,
        `file://${join(tmp.dir, "remote")}/${artifact.archivePrefix}`,
        (uri) => openStore(uri),
      );
      const before = await snapshotTree(join(tmp.dir, "remote"));
      await runFetchSuite(join(tmp.dir, "file"), artifact.iterDir, { archive, kills });
      expect(await snapshotTree(join(tmp.dir, "remote"))).toEqual(before);
    },
    crashBudgetMs(450_000, kills),
  );

  it(`real S3: keeps the staging invariants across ${S3_KILLS} kills (seed ${seed})`, async () => {
    const env = s3TestEnv();
    const { bucket, cleanup } = await createTestBucket(env, "crashfetch");
    try {
      const credentials = join(tmp.dir, "s3-credentials.json");
      await writeFile(credentials, JSON.stringify(testCredentials(env)));
      const archive = await publishedArchive(
        artifact,
        `s3://${bucket}/${artifact.archivePrefix}`,
        (uri) => openStore(uri, { credentials: testCredentials(env) }),
        ["--credentials", credentials],
      );
      await runFetchSuite(join(tmp.dir, "s3"), artifact.iterDir, { archive, kills: S3_KILLS });
    } finally {
      await cleanup();
    }
  }, 450_000);

  it(`replacing its own copy of another archive: keeps the invariants across ${REPLACE_KILLS} kills (seed ${seed})`, async () => {
    // Same iteration, other contents, and more shards: the old copy has files the new one lacks.
    // Many shards, so that removing the old copy and staging the new one take a while to kill.
    const fresh = await writeArtifact(join(tmp.dir, "new-local"), { seed: 3, shards: 32 });
    const other = await writeArtifact(join(tmp.dir, "old-local"), { seed: 9, shards: 36 });
    const previous = await publishedArchive(
      other,
      `file://${join(tmp.dir, "remote-old")}/${other.archivePrefix}`,
      (uri) => openStore(uri),
    );
    const archive = await publishedArchive(
      fresh,
      `file://${join(tmp.dir, "remote-new")}/${fresh.archivePrefix}`,
      (uri) => openStore(uri),
    );
    const { states } = await runFetchSuite(join(tmp.dir, "replace"), fresh.iterDir, {
      archive,
      replaces: previous,
      kills: REPLACE_KILLS,
    });
    // Kills must have caught the replacement itself, not only the old or the new copy at rest.
    expect(Object.keys(states).some((s) => s.startsWith("new:") && s !== "new:complete")).toBe(true);
  }, 450_000);
});
