// verify --deep benchmark: @ckpt/tensors' verifyTensorFile (CRC-32 of every member and a NaN/Inf
// scan of every tensor, what `ckpt verify --deep` runs per torch file) against `unzip -t` (CRC-32
// of every member) on the same torch.save zip of many small tensors, as an MoE state dict has,
// in the same run. Both run as child processes under /usr/bin/time, start-up included.
// Two sizes, so the per-member cost shows whether the work grows linearly with the members.
// Build first: pnpm turbo run build --filter=@ckpt/tensors... && pnpm bench verify-deep
// Knobs (environment): CKPT_BENCH_MEMBERS (100000), CKPT_BENCH_REPS (3).
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { median, printTable, timedProcess } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "..", "packages", "tensors", "dist", "index.js");

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const MEMBERS = env("CKPT_BENCH_MEMBERS", 100_000);
const REPS = env("CKPT_BENCH_REPS", 3);

// ---- child modes: `--write PATH N` builds the file, `--verify PATH` verifies it --------------------
async function childWrite(path, count) {
  const { writeTorchFile } = await import(pathToFileURL(dist).href);
  const tree = {};
  for (let i = 0; i < count; i++) tree[`experts.${i}.w`] = { dtype: "F32", shape: [4] };
  const bytes = new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer);
  await writeTorchFile(path, { tree, sync: false, provideTensor: () => bytes });
}

async function childVerify(path) {
  const { verifyTensorFile } = await import(pathToFileURL(dist).href);
  const report = await verifyTensorFile(path, { crc: true, finite: true });
  if (report.problems.length > 0) throw new Error(JSON.stringify(report.problems.slice(0, 3)));
  console.log(JSON.stringify({ tensors: report.tensors }));
}

async function main() {
  if (!existsSync(dist)) {
    console.error(`missing ${dist}; run: pnpm turbo run build --filter=@ckpt/tensors...`);
    process.exit(2);
  }
  const self = fileURLToPath(import.meta.url);
  const dir = await mkdtemp(join(tmpdir(), "ckpt-bench-verify-deep-"));
  try {
    const sizes = [Math.round(MEMBERS / 10), MEMBERS];
    const rows = [];
    const json = {};
    for (const count of sizes) {
      const path = join(dir, `moe-${count}.pt`);
      console.log(`building a torch.save zip of ${count} tensors (${count + 3} members)...`);
      await timedProcess(process.execPath, [self, "--write", path, String(count)]);
      const ckpt = [];
      const unzip = [];
      let rss = 0;
      let clean = 0;
      for (let rep = 0; rep < REPS; rep++) {
        const a = await timedProcess(process.execPath, [self, "--verify", path]);
        const b = await timedProcess("unzip", ["-tqq", path]);
        ckpt.push(a.seconds);
        unzip.push(b.seconds);
        rss = Math.max(rss, a.rssMiB);
        clean += a.clean && b.clean ? 1 : 0;
      }
      const c = median(ckpt);
      const u = median(unzip);
      json[count] = { ckptSeconds: c, unzipSeconds: u, ckptRssMiB: rss, clean: `${clean}/${REPS}` };
      rows.push([
        String(count + 3),
        c.toFixed(2),
        u.toFixed(2),
        (c / u).toFixed(1),
        ((c / (count + 3)) * 1e6).toFixed(1),
        rss.toFixed(0),
        `${clean}/${REPS}`,
      ]);
      await rm(path, { force: true });
    }
    printTable(
      [
        "members",
        "ckpt verify s",
        "unzip -t s",
        "ratio ckpt/unzip",
        "ckpt µs/member",
        "ckpt RSS MiB",
        "clean",
      ],
      rows,
    );
    const [small, large] = sizes.map((n) => json[n].ckptSeconds / (n + 3));
    console.log(
      `per-member cost ${sizes[1]} vs ${sizes[0]} members: ${(large / small).toFixed(2)}× (1 = linear)`,
    );
    console.log(`BENCH_JSON ${JSON.stringify(json)}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const [mode, a, b] = process.argv.slice(2);
if (mode === "--write") await childWrite(a, Number(b));
else if (mode === "--verify") await childVerify(a);
else await main();
