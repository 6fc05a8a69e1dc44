// @module-tag torch
// ckpt's merge against the PyTorch reference (tools/bench/reference_merge.py, torch.load + F32 math
// + torch.save, run by Debian's /usr/bin/python3 with torch): every merged tensor must be the same
// bits. Inputs: the HF fixture generator's dense base and experts (tools/fixtures), and experts
// made here in torch with edge values (±0, subnormals, values whose sum overflows, a 2^-140..2^127
// exponent spread), in BF16, F16 and F32, one of them a safetensors file.
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { type MergeOptions, mergeExperts } from "@ckpt/merge";
import { openTorchFile } from "@ckpt/tensors";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/crash.js";
import { makeDenseFixture, PYTHON, runProcess as run } from "./fixtures.js";

const REFERENCE = join(REPO_ROOT, "tools/bench/reference_merge.py");
const TIMEOUT = 180_000;

// Edge-value experts, written by torch itself. Tensor names are HF-like; every expert holds the same keys.
const EDGE_EXPERTS = `
import os, sys, json, torch
sys.path.insert(0, sys.argv[2])
from make_hf_fixtures import write_safetensors
out, n = sys.argv[1], 3
g = torch.Generator().manual_seed(20260901)

def spread(shape, lo, hi):
    # random sign × [0.5, 1.5) × 2^e, e uniform in [lo, hi): subnormals up to near the F32 maximum
    m = torch.rand(shape, generator=g) + 0.5
    e = torch.randint(lo, hi, shape, generator=g).float()
    s = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
    return s * m * torch.pow(2.0, e)

bf16_max = 3.3895313892515355e38
def expert(k, dtype):
    return {
        "model.embed_tokens.weight": spread((96, 64), -140, 126).to(dtype),
        "model.layers.0.self_attn.q_proj.weight": (torch.randn((64, 64), generator=g) * 0.02).to(dtype),
        "model.layers.0.input_layernorm.weight": torch.full((64,), -0.0).to(dtype),
        "model.layers.0.mlp.up_proj.weight": torch.tensor([bf16_max, -bf16_max, 1.0, 1.0078125 if k % 2 else 1.0, 2.0 ** -133, -(2.0 ** -133), 0.0, -0.0] * 8).reshape(8, 8).to(dtype),
        "lm_head.weight": spread((32, 64), -30, 30).to(dtype),
    }

def save(name, sd):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.save({"net": sd}, os.path.join(d, "model.pt"))

for k in range(n):
    save(f"bf16_{k}", expert(k, torch.bfloat16))
for k in range(n):
    save(f"f16_{k}", {name: t.float().clamp(-60000, 60000).to(torch.float16) for name, t in expert(k, torch.float32).items()})
    save(f"f32_{k}", expert(k, torch.float32))
# A safetensors expert (same keys as the bf16 ones).
write_safetensors(os.path.join(out, "bf16_st.safetensors"), list(expert(7, torch.bfloat16).items()))

# A base for task vectors: moderate exponents so no τ overflows (±Inf - ±Inf would be NaN).
base_dir = os.path.join(out, "base")
os.makedirs(base_dir, exist_ok=True)
base = {name: spread(t.shape, -130, 90).to(torch.bfloat16) for name, t in expert(0, torch.bfloat16).items()}
names = list(base)
shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
for shard, keys in shards.items():
    write_safetensors(os.path.join(base_dir, shard), [(k, base[k]) for k in keys])
with open(os.path.join(base_dir, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": {k: s for s, ks in shards.items() for k in ks}}, f)
for k in range(n):
    save(f"tv_{k}", {name: (t.float() + spread(t.shape, -140, 90)).to(torch.bfloat16) for name, t in base.items()})
print("{}")
`;

interface Compared {
  tensors: number;
  elements: number;
  negativeZeros: number;
  infinities: number;
  subnormals: number;
}

/** Reads both files and compares every tensor's bytes; counts the edge values found in the result. */
async function compareFiles(ours: string, reference: string): Promise<Compared> {
  const a = await openTorchFile(await openFileByteSource(ours));
  const b = await openTorchFile(await openFileByteSource(reference));
  try {
    expect(a.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual(
      b.tensors.map((t) => [t.name, t.dtype, t.shape]),
    );
    const counts: Compared = { tensors: 0, elements: 0, negativeZeros: 0, infinities: 0, subnormals: 0 };
    for (const [i, t] of a.tensors.entries()) {
      const mine = Buffer.from(await a.readTensor(t));
      const theirs = Buffer.from(await b.readTensor(b.tensors[i]!));
      if (!mine.equals(theirs)) {
        let at = 0;
        while (mine[at] === theirs[at]) at++;
        throw new Error(
          `${t.name} (${t.dtype}) differs from the torch reference first at byte ${at} of ${mine.length}`,
        );
      }
      counts.tensors++;
      if (t.dtype === "BF16") {
        for (let j = 0; j < mine.length; j += 2) {
          const h = mine.readUInt16LE(j);
          const exponent = h & 0x7f80;
          counts.elements++;
          if (h === 0x8000) counts.negativeZeros++;
          else if (exponent === 0x7f80 && (h & 0x7f) === 0) counts.infinities++;
          else if (exponent === 0 && (h & 0x7f) !== 0) counts.subnormals++;
        }
      }
    }
    return counts;
  } finally {
    await a.close();
    await b.close();
  }
}

describe("ckpt merge is bit-identical to the PyTorch reference", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let fixture: { experts: string[]; base: string };
  let edges: string;
  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-merge-torch-");
    edges = join(tmp.dir, "edges");
    await mkdir(edges);
    [fixture] = await Promise.all([
      makeDenseFixture(join(tmp.dir, "fixture"), 11, { layers: 2, hidden: 64, intermediate: 96, vocab: 256 }),
      run(PYTHON, ["-c", EDGE_EXPERTS, edges, join(REPO_ROOT, "tools/fixtures")]),
    ]);
  }, TIMEOUT);
  afterAll(async () => {
    await tmp.cleanup();
  });

  let counter = 0;
  async function both(options: Omit<MergeOptions, "out">): Promise<Compared> {
    const out = join(tmp.dir, `out${counter++}`, "iter_000000001", "model.pt");
    const reference = join(tmp.dir, `ref${counter}.pt`);
    // Small chunks: the comparison also covers chunk and block edges inside tensors.
    const report = await mergeExperts({ ...options, out }, { chunkElements: 1000 });
    expect(report.status).toBe("merged");
    await run(PYTHON, [
      REFERENCE,
      "--mode",
      options.mode,
      "--experts",
      options.experts.join(","),
      "--out",
      reference,
      ...(options.base ? ["--base", options.base] : []),
      ...(options.lam !== undefined ? ["--lam", String(options.lam)] : []),
    ]);
    return compareFiles(out, reference);
  }

  it(
    "avg of the generator's three dense experts",
    async () => {
      const c = await both({ mode: "avg", experts: fixture.experts });
      expect(c.tensors).toBeGreaterThan(10);
    },
    TIMEOUT,
  );

  it.each([1, 0.3, -1.7])(
    "tv onto the generator's sharded dense base, lam %s",
    async (lam) => {
      const c = await both({ mode: "tv", experts: fixture.experts, base: fixture.base, lam });
      expect(c.elements).toBeGreaterThan(10_000);
    },
    TIMEOUT,
  );

  it(
    "avg of BF16 edge values: -0 kept, overflow to ±Inf, subnormals, 2^-140..2^126 spread",
    async () => {
      const c = await both({
        mode: "avg",
        experts: [0, 1, 2].map((k) => join(edges, `bf16_${k}`, "model.pt")),
      });
      expect(c.negativeZeros).toBeGreaterThan(64);
      expect(c.infinities).toBeGreaterThan(0);
      expect(c.subnormals).toBeGreaterThan(0);
    },
    TIMEOUT,
  );

  it(
    "avg with a safetensors expert among torch ones, in another order",
    async () => {
      const c = await both({
        mode: "avg",
        experts: [
          join(edges, "bf16_2", "model.pt"),
          join(edges, "bf16_st.safetensors"),
          join(edges, "bf16_0", "model.pt"),
        ],
      });
      expect(c.tensors).toBe(5);
    },
    TIMEOUT,
  );

  it(
    "tv of BF16 edge values with lam 0.7",
    async () => {
      const c = await both({
        mode: "tv",
        experts: [0, 1, 2].map((k) => join(edges, `tv_${k}`, "model.pt")),
        base: join(edges, "base"),
        lam: 0.7,
      });
      expect(c.tensors).toBe(5);
    },
    TIMEOUT,
  );

  it.each(["f16", "f32"])(
    "avg of %s experts (the output keeps the dtype)",
    async (dtype) => {
      const c = await both({
        mode: "avg",
        experts: [0, 1, 2].map((k) => join(edges, `${dtype}_${k}`, "model.pt")),
      });
      expect(c.tensors).toBe(5);
    },
    TIMEOUT,
  );
});
