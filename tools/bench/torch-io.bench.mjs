// torch.save I/O benchmark: @ckpt/tensors (built dist) against torch.load / torch.save in
// /usr/bin/python3, in the same run on the same 2 GiB bf16 state dict (warm page cache).
// Build first: pnpm --filter @ckpt/tensors build && pnpm bench torch-io
// Each side runs in its own child process under `/usr/bin/time -f %M` for peak RSS; times are
// measured inside the child around the work only (interpreter and torch import excluded).
// Knobs (environment): CKPT_BENCH_TORCH_MIB (2048), CKPT_BENCH_TORCH_TENSOR_MIB (32), CKPT_BENCH_REPS (3).
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MiB, median, printTable, run } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "..", "packages", "tensors", "dist", "index.js");
const manifestDist = join(here, "..", "..", "packages", "manifest", "dist", "index.js");
const PYTHON = "/usr/bin/python3";

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const TOTAL_MIB = env("CKPT_BENCH_TORCH_MIB", 2048);
const TENSOR_MIB = env("CKPT_BENCH_TORCH_TENSOR_MIB", 32);
const REPS = env("CKPT_BENCH_REPS", 3);

// ---- child modes: `node torch-io.bench.mjs --read FILE` / `--write SRC OUT` -------------------------
async function childRead(path) {
  const { openTorchFile } = await import(pathToFileURL(dist).href);
  const { openFileByteSource } = await import(pathToFileURL(manifestDist).href);
  const started = performance.now();
  const file = await openTorchFile(await openFileByteSource(path));
  const largest = Math.max(...file.tensors.map((t) => t.byteLength));
  const buffer = new Uint8Array(largest);
  let touched = 0;
  for (const entry of file.tensors) {
    const bytes = await file.readTensor(entry, buffer);
    touched ^= bytes[bytes.length - 1];
  }
  await file.close();
  console.log(
    JSON.stringify({ seconds: (performance.now() - started) / 1000, tensors: file.tensors.length, touched }),
  );
}

async function childWrite(src, out, sync) {
  const { openTorchFile, writeTorchFile } = await import(pathToFileURL(dist).href);
  const { openFileByteSource } = await import(pathToFileURL(manifestDist).href);
  // The descriptions come from the source file; the bytes are one reused buffer per size, so
  // only the write path is timed (torch.save likewise writes tensors already in memory).
  const file = await openTorchFile(await openFileByteSource(src));
  const tree = Object.fromEntries(file.tensors.map((t) => [t.name, { dtype: t.dtype, shape: t.shape }]));
  const buffer = new Uint8Array(Math.max(...file.tensors.map((t) => t.byteLength))).fill(0x3f);
  await file.close();
  const started = performance.now();
  await writeTorchFile(out, {
    tree,
    sync,
    provideTensor: (_name, desc) => buffer.subarray(0, desc.shape.reduce((a, b) => a * b, 1) * 2),
  });
  console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000 }));
}

const PY_MAKE = `
import sys, torch, collections
total, each, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
n = each // 2
sd = collections.OrderedDict((f"layers.{i}.weight", torch.full((n // 1024, 1024), float(i), dtype=torch.bfloat16)) for i in range(total // each))
torch.save(sd, path)
`;
const PY_READ = `
import sys, time, json, torch
t = time.perf_counter()
sd = torch.load(sys.argv[1])
touched = 0
for v in sd.values():
    touched ^= int(v.view(-1)[-1].view(torch.int16))
print(json.dumps({"seconds": time.perf_counter() - t, "tensors": len(sd)}))
`;
const PY_WRITE = `
import sys, time, json, torch
sd = torch.load(sys.argv[1])
t = time.perf_counter()
torch.save(sd, sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - t}))
`;

/** Runs a child under /usr/bin/time; returns its JSON line and its peak RSS in MiB. */
async function timedWithRss(command, args) {
  const { spawn } = await import("node:child_process");
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/time", ["-f", "RSS_KIB=%M", command, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${command} ${args.join(" ")} exited ${code}: ${err}`));
      const rss = Number(/RSS_KIB=(\d+)/.exec(err)?.[1] ?? Number.NaN) / 1024;
      resolve({ ...JSON.parse(out.trim().split("\n").at(-1)), rssMiB: rss });
    });
  });
}

async function main() {
  for (const path of [dist, manifestDist]) {
    if (!existsSync(path)) {
      console.error(`missing ${path}; run: pnpm --filter @ckpt/tensors build`);
      process.exit(2);
    }
  }
  const dir = await mkdtemp(join(tmpdir(), "ckpt-bench-torch-"));
  try {
    const src = join(dir, "state.pt");
    console.log(
      `building ${TOTAL_MIB} MiB bf16 state dict (${TOTAL_MIB / TENSOR_MIB} tensors of ${TENSOR_MIB} MiB) with torch.save...`,
    );
    await run(PYTHON, ["-c", PY_MAKE, String(TOTAL_MIB * MiB), String(TENSOR_MIB * MiB), src]);
    const self = fileURLToPath(import.meta.url);
    const samples = { ckptRead: [], torchRead: [], ckptWrite: [], ckptWriteSync: [], torchWrite: [] };
    const rss = { ckptRead: 0, torchRead: 0, ckptWrite: 0, ckptWriteSync: 0, torchWrite: 0 };
    for (let rep = 0; rep < REPS; rep++) {
      // Alternate the order so neither side always meets a page cache the other warmed.
      const reads = [
        ["ckptRead", process.execPath, [self, "--read", src]],
        ["torchRead", PYTHON, ["-c", PY_READ, src]],
      ];
      for (const [key, command, args] of rep % 2 ? reads.reverse() : reads) {
        const r = await timedWithRss(command, args);
        samples[key].push(r.seconds);
        rss[key] = Math.max(rss[key], r.rssMiB);
      }
      const writes = [
        ["ckptWrite", process.execPath, [self, "--write-nosync", src, join(dir, "ckpt-out.pt")]],
        ["ckptWriteSync", process.execPath, [self, "--write", src, join(dir, "ckpt-out.pt")]],
        ["torchWrite", PYTHON, ["-c", PY_WRITE, src, join(dir, "torch-out.pt")]],
      ];
      for (const [key, command, args] of rep % 2 ? writes.reverse() : writes) {
        const r = await timedWithRss(command, args);
        samples[key].push(r.seconds);
        rss[key] = Math.max(rss[key], r.rssMiB);
        await rm(join(dir, key.startsWith("ckpt") ? "ckpt-out.pt" : "torch-out.pt"), { force: true });
      }
    }
    const m = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
    const gib = TOTAL_MIB / 1024;
    printTable(
      [
        "operation",
        "ckpt s",
        "torch s",
        "ratio ckpt/torch",
        "ckpt GiB/s",
        "ckpt peak RSS MiB",
        "torch peak RSS MiB",
      ],
      [
        [
          "read every tensor",
          m.ckptRead.toFixed(2),
          m.torchRead.toFixed(2),
          (m.ckptRead / m.torchRead).toFixed(2),
          (gib / m.ckptRead).toFixed(2),
          rss.ckptRead.toFixed(0),
          rss.torchRead.toFixed(0),
        ],
        [
          "write state dict",
          m.ckptWrite.toFixed(2),
          m.torchWrite.toFixed(2),
          (m.ckptWrite / m.torchWrite).toFixed(2),
          (gib / m.ckptWrite).toFixed(2),
          rss.ckptWrite.toFixed(0),
          rss.torchWrite.toFixed(0),
        ],
        [
          "write + fsync (ckpt default)",
          m.ckptWriteSync.toFixed(2),
          m.torchWrite.toFixed(2),
          (m.ckptWriteSync / m.torchWrite).toFixed(2),
          (gib / m.ckptWriteSync).toFixed(2),
          rss.ckptWriteSync.toFixed(0),
          rss.torchWrite.toFixed(0),
        ],
      ],
    );
    console.log(
      `targets: read ratio <= 1.0; ckpt read RSS <= largest tensor (${TENSOR_MIB} MiB) + 128 MiB; write ratio <= 1.0`,
    );
    console.log(
      `median of ${REPS} runs; warm page cache; "write state dict" is ckpt with sync: false (torch.save never fsyncs)`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const [mode, a, b] = process.argv.slice(2);
if (mode === "--read") await childRead(a);
else if (mode === "--write") await childWrite(a, b, true);
else if (mode === "--write-nosync") await childWrite(a, b, false);
else await main();
