// Expert merge benchmark: `ckpt merge` (the built CLI) against a PyTorch script
// (tools/bench/reference_merge.py: torch.load every expert, merge in F32, torch.save) in the same
// run, on three bf16 experts of --size MiB each (default 2048) and, for tv, a sharded HF base of
// the same size. Both sides run as child processes under /usr/bin/time (peak RSS); times are the
// wall time of the whole process (start-up included on both sides; ckpt also hashes its inputs for
// the completion record and fsyncs its output, torch does neither). The page cache is warm (the
// inputs were just written). After each pair the two outputs are compared tensor by tensor: they
// must be bit-identical. Build first: pnpm turbo run build --filter=@ckpt/cli...
//   node tools/bench/merge.bench.mjs [--size MiB] [--reps N] [--modes avg,tv] [--keep]
// Targets: time ≤ 0.8× torch, peak RSS ≤ 0.25× torch.
import { spawn } from "node:child_process";
import { existsSync, statfsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MiB, machineBusySeconds, median, printTable, run } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");
const CLI = process.env.CKPT_CLI_BIN ?? join(repo, "apps", "cli", "dist", "bin.js");
const PYTHON = "/usr/bin/python3";
const REFERENCE = join(here, "reference_merge.py");

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const SIZE_MIB = Number(option("size", "2048"));
const REPS = Number(option("reps", "1"));
const MODES = option("modes", "avg,tv").split(",");
const KEEP = process.argv.includes("--keep");

// Writes the base (sharded safetensors + index) and three experts (base + a small seeded delta) in
// bf16 with real torch. Shapes like a 4096-wide decoder: 32 MiB attention matrices, 86 MiB MLP
// matrices, an embedding of about a tenth of the model, and an output head filling the rest.
const PY_MAKE = `
import json, os, sys, torch
sys.path.insert(0, sys.argv[3])
from make_hf_fixtures import write_safetensors
out, total = sys.argv[1], int(sys.argv[2])
h = 4096 if total >= 1 << 30 else 1024
g = torch.Generator().manual_seed(1)
shapes = [("model.embed_tokens.weight", (max(8, total // 10 // (2 * h)), h))]
used = shapes[0][1][0] * h * 2
layer = 0
while True:
    block = [(f"model.layers.{layer}.self_attn.q_proj.weight", (h, h)), (f"model.layers.{layer}.self_attn.o_proj.weight", (h, h)),
             (f"model.layers.{layer}.mlp.up_proj.weight", (h * 11 // 4, h)), (f"model.layers.{layer}.mlp.down_proj.weight", (h, h * 11 // 4)),
             (f"model.layers.{layer}.input_layernorm.weight", (h,))]
    size = sum(2 * torch.Size(s).numel() for _, s in block)
    if used + size > total and layer > 0:
        break
    shapes += block
    used += size
    layer += 1
# An output head takes up the rest, so each expert is the requested size (to a row).
rows = (total - used) // (2 * h)
if rows > 0:
    shapes.append(("lm_head.weight", (rows, h)))
    used += rows * h * 2
base = {name: (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16) for name, shape in shapes}
base_dir = os.path.join(out, "base")
os.makedirs(base_dir)
names, shard, shards, weight_map = list(base), [], [], {}
for name in names:
    shard.append(name)
    if sum(base[n].numel() * 2 for n in shard) >= 1 << 30 or name == names[-1]:
        shards.append(shard)
        shard = []
for i, group in enumerate(shards):
    file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    write_safetensors(os.path.join(base_dir, file), [(n, base[n]) for n in group])
    weight_map.update({n: file for n in group})
with open(os.path.join(base_dir, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": used}, "weight_map": weight_map}, f)
for k in range(3):
    expert = {n: (t.float() + torch.randn(t.shape, generator=g) * 1e-3).to(torch.bfloat16) for n, t in base.items()}
    d = os.path.join(out, f"expert_{k}")
    os.makedirs(d)
    torch.save({"net": expert}, os.path.join(d, "model.pt"))
print(json.dumps({"tensors": len(names), "bytes": used}))
`;

/** Runs a command under /usr/bin/time: wall seconds, peak RSS, and other processes' CPU meanwhile. */
function timed(command, args) {
  return new Promise((resolve, reject) => {
    const busy0 = machineBusySeconds();
    const started = process.hrtime.bigint();
    const child = spawn("/usr/bin/time", ["-f", "RSS_KIB=%M CPU_S=%U+%S", command, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code !== 0)
        return reject(new Error(`${command} ${args.join(" ")} exited ${code}: ${err.slice(-2000)}`));
      const rssMiB = Number(/RSS_KIB=(\d+)/.exec(err)?.[1] ?? Number.NaN) / 1024;
      const [user, sys] = (/CPU_S=([\d.]+)\+([\d.]+)/.exec(err) ?? [0, 0, 0]).slice(1).map(Number);
      const other = Math.max(0, machineBusySeconds() - busy0 - user - sys);
      resolve({ seconds, rssMiB, cpu: user + sys, clean: other <= 0.3 + 0.15 * seconds, stdout: out });
    });
  });
}

/** Compares two torch.save files tensor by tensor (streaming, one tensor in memory at a time). */
async function sameTensors(a, b) {
  const { openTorchFile } = await import(pathToFileURL(join(repo, "packages/tensors/dist/index.js")).href);
  const { openFileByteSource } = await import(
    pathToFileURL(join(repo, "packages/manifest/dist/index.js")).href
  );
  const fa = await openTorchFile(await openFileByteSource(a));
  const fb = await openTorchFile(await openFileByteSource(b));
  try {
    if (fa.tensors.length !== fb.tensors.length)
      return `${fa.tensors.length} vs ${fb.tensors.length} tensors`;
    for (const [i, t] of fa.tensors.entries()) {
      const u = fb.tensors[i];
      if (t.name !== u.name) return `tensor ${i}: ${t.name} vs ${u.name}`;
      if (!Buffer.from(await fa.readTensor(t)).equals(Buffer.from(await fb.readTensor(u))))
        return `${t.name} differs`;
    }
    return undefined;
  } finally {
    await fa.close();
    await fb.close();
  }
}

async function main() {
  if (!existsSync(CLI)) {
    console.error(`missing ${CLI}; run: pnpm turbo run build --filter=@ckpt/cli...`);
    process.exit(2);
  }
  const root = await mkdtemp(join(tmpdir(), "ckpt-bench-merge-"));
  const { bavail, bsize } = statfsSync(root);
  const needed = SIZE_MIB * MiB * 8; // three experts, the base, two outputs, headroom
  if (bavail * bsize < needed) {
    console.error(
      `need ~${(needed / 2 ** 30).toFixed(1)} GiB free in ${tmpdir()}; have ${((bavail * bsize) / 2 ** 30).toFixed(1)}`,
    );
    await rm(root, { recursive: true, force: true });
    process.exit(2);
  }
  try {
    console.log(`writing three ${SIZE_MIB} MiB bf16 experts and a base with torch...`);
    const made = JSON.parse(
      await run(PYTHON, ["-c", PY_MAKE, root, String(SIZE_MIB * MiB), join(repo, "tools/fixtures")]),
    );
    console.log(`${made.tensors} tensors, ${(made.bytes / MiB).toFixed(0)} MiB per expert`);
    const experts = [0, 1, 2].map((k) => join(root, `expert_${k}`, "model.pt")).join(",");
    const base = join(root, "base");
    const rows = [];
    let bitIdentical = true;
    for (const mode of MODES) {
      const extra = mode === "tv" ? ["--base", base, "--lam", "0.5"] : [];
      const samples = { ckpt: [], torch: [] };
      for (let rep = 0; rep < REPS; rep++) {
        const ckptDir = join(root, `ckpt-${mode}-${rep}`);
        const ckptOut = join(ckptDir, "iter_000000001", "model.pt");
        const torchOut = join(root, `torch-${mode}-${rep}.pt`);
        const sides = [
          [
            "ckpt",
            process.execPath,
            [CLI, "merge", "--mode", mode, "--experts", experts, "--out", ckptOut, "--json", ...extra],
          ],
          ["torch", PYTHON, [REFERENCE, "--mode", mode, "--experts", experts, "--out", torchOut, ...extra]],
        ];
        // Alternate the order so neither side always runs second on a cache the other warmed.
        for (const [side, command, args] of rep % 2 ? sides.reverse() : sides) {
          const result = await timed(command, args);
          samples[side].push(result);
          console.log(
            `${mode} rep ${rep + 1} ${side}: ${result.seconds.toFixed(2)} s, ${result.rssMiB.toFixed(0)} MiB peak RSS, ${result.cpu.toFixed(1)} CPU s${result.clean ? "" : " (noisy)"}`,
          );
        }
        const problem = await sameTensors(ckptOut, torchOut);
        if (problem !== undefined) {
          bitIdentical = false;
          console.log(`${mode}: ckpt and torch outputs differ: ${problem}`);
        }
        await rm(ckptDir, { recursive: true, force: true });
        await rm(torchOut, { force: true });
      }
      const t = (side) => median(samples[side].map((s) => s.seconds));
      const r = (side) => Math.max(...samples[side].map((s) => s.rssMiB));
      const clean = [...samples.ckpt, ...samples.torch].every((s) => s.clean);
      rows.push([
        mode,
        t("ckpt").toFixed(2),
        t("torch").toFixed(2),
        (t("ckpt") / t("torch")).toFixed(2),
        r("ckpt").toFixed(0),
        r("torch").toFixed(0),
        (r("ckpt") / r("torch")).toFixed(3),
        clean ? "yes" : "no",
      ]);
    }
    console.log(
      `\nmerge of three ${SIZE_MIB} MiB bf16 experts, median of ${REPS} (targets: time ≤ 0.8× torch, RSS ≤ 0.25× torch)`,
    );
    printTable(["mode", "ckpt s", "torch s", "time ×", "ckpt MiB", "torch MiB", "RSS ×", "quiet"], rows);
    console.log(`outputs bit-identical: ${bitIdentical ? "yes" : "NO"}`);
    if (!bitIdentical) process.exitCode = 1;
  } finally {
    if (KEEP) console.log(`kept ${root}`);
    else await rm(root, { recursive: true, force: true });
  }
}

await main();
