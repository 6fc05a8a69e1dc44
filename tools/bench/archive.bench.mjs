// Archive benchmark: `ckpt artifact publish` / `ckpt artifact fetch` against reference tools on
// the same 1 GiB artifact and the same real S3 server (Ceph RGW on 127.0.0.1), in one run:
//   publish: ckpt  vs  tools/bench/reference_publish.py (boto3: hashlib, upload_file with the
//            default TransferConfig, HEAD-verify)  vs  `rclone copy`
//   fetch:   ckpt  vs  `rclone copy` + `sha256sum` of every file
// Targets: publish <= 0.8x boto3 and <= 1.0x rclone; fetch <= 1.0x rclone+sha256sum; ckpt peak
// RSS <= 256 MiB (/usr/bin/time -f %M). The CPU seconds of each tool (user + system, not the S3
// server's) are printed beside its time. Build first: pnpm turbo run build && pnpm bench archive
// Knobs (environment): CKPT_BENCH_REPS (3), CKPT_BENCH_ARCHIVE_MIB (1024, the artifact size),
// CKPT_BENCH_SHARD_MIB (2, the DCP shard size). The S3 server is the one AWS_ENDPOINT_URL /
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY name, else a private Ceph started here
// (tools/s3-server/ceph-s3.sh under its own CEPH_S3_DIR and free ports) and stopped afterwards.
import { execFileSync } from "node:child_process";
import { randomFillSync } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, open, readdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MiB, median, pinnedCli, printTable, run, timedProcess } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");
const cliDist = join(repo, "apps", "cli", "dist", "bin.js");
const manifestDist = join(repo, "packages", "manifest", "dist", "index.js");
const tensorsDist = join(repo, "packages", "tensors", "dist", "index.js");
for (const need of [cliDist, manifestDist]) {
  if (!existsSync(need)) {
    console.error(`missing ${need}; run: pnpm turbo run build`);
    process.exit(2);
  }
}
for (const tool of ["/usr/bin/python3", "/usr/bin/time", "rclone", "sha256sum"]) {
  try {
    execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
  } catch {
    console.error(`missing ${tool}; apt-get install -y --no-install-recommends python3-boto3 rclone time`);
    process.exit(2);
  }
}

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const REPS = env("CKPT_BENCH_REPS", 3);
const TOTAL_MIB = env("CKPT_BENCH_ARCHIVE_MIB", 1024);
const SHARD_MIB = env("CKPT_BENCH_SHARD_MIB", 2);

const scratch = await mkdtemp(join(tmpdir(), "ckpt-bench-archive-"));
let stopServer = async () => {};
const cleanupAll = async () => {
  await stopServer().catch((e) => console.error(`stopping the S3 server: ${e.message}`));
  await rm(scratch, { recursive: true, force: true });
};
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    cleanupAll().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// S3 server
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

let cephDir;
async function s3Server() {
  const e = process.env;
  if (e.AWS_ENDPOINT_URL && e.AWS_ACCESS_KEY_ID && e.AWS_SECRET_ACCESS_KEY) {
    const host = new URL(e.AWS_ENDPOINT_URL).hostname;
    if (host !== "127.0.0.1" && host !== "localhost")
      throw new Error(`refusing a non-loopback endpoint ${e.AWS_ENDPOINT_URL}`);
    return {
      endpoint: e.AWS_ENDPOINT_URL,
      accessKeyId: e.AWS_ACCESS_KEY_ID,
      secretAccessKey: e.AWS_SECRET_ACCESS_KEY,
      region: e.AWS_REGION ?? "us-east-1",
    };
  }
  cephDir = `/tmp/ckpt-bench-ceph-${process.pid}`;
  const cephEnv = {
    ...process.env,
    CEPH_S3_DIR: cephDir,
    CEPH_S3_PORT: String(await freePort()),
    CEPH_S3_MON_PORT: String(await freePort()),
    // memstore holds the data in RAM (~1.8x); objects are deleted and collected between samples.
    CEPH_S3_MEM_BYTES: String(Math.max(4, Math.ceil((TOTAL_MIB * 4) / 1024)) * 1024 ** 3),
  };
  const script = join(repo, "tools", "s3-server", "ceph-s3.sh");
  const out = await run(script, ["start"], { env: cephEnv });
  stopServer = () => run(script, ["stop"], { env: cephEnv });
  const vars = Object.fromEntries([...out.matchAll(/^export ([A-Z0-9_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]));
  return {
    endpoint: vars.AWS_ENDPOINT_URL,
    accessKeyId: vars.AWS_ACCESS_KEY_ID,
    secretAccessKey: vars.AWS_SECRET_ACCESS_KEY,
    region: vars.AWS_REGION,
  };
}

/** CPU seconds used so far by the Ceph daemons we started (they serve every tool alike). */
function serverCpuSeconds() {
  if (cephDir === undefined) return 0;
  let total = 0;
  for (const line of readFileSync(join(cephDir, "pids"), "utf8").trim().split("\n")) {
    const pid = line.split(" ")[0];
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat
        .slice(stat.lastIndexOf(")") + 2)
        .split(" ")
        .map(Number);
      total += (f[11] + f[12]) / 100;
    } catch {}
  }
  return total;
}

/** Frees deleted objects now instead of after rgw's GC delay (memstore keeps them in RAM). */
async function collectGarbage() {
  if (cephDir === undefined) return;
  await run("radosgw-admin", ["-c", join(cephDir, "ceph.conf"), "gc", "process", "--include-all"]).catch(
    () => {},
  );
}

// ---------------------------------------------------------------------------------------------
// The artifact: model.pt, ref.pt and trainer.pt (large files) + optim/ (a DCP directory of many
// small shards with a real .metadata), native manifest with every digest.
async function writeRandomFile(path, bytes) {
  const handle = await open(path, "w");
  const buffer = Buffer.allocUnsafe(16 * MiB);
  try {
    for (let left = bytes; left > 0; left -= buffer.length) {
      const n = Math.min(left, buffer.length);
      randomFillSync(buffer, 0, n);
      await handle.write(buffer, 0, n);
    }
  } finally {
    await handle.close();
  }
}

async function writeArtifact(root) {
  const { hashFiles, ARTIFACT_MANIFEST } = await import(pathToFileURL(manifestDist).href);
  const dir = join(root, "proj", "grp", "run-a", "20260101000000", "checkpoint_artifacts", "iter_000000300");
  await mkdir(join(dir, "optim"), { recursive: true });
  const big = { "model.pt": 0.375, "ref.pt": 0.125, "trainer.pt": 0.0625 };
  for (const [name, share] of Object.entries(big))
    await writeRandomFile(join(dir, name), Math.round(TOTAL_MIB * share) * MiB);
  const optimMiB = TOTAL_MIB - Object.values(big).reduce((s, x) => s + Math.round(TOTAL_MIB * x), 0);
  // A real DCP .metadata (test/archive/fixtures) naming as many shards as fit the optimizer's share.
  const { parseDcpMetadata } = await import(pathToFileURL(tensorsDist).href);
  const wanted = Math.floor(optimMiB / SHARD_MIB);
  const count = [36, 32, 24, 6].find((n) => n <= wanted) ?? 6;
  const metadataPath = join(repo, "test", "archive", "fixtures", `dcp-shards-${count}.metadata`);
  const metadataBytes = readFileSync(metadataPath);
  await writeFile(join(dir, "optim", ".metadata"), metadataBytes);
  const shardNames = parseDcpMetadata(metadataBytes, metadataPath).files.map((f) => f.relativePath);
  const shardMiB = Math.max(1, Math.floor(optimMiB / shardNames.length));
  for (const name of shardNames) await writeRandomFile(join(dir, "optim", name), shardMiB * MiB);
  const optimNames = [".metadata", ...shardNames];
  const paths = [
    ...Object.keys(big).map((n) => join(dir, n)),
    ...optimNames.map((n) => join(dir, "optim", n)),
  ];
  const digests = await hashFiles(paths);
  const entry = (path) => ({ size: digests.get(path).size, sha256: digests.get(path).sha256 });
  const manifest = {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration: 300,
    format: "consolidated",
    logical_components: ["model", "optimizer", "training_state"],
    physical_components: [
      { name: "model", kind: "file", path: "model.pt", ...entry(join(dir, "model.pt")) },
      {
        name: "optim",
        kind: "dir",
        path: "optim",
        files: optimNames.map((n) => ({ path: n, ...entry(join(dir, "optim", n)) })),
      },
      { name: "ref", kind: "file", path: "ref.pt", ...entry(join(dir, "ref.pt")) },
      { name: "trainer", kind: "file", path: "trainer.pt", ...entry(join(dir, "trainer.pt")) },
    ],
  };
  await writeFile(join(dir, ".posttrain-checkpoint-artifact.json"), ARTIFACT_MANIFEST.serialize(manifest));
  const files = paths.length + 1;
  return { dir, files, shards: shardNames.length, shardMiB };
}

// ---------------------------------------------------------------------------------------------
// One timed process: wall time, peak RSS (/usr/bin/time -f %M), CPU of others (minus the server).
function timed(command, args, options = {}) {
  return timedProcess(command, args, { ...options, excludeCpu: serverCpuSeconds });
}

async function filesBelow(dir) {
  const out = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(join(entry.parentPath ?? entry.path, entry.name));
  }
  return out.sort();
}

// ---------------------------------------------------------------------------------------------
try {
  const cli = await pinnedCli(scratch);
  const s3 = await s3Server();
  const bucket = `ckpt-bench-${process.pid}`;
  const credentials = join(scratch, "credentials.json");
  await writeFile(
    credentials,
    JSON.stringify({
      aws_access_key_id: s3.accessKeyId,
      aws_secret_access_key: s3.secretAccessKey,
      endpoint_url: s3.endpoint,
      region_name: s3.region,
    }),
  );
  const rcloneConfig = join(scratch, "rclone.conf");
  await writeFile(rcloneConfig, "");
  const { AWS_CA_BUNDLE: _caBundle, ...inherited } = process.env; // rclone's S3 client refuses it
  const toolEnv = {
    ...inherited,
    NODE_NO_WARNINGS: "1",
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
    AWS_REGION: s3.region,
    RCLONE_CONFIG: rcloneConfig,
    RCLONE_CONFIG_CEPH_TYPE: "s3",
    RCLONE_CONFIG_CEPH_PROVIDER: "Ceph",
    RCLONE_CONFIG_CEPH_ENDPOINT: s3.endpoint,
    RCLONE_CONFIG_CEPH_ACCESS_KEY_ID: s3.accessKeyId,
    RCLONE_CONFIG_CEPH_SECRET_ACCESS_KEY: s3.secretAccessKey,
    RCLONE_CONFIG_CEPH_REGION: s3.region,
    RCLONE_CONFIG_CEPH_FORCE_PATH_STYLE: "true",
  };
  const opts = { env: toolEnv, cwd: scratch };
  await run("rclone", ["mkdir", `ceph:${bucket}`], opts);
  const purge = async (prefix) => {
    await run("rclone", ["purge", `ceph:${bucket}/${prefix}`], opts).catch(() => {});
    await collectGarbage();
  };

  console.log(`writing a ${TOTAL_MIB} MiB artifact under ${scratch} ...`);
  const artifact = await writeArtifact(join(scratch, "local"));
  const uploadPrefix = (tag) => `${tag}/grp/run-a/20260101000000/checkpoints`;
  const artifactPrefix = (tag) => `${tag}/grp/run-a/20260101000000/checkpoint_artifacts/iter_000000300`;
  console.log(
    `artifact: ${artifact.files} files (model.pt, ref.pt, trainer.pt, optim/ with ${artifact.shards} shards of ${artifact.shardMiB} MiB); ` +
      `server ${s3.endpoint}${cephDir ? ` (private Ceph in ${cephDir})` : ""}; cli ${cli}; ${REPS} reps`,
  );

  const publishers = {
    ckpt: (tag) =>
      timed(
        process.execPath,
        [
          cli,
          "artifact",
          "publish",
          "--artifact-dir",
          artifact.dir,
          "--upload-prefix",
          uploadPrefix(tag),
          "--bucket",
          bucket,
          "--credentials",
          credentials,
          "--json",
        ],
        opts,
      ),
    boto3: (tag) =>
      timed(
        "/usr/bin/python3",
        [
          join(here, "reference_publish.py"),
          "--dir",
          artifact.dir,
          "--bucket",
          bucket,
          "--prefix",
          artifactPrefix(tag),
          "--endpoint",
          s3.endpoint,
        ],
        opts,
      ),
    rclone: (tag) => timed("rclone", ["copy", artifact.dir, `ceph:${bucket}/${artifactPrefix(tag)}`], opts),
  };
  const samples = {
    publish: { ckpt: [], boto3: [], rclone: [] },
    fetch: { ckpt: [], "rclone+sha256sum": [] },
  };
  const names = Object.keys(publishers);
  for (let rep = 0; rep < REPS; rep++) {
    // Rotate the order so drifting load and server state hit every tool alike.
    for (let i = 0; i < names.length; i++) {
      const name = names[(rep + i) % names.length];
      const tag = `${name}${rep}`;
      await rm(join(artifact.dir, ".uploaded"), { force: true });
      const sample = await publishers[name](tag);
      samples.publish[name].push({ rep, ...sample });
      console.log(
        `publish rep ${rep} ${name}: ${sample.seconds.toFixed(2)} s, RSS ${sample.rssMiB.toFixed(0)} MiB${sample.clean ? "" : " (contaminated)"}`,
      );
      await purge(tag);
    }
  }

  // Fetch: one archive published by ckpt, fetched by ckpt and by rclone + sha256sum.
  await rm(join(artifact.dir, ".uploaded"), { force: true });
  await publishers.ckpt("fetchsrc");
  const uri = `s3://${bucket}/${artifactPrefix("fetchsrc")}`;
  for (let rep = 0; rep < REPS; rep++) {
    const order = rep % 2 === 0 ? ["ckpt", "rclone+sha256sum"] : ["rclone+sha256sum", "ckpt"];
    for (const name of order) {
      const dst = join(scratch, `fetch-${name}-${rep}`);
      let sample;
      if (name === "ckpt") {
        sample = await timed(
          process.execPath,
          [
            cli,
            "artifact",
            "fetch",
            "--artifact-uri",
            uri,
            "--dst",
            dst,
            "--credentials",
            credentials,
            "--json",
          ],
          opts,
        );
      } else {
        const copy = await timed(
          "rclone",
          ["copy", `ceph:${bucket}/${artifactPrefix("fetchsrc")}`, dst],
          opts,
        );
        const files = await filesBelow(dst);
        const sum = await timed("sha256sum", files, opts);
        sample = {
          seconds: copy.seconds + sum.seconds,
          rssMiB: Math.max(copy.rssMiB, sum.rssMiB),
          ownCpu: copy.ownCpu + sum.ownCpu,
          otherCpu: copy.otherCpu + sum.otherCpu,
          clean: copy.clean && sum.clean,
        };
      }
      samples.fetch[name].push({ rep, ...sample });
      console.log(
        `fetch rep ${rep} ${name}: ${sample.seconds.toFixed(2)} s, RSS ${sample.rssMiB.toFixed(0)} MiB${sample.clean ? "" : " (contaminated)"}`,
      );
      await rm(dst, { recursive: true, force: true });
    }
  }
  await purge("fetchsrc");
  await run("rclone", ["rmdir", `ceph:${bucket}`], opts).catch(() => {});

  // Ratios are medians of per-rep ratios (samples paired by rep); times are medians of all reps.
  const ratio = (group, a, b) =>
    median(samples[group][a].map((s, i) => s.seconds / samples[group][b][i].seconds));
  const med = (group, name) => median(samples[group][name].map((s) => s.seconds));
  const cpu = (group, name) => median(samples[group][name].map((s) => s.ownCpu));
  const peak = (group, name) => Math.max(...samples[group][name].map((s) => s.rssMiB));
  const dirty = (group, name) => samples[group][name].filter((s) => !s.clean).length;
  const result = {
    bytes: TOTAL_MIB * MiB,
    files: artifact.files,
    reps: REPS,
    publish: {
      ckpt_s: med("publish", "ckpt"),
      boto3_s: med("publish", "boto3"),
      rclone_s: med("publish", "rclone"),
      ckpt_over_boto3: ratio("publish", "ckpt", "boto3"),
      ckpt_over_rclone: ratio("publish", "ckpt", "rclone"),
      ckpt_rss_mib: peak("publish", "ckpt"),
      boto3_rss_mib: peak("publish", "boto3"),
      rclone_rss_mib: peak("publish", "rclone"),
      ckpt_cpu_s: cpu("publish", "ckpt"),
      boto3_cpu_s: cpu("publish", "boto3"),
      rclone_cpu_s: cpu("publish", "rclone"),
    },
    fetch: {
      ckpt_s: med("fetch", "ckpt"),
      rclone_sha256sum_s: med("fetch", "rclone+sha256sum"),
      ckpt_over_rclone_sha256sum: ratio("fetch", "ckpt", "rclone+sha256sum"),
      ckpt_rss_mib: peak("fetch", "ckpt"),
      rclone_rss_mib: peak("fetch", "rclone+sha256sum"),
      ckpt_cpu_s: cpu("fetch", "ckpt"),
      rclone_cpu_s: cpu("fetch", "rclone+sha256sum"),
    },
    contaminated: {
      publish: Object.fromEntries(Object.keys(samples.publish).map((n) => [n, dirty("publish", n)])),
      fetch: Object.fromEntries(Object.keys(samples.fetch).map((n) => [n, dirty("fetch", n)])),
    },
  };
  const mibps = (s) => ((TOTAL_MIB / s) | 0).toString();
  console.log("");
  printTable(
    [
      "operation",
      "tool",
      "median s",
      "MiB/s",
      "ckpt / tool",
      "target",
      "CPU s",
      "peak RSS MiB",
      "contaminated",
    ],
    [
      [
        "publish",
        "ckpt",
        result.publish.ckpt_s.toFixed(2),
        mibps(result.publish.ckpt_s),
        "-",
        "-",
        cpu("publish", "ckpt").toFixed(1),
        result.publish.ckpt_rss_mib.toFixed(0),
        `${dirty("publish", "ckpt")}/${REPS}`,
      ],
      [
        "publish",
        "boto3 reference",
        result.publish.boto3_s.toFixed(2),
        mibps(result.publish.boto3_s),
        result.publish.ckpt_over_boto3.toFixed(2),
        "<= 0.80",
        cpu("publish", "boto3").toFixed(1),
        result.publish.boto3_rss_mib.toFixed(0),
        `${dirty("publish", "boto3")}/${REPS}`,
      ],
      [
        "publish",
        "rclone copy",
        result.publish.rclone_s.toFixed(2),
        mibps(result.publish.rclone_s),
        result.publish.ckpt_over_rclone.toFixed(2),
        "<= 1.00",
        cpu("publish", "rclone").toFixed(1),
        result.publish.rclone_rss_mib.toFixed(0),
        `${dirty("publish", "rclone")}/${REPS}`,
      ],
      [
        "fetch",
        "ckpt",
        result.fetch.ckpt_s.toFixed(2),
        mibps(result.fetch.ckpt_s),
        "-",
        "-",
        cpu("fetch", "ckpt").toFixed(1),
        result.fetch.ckpt_rss_mib.toFixed(0),
        `${dirty("fetch", "ckpt")}/${REPS}`,
      ],
      [
        "fetch",
        "rclone copy + sha256sum",
        result.fetch.rclone_sha256sum_s.toFixed(2),
        mibps(result.fetch.rclone_sha256sum_s),
        result.fetch.ckpt_over_rclone_sha256sum.toFixed(2),
        "<= 1.00",
        cpu("fetch", "rclone+sha256sum").toFixed(1),
        result.fetch.rclone_rss_mib.toFixed(0),
        `${dirty("fetch", "rclone+sha256sum")}/${REPS}`,
      ],
    ],
  );
  const targets = {
    publish_vs_boto3: result.publish.ckpt_over_boto3 <= 0.8,
    publish_vs_rclone: result.publish.ckpt_over_rclone <= 1.0,
    fetch_vs_rclone_sha256sum: result.fetch.ckpt_over_rclone_sha256sum <= 1.0,
    ckpt_rss: Math.max(result.publish.ckpt_rss_mib, result.fetch.ckpt_rss_mib) <= 256,
  };
  console.log(
    `targets: ${Object.entries(targets)
      .map(([k, v]) => `${k} ${v ? "met" : "MISSED"}`)
      .join(", ")}`,
  );
  console.log(`BENCH_JSON ${JSON.stringify({ bench: "archive", ...result, targets })}`);
} finally {
  await cleanupAll();
}
