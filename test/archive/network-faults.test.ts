// @module-tag s3
// Publish and fetch through a loopback fault proxy in front of the real S3 server (Ceph RGW on
// 127.0.0.1): per connection, a seeded schedule passes, resets (at connect, after the request,
// mid-response), stalls or truncates. Every run must either complete or fail with a coded error
// (never INTERNAL, i.e. an untyped exception), and after every run the remote state, read
// directly from the server, must hold: no native manifest unless every declared payload is there
// with the declared size, digest metadata and content. A chain of attempts is finished by a
// clean run, which must complete (what the faults left is resumable).
// Replay: CKPT_FAULT_SEED=<seed from the test name>.
import { cp, mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fetchArtifact } from "@ckpt/archive-reader";
import { publishArtifact } from "@ckpt/archive-publisher";
import type { ArchiveDeclaration } from "@ckpt/manifest";
import { openStore } from "@ckpt/object-store";
import { createTestBucket, makeTempDir, s3TestEnv, seedFrom, testCredentials } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkReceipt, checkRemoteArchive, checkStaged } from "../helpers/archive-state.js";
import { type BuiltArtifact, writeArtifact } from "../helpers/artifact.js";
import { cli, type RunResult, runNode } from "../helpers/crash.js";
import { type FaultProxy, seededSchedule, startFaultProxy } from "../helpers/fault-proxy.js";

const seed = seedFrom("CKPT_FAULT_SEED");
const CHAINS = 5; // per command
const ATTEMPTS = 3; // faulty attempts per chain before the clean one
const STALL_MS = 1_500; // the CLI's per-request timeout is 120 s: its stalls end in a reset

const CKPT_CODE = /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$/;

interface Outcome {
  readonly ok: boolean;
  readonly code?: string;
}

/** A CLI run must exit 0 with ok, or 1 with a coded (not INTERNAL) JSON error. */
function outcomeOf(result: RunResult, where: string): Outcome {
  const context = `${where} (replay: CKPT_FAULT_SEED=${seed}): exit ${result.code ?? result.signal}\n${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}`;
  if (result.timedOut) throw new Error(`hung: ${context}`);
  let report: { ok?: boolean; error?: { code?: unknown; message?: unknown } };
  try {
    report = JSON.parse(result.stdout);
  } catch {
    throw new Error(`no JSON report: ${context}`);
  }
  if (result.code === 0 && report.ok === true) return { ok: true };
  if (result.code !== 1) throw new Error(`unexpected exit code: ${context}`);
  const code = report.error?.code;
  // A ckpt code names its package and reason (STORE_TRANSIENT, READER_...); a bare errno
  // (ECONNRESET) or Node's ERR_* is an exception nobody classified.
  if (
    typeof code !== "string" ||
    code === "INTERNAL" ||
    !CKPT_CODE.test(code) ||
    code.startsWith("ERR_") ||
    typeof report.error?.message !== "string"
  ) {
    throw new Error(`failure without a clear coded error: ${context}`);
  }
  return { ok: false, code };
}

describe("publish and fetch through network faults (real S3 behind a fault proxy)", () => {
  const env = s3TestEnv();
  const upstreamPort = () => Number(new URL(env.endpoint).port);
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let bucket: string;
  let dropBucket: () => Promise<void>;
  let template: BuiltArtifact;
  let cleanCredentials: string;
  const outcomes: Record<string, number> = {};
  const count = (key: string) => {
    outcomes[key] = (outcomes[key] ?? 0) + 1;
  };

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-net-faults-");
    ({ bucket, cleanup: dropBucket } = await createTestBucket(env, "netfaults"));
    template = await writeArtifact(join(tmp.dir, "template"));
    cleanCredentials = join(tmp.dir, "clean.json");
    await writeFile(cleanCredentials, JSON.stringify(testCredentials(env)));
  });
  afterAll(async () => {
    console.log(`network fault outcomes (seed ${seed}): ${JSON.stringify(outcomes)}`);
    await dropBucket();
    await tmp.cleanup();
  });

  /** A proxy with the schedule of (chain, attempt), and a credentials file that points at it. */
  async function faultyPath(label: string, chain: number, attempt: number) {
    const runSeed = (seed + chain * 7919 + attempt * 104729) >>> 0;
    const proxy = await startFaultProxy({
      upstreamPort: upstreamPort(),
      schedule: seededSchedule(
        runSeed,
        { pass: 3, reset: 1.5, stall: 0.5, truncate: 1 },
        { stallMs: STALL_MS, maxTruncateBytes: 2048 },
      ),
      // Chains differ in how hard they are hit: a few faults (retries absorb them) up to more
      // than the retry budget of one request.
      maxFaults: 2 + ((chain + attempt) % 3) * 5,
      maxStallMs: STALL_MS,
    });
    const credentials = join(tmp.dir, `${label}-${chain}-${attempt}.json`);
    await writeFile(credentials, JSON.stringify({ ...testCredentials(env), endpoint_url: proxy.endpoint }));
    return { proxy, credentials };
  }

  const directStore = (prefix: string) =>
    openStore(`s3://${bucket}/${prefix}`, { credentials: testCredentials(env) });

  it(`publish: ${CHAINS} chains of ${ATTEMPTS} faulty attempts and a clean one (seed ${seed})`, async () => {
    for (let chain = 0; chain < CHAINS; chain++) {
      const uploadPrefix = template.uploadPrefix.replace(/^proj\//, `proj${chain}/`);
      const archivePrefix = template.archivePrefix.replace(/^proj\//, `proj${chain}/`);
      const artifactDir = join(tmp.dir, `publish${chain}`, template.iterDir);
      await mkdir(dirname(artifactDir), { recursive: true });
      await cp(template.dir, artifactDir, { recursive: true });
      const args = (credentials: string) => [
        "artifact",
        "publish",
        "--artifact-dir",
        artifactDir,
        "--upload-prefix",
        uploadPrefix,
        "--bucket",
        bucket,
        "--credentials",
        credentials,
        "--json",
      ];
      const check = async () => {
        const remote = await checkRemoteArchive(await directStore(archivePrefix), "", template.files);
        await checkReceipt(artifactDir, remote);
        return remote.label;
      };
      let published = false;
      for (let attempt = 0; attempt < ATTEMPTS && !published; attempt++) {
        const { proxy, credentials } = await faultyPath("publish", chain, attempt);
        let result: RunResult;
        try {
          result = await runNode(cli(args(credentials)), { timeoutMs: 90_000 });
        } finally {
          await proxy.close();
        }
        const where = `publish chain ${chain} attempt ${attempt} faults ${JSON.stringify(proxy.counts())}`;
        const outcome = outcomeOf(result, where);
        const label = await check().catch((e: Error) => {
          throw new Error(`${where} (replay: CKPT_FAULT_SEED=${seed}): ${e.message}`);
        });
        count(`publish ${outcome.ok ? "ok" : outcome.code}`);
        if (outcome.ok) expect(label).toBe("committed");
        published = outcome.ok;
      }
      const clean = outcomeOf(
        await runNode(cli(args(cleanCredentials)), { timeoutMs: 90_000 }),
        `publish chain ${chain} clean run`,
      );
      expect(clean.ok).toBe(true);
      expect(await check()).toBe("committed");
    }
  }, 280_000);

  it(`fetch: ${CHAINS} chains of ${ATTEMPTS} faulty attempts and a clean one (seed ${seed})`, async () => {
    const archivePrefix = template.archivePrefix.replace(/^proj\//, "fetchsrc/");
    const source = await directStore(archivePrefix);
    const localCopy = join(tmp.dir, "fetchsrc", template.iterDir);
    await mkdir(dirname(localCopy), { recursive: true });
    await cp(template.dir, localCopy, { recursive: true });
    await publishArtifact(localCopy, source);
    const declaration = (await checkRemoteArchive(source, "", template.files))
      .declaration as ArchiveDeclaration;
    const uri = `s3://${bucket}/${archivePrefix}`;
    for (let chain = 0; chain < CHAINS; chain++) {
      const dst = join(tmp.dir, `fetch${chain}`);
      const args = (credentials: string) => [
        "artifact",
        "fetch",
        "--artifact-uri",
        uri,
        "--dst",
        dst,
        "--credentials",
        credentials,
        "--json",
      ];
      let fetched = false;
      for (let attempt = 0; attempt < ATTEMPTS && !fetched; attempt++) {
        const { proxy, credentials } = await faultyPath("fetch", chain, attempt);
        let result: RunResult;
        try {
          result = await runNode(cli(args(credentials)), { timeoutMs: 90_000 });
        } finally {
          await proxy.close();
        }
        const where = `fetch chain ${chain} attempt ${attempt} faults ${JSON.stringify(proxy.counts())}`;
        const outcome = outcomeOf(result, where);
        const label = await checkStaged(join(dst, template.iterDir), declaration).catch((e: Error) => {
          throw new Error(`${where} (replay: CKPT_FAULT_SEED=${seed}): ${e.message}`);
        });
        count(`fetch ${outcome.ok ? "ok" : outcome.code}`);
        if (outcome.ok) expect(label).toBe("complete");
        fetched = outcome.ok;
      }
      const clean = outcomeOf(
        await runNode(cli(args(cleanCredentials)), { timeoutMs: 90_000 }),
        `fetch chain ${chain} clean run`,
      );
      expect(clean.ok).toBe(true);
      expect(await checkStaged(join(dst, template.iterDir), declaration)).toBe("complete");
      await rm(dst, { recursive: true, force: true });
    }
    // The archive was only read.
    expect((await checkRemoteArchive(source, "", template.files)).label).toBe("committed");
  }, 280_000);

  it("fetch: bodies cut mid-stream are continued in place by ranged GETs, and the one run completes", async () => {
    const archivePrefix = template.archivePrefix.replace(/^proj\//, "resume/");
    const source = await directStore(archivePrefix);
    const localCopy = join(tmp.dir, "resume-src", template.iterDir);
    await mkdir(dirname(localCopy), { recursive: true });
    await cp(template.dir, localCopy, { recursive: true });
    await publishArtifact(localCopy, source);
    const declaration = (await checkRemoteArchive(source, "", template.files))
      .declaration as ArchiveDeclaration;
    // Every connection is closed once 1.5 MiB of answers went through it: the 4 MiB model.pt
    // (and a connection's sixth shard) break mid-body, again and again, each time further on.
    const limit = 1536 * 1024;
    const proxy = await startFaultProxy({
      upstreamPort: upstreamPort(),
      schedule: () => ({ kind: "truncate", bytes: limit }),
    });
    const credentials = join(tmp.dir, "resume-proxy.json");
    await writeFile(credentials, JSON.stringify({ ...testCredentials(env), endpoint_url: proxy.endpoint }));
    const dst = join(tmp.dir, "resume-fetch");
    let result: RunResult;
    try {
      result = await runNode(
        cli([
          "artifact",
          "fetch",
          "--artifact-uri",
          `s3://${bucket}/${archivePrefix}`,
          "--dst",
          dst,
          "--credentials",
          credentials,
          "--json",
        ]),
        { timeoutMs: 90_000 },
      );
    } finally {
      await proxy.close();
    }
    const outcome = outcomeOf(result, "fetch through a proxy cutting every connection after 1.5 MiB");
    expect(outcome.ok).toBe(true);
    const report = JSON.parse(result.stdout) as { resumed_in_place: number; downloaded_bytes: number };
    expect(proxy.records.filter((r) => r.responseBytes >= limit).length).toBeGreaterThan(0);
    expect(report.resumed_in_place).toBeGreaterThan(0);
    expect(await checkStaged(join(dst, template.iterDir), declaration)).toBe("complete");
    count(`fetch resumed in place ${report.resumed_in_place} times`);
  }, 120_000);

  it(`library with a short request timeout: stalls past it end in coded errors (seed ${seed})`, async () => {
    // The CLI has no per-request timeout option (120 s default), so a stall longer than the
    // client's timeout is exercised through the libraries the CLI calls, in this process.
    const archivePrefix = template.archivePrefix.replace(/^proj\//, "stall/");
    const artifactDir = join(tmp.dir, "stall", template.iterDir);
    await mkdir(dirname(artifactDir), { recursive: true });
    await cp(template.dir, artifactDir, { recursive: true });
    let proxy: FaultProxy | undefined;
    const open = async (action: "stall" | "pass", prefix: string) => {
      proxy = await startFaultProxy({
        upstreamPort: upstreamPort(),
        schedule: (n) =>
          action === "stall" && n % 2 === 0 ? { kind: "stall", ms: 2_000 } : { kind: "pass" },
        maxFaults: 6,
        maxStallMs: 2_000,
      });
      return openStore(`s3://${bucket}/${prefix}`, {
        credentials: { ...testCredentials(env), endpoint_url: proxy.endpoint },
        timeoutMs: 400,
        retry: { retries: 1, baseDelayMs: 10, maxDelayMs: 50 },
      });
    };
    const coded = (e: unknown) => {
      expect(e).toBeInstanceOf(Error);
      expect(typeof (e as { code?: unknown }).code).toBe("string");
      return (e as { code: string }).code;
    };
    try {
      const store = await open("stall", archivePrefix);
      const published = await publishArtifact(artifactDir, store).then(
        () => "ok",
        (e: unknown) => coded(e),
      );
      count(`library publish ${published}`);
      expect(proxy!.counts().stall).toBeGreaterThan(0);
      await proxy!.close();
      await checkRemoteArchive(await directStore(archivePrefix), "", template.files);

      const dst = join(tmp.dir, "stall-fetch");
      const reader = await open("stall", archivePrefix);
      const fetched = await fetchArtifact(reader, dst).then(
        () => "ok",
        (e: unknown) => coded(e),
      );
      count(`library fetch ${fetched}`);
      await proxy!.close();
    } finally {
      await proxy?.close();
    }
    // Clean runs finish both.
    const direct = await directStore(archivePrefix);
    await publishArtifact(artifactDir, direct);
    expect((await checkRemoteArchive(direct, "", template.files)).label).toBe("committed");
    await fetchArtifact(direct, join(tmp.dir, "stall-fetch"));
  }, 120_000);
});
