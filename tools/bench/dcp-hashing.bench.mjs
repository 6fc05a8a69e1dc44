// DCP hashing benchmark (issue 15 §3), two halves in one run on the same bytes:
//   save:    a 2-rank gloo DCP save with ckpt_dcp's HashingFileSystemWriter against the stock
//            FileSystemWriter (tools/bench/dcp_save.py, alternating), target: added time <= 5 %.
//   publish: `publishArtifact` of the hashing writer's output (committed as a dcp artifact, so its
//            manifest records every shard's digest) to a file:// store, against a plain copy of
//            the same files with an fsync each; targets: payload read once (rchar of this process
//            during the publish, /proc/self/io) and time <= 1.1x the copy.
// Warm page cache for both sides of each comparison (dropping it would disturb the machine's
// other users). Build first: pnpm turbo run build --filter=@ckpt/archive-publisher...
// Knobs (environment): CKPT_BENCH_DCP_MIB (2048, the state saved by both ranks together),
// CKPT_BENCH_DCP_TENSOR_MIB (64), CKPT_BENCH_REPS (5), CKPT_PYTHON (the PyTorch 2 interpreter).
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, open, readdir, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { holdFreeMemory, MiB, measure, median, printTable, run, warmFreeMemory } from "./lib.mjs";

// As the ckpt and ckpt-trainer bins do (apps/cli/src/uv-threads.ts): publish's background flushes
// each hold a thread of libuv's pool. Set before this process's first pooled call; the reference
// copy runs on the same pool.
process.env.UV_THREADPOOL_SIZE ??= "8";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");
const publisherDist = join(repo, "packages", "archive-publisher", "dist", "index.js");
const storeDist = join(repo, "packages", "object-store", "dist", "index.js");
const python = process.env.CKPT_PYTHON ?? join(repo, ".venv", "bin", "python");
for (const need of [publisherDist, storeDist, python]) {
  if (!existsSync(need)) {
    console.error(`missing ${need}; build the packages (and tools/python/venv.sh, or set CKPT_PYTHON)`);
    process.exit(2);
  }
}
const env = (name, fallback) => Number(process.env[name] ?? fallback);
const TOTAL_MIB = env("CKPT_BENCH_DCP_MIB", 2048);
const TENSOR_MIB = env("CKPT_BENCH_DCP_TENSOR_MIB", 64);
const REPS = env("CKPT_BENCH_REPS", 5);

/** Bytes this process has passed through read(2) so far (page-cache hits included). */
function bytesRead() {
  return Number(/^rchar: (\d+)$/m.exec(readFileSync("/proc/self/io", "utf8"))[1]);
}

async function filesUnder(root, prefix = "") {
  const out = [];
  for (const entry of await readdir(join(root, prefix), { withFileTypes: true })) {
    const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await filesUnder(root, relative)));
    else out.push(relative);
  }
  return out;
}

/** The reference: each file read once and written to `dest` in 8 MiB pieces, then fsynced. */
async function plainCopy(src, files, dest) {
  const buffer = Buffer.allocUnsafe(8 * MiB);
  for (const file of files) {
    await mkdir(dirname(join(dest, file)), { recursive: true });
    const input = await open(join(src, file), "r");
    const output = await open(join(dest, file), "w");
    for (;;) {
      const { bytesRead: n } = await input.read(buffer, 0, buffer.length, null);
      if (n === 0) break;
      await output.write(buffer, 0, n);
    }
    await output.sync();
    await Promise.all([input.close(), output.close()]);
  }
}

const work = await mkdtemp(join(tmpdir(), "ckpt-bench-dcp-"));
// torch 2 makes its inductor cache in the temporary directory: keep it in the scratch one.
process.env.TORCHINDUCTOR_CACHE_DIR = join(work, "torchinductor");
const releaseFreeMemory = holdFreeMemory();
process.on("SIGINT", () => {
  releaseFreeMemory();
  rm(work, { recursive: true, force: true }).finally(() => process.exit(130));
});
try {
  // ---- save: stock vs hashing writer -----------------------------------------------------------
  console.log(`DCP save of ${TOTAL_MIB} MiB on 2 gloo ranks, ${REPS} reps of each writer, alternating`);
  const result = join(work, "save.json");
  await run(
    python,
    [join(here, "dcp_save.py"), work, String(TOTAL_MIB), String(TENSOR_MIB), String(REPS), result],
    { env: { ...process.env, PYTHONPATH: join(repo, "apps", "trainer-binding", "python") } },
  );
  const saved = JSON.parse(readFileSync(result, "utf8"));
  const stock = median(saved.times.stock);
  const hashing = median(saved.times.hashing);
  const overhead = hashing / stock - 1;

  // ---- publish: the hashing writer's output as a committed dcp artifact --------------------------
  const { commitArtifact, publishArtifact } = await import(pathToFileURL(publisherDist).href);
  const { createFileStore } = await import(pathToFileURL(storeDist).href);
  const artifact = join(work, "run", "checkpoint_artifacts", "iter_000000001");
  await mkdir(artifact, { recursive: true });
  await run("mv", [saved.dir, join(artifact, "model")]);
  // Commit hashes the payloads (this benchmark has no trainer-side inventory to record); not timed.
  await commitArtifact(artifact, { format: "dcp", components: ["model"] });
  const payload = (await filesUnder(artifact)).filter((f) => f.startsWith("model/"));
  let payloadBytes = 0;
  for (const f of payload) payloadBytes += (await stat(join(artifact, f))).size;
  // Untimed, one of each first: a process's first publish also starts its hashing workers and
  // compiles its code, which a long-lived caller pays once.
  for (const side of ["publish", "copy"]) {
    const dest = join(work, `warm-up-${side}`);
    await mkdir(dest);
    if (side === "publish") await publishArtifact(artifact, createFileStore({ root: dest }));
    else await plainCopy(artifact, payload, dest);
    await unlink(join(artifact, ".uploaded")).catch(() => {});
    await rm(dest, { recursive: true, force: true });
  }
  const samples = { publish: [], copy: [] };
  const reads = [];
  for (let rep = 0; rep < REPS; rep++) {
    for (const side of rep % 2 === 0 ? ["publish", "copy"] : ["copy", "publish"]) {
      const dest = join(work, `${side}-${rep}`);
      await mkdir(dest);
      await warmFreeMemory(work, 2 * payloadBytes);
      // Flush the previous sample's writes, so they are not charged to this sample's fsyncs.
      await run("sync", []);
      if (side === "publish") {
        await unlink(join(artifact, ".uploaded")).catch(() => {});
        const store = createFileStore({ root: dest });
        const before = bytesRead();
        samples.publish.push(await measure(() => publishArtifact(artifact, store)));
        reads.push(bytesRead() - before);
      } else {
        samples.copy.push(await measure(() => plainCopy(artifact, payload, dest)));
      }
      await rm(dest, { recursive: true, force: true });
    }
  }
  const publishS = median(samples.publish.map((s) => s.seconds));
  const copyS = median(samples.copy.map((s) => s.seconds));
  // CPU seconds of this process (all threads) per side: the part of the cost a loaded machine does not blur.
  const publishCpu = median(samples.publish.map((s) => s.ownCpu));
  const copyCpu = median(samples.copy.map((s) => s.ownCpu));
  const readRatio = median(reads) / payloadBytes;
  const dirty = (list) => list.filter((s) => !s.clean).length;

  printTable(
    ["measure", "ckpt (median s)", "reference (median s)", "ratio", "target", "runs (s)"],
    [
      [
        `DCP save ${TOTAL_MIB} MiB, hashing vs stock writer`,
        hashing.toFixed(2),
        stock.toFixed(2),
        `${(hashing / stock).toFixed(3)}×`,
        "≤ 1.05×",
        `hashing ${saved.times.hashing.map((t) => t.toFixed(2)).join(" ")}; stock ${saved.times.stock.map((t) => t.toFixed(2)).join(" ")}`,
      ],
      [
        `publish to file:// vs copy+fsync (${(payloadBytes / MiB).toFixed(0)} MiB)`,
        publishS.toFixed(2),
        copyS.toFixed(2),
        `${(publishS / copyS).toFixed(3)}×`,
        "≤ 1.1×",
        `contaminated: publish ${dirty(samples.publish)}/${REPS}, copy ${dirty(samples.copy)}/${REPS}`,
      ],
      [
        "publish vs copy+fsync, CPU of this process",
        publishCpu.toFixed(2),
        copyCpu.toFixed(2),
        `${(publishCpu / copyCpu).toFixed(3)}×`,
        "",
        `publish ${samples.publish.map((s) => s.ownCpu.toFixed(2)).join(" ")}; copy ${samples.copy.map((s) => s.ownCpu.toFixed(2)).join(" ")}`,
      ],
      [
        "publish bytes read / payload bytes",
        readRatio.toFixed(3),
        "1",
        `${readRatio.toFixed(3)}×`,
        "≈ 1×",
        "",
      ],
    ],
  );
  console.log(
    `BENCH_JSON ${JSON.stringify({
      bench: "dcp-hashing",
      save: { mib: TOTAL_MIB, stock: saved.times.stock, hashing: saved.times.hashing, overhead },
      publish: {
        payloadBytes,
        publish: samples.publish.map((s) => s.seconds),
        copy: samples.copy.map((s) => s.seconds),
        publishCpu: samples.publish.map((s) => s.ownCpu),
        copyCpu: samples.copy.map((s) => s.ownCpu),
        readBytes: reads,
      },
    })}`,
  );
} finally {
  releaseFreeMemory();
  await rm(work, { recursive: true, force: true });
}
