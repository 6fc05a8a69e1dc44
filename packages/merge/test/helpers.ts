import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  type DType,
  f32ToBf16Bytes,
  f32ToF16Bytes,
  type TensorDescription,
  writeSafetensors,
  writeShardedSafetensors,
  writeTorchFile,
} from "@ckpt/tensors";

/** A tensor of a test model: shape and one value per element (rounded to the dtype when written). */
interface TestTensor {
  readonly shape: readonly number[];
  readonly values: readonly number[];
  readonly dtype?: DType;
}
export type TestModel = Readonly<Record<string, TestTensor>>;

function bytesOf(t: TestTensor): Uint8Array {
  const dtype = t.dtype ?? "BF16";
  const f32 = Float32Array.from(t.values);
  if (dtype === "F32") return new Uint8Array(f32.buffer);
  const out = new Uint8Array(f32.length * 2);
  if (dtype === "BF16") f32ToBf16Bytes(f32, out);
  else f32ToF16Bytes(f32, out);
  return out;
}

function descriptions(model: TestModel): TensorDescription[] {
  return Object.entries(model).map(([name, t]) => ({ name, dtype: t.dtype ?? "BF16", shape: t.shape }));
}

/** A consolidated expert: torch.save({"net": state_dict}) written by @ckpt/tensors. */
export async function writeTorchExpert(path: string, model: TestModel, root = "net"): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  const net = Object.fromEntries(
    Object.entries(model).map(([name, t]) => [name, { dtype: t.dtype ?? "BF16", shape: t.shape }]),
  );
  await writeTorchFile(path, {
    tree: { [root]: net },
    provideTensor: (name) => bytesOf(model[name.slice(root.length + 1)]!),
  });
  return path;
}

export async function writeSafetensorsExpert(path: string, model: TestModel): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await writeSafetensors(path, descriptions(model), (t) => bytesOf(model[t.name]!));
  return path;
}

/** A Hugging Face base directory: sharded safetensors plus index (small shards, so there are several). */
export async function writeHfBase(dir: string, model: TestModel, maxShardBytes = 64): Promise<string> {
  await writeShardedSafetensors(dir, descriptions(model), (t) => bytesOf(model[t.name]!), { maxShardBytes });
  return dir;
}

/** A deterministic pseudo-random model: `tensors` tensors of `shape`, values around `center`. */
export function randomModel(
  seed: number,
  shapes: Readonly<Record<string, readonly number[]>>,
  center = 0,
): TestModel {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  return Object.fromEntries(
    Object.entries(shapes).map(([name, shape]) => {
      const n = shape.reduce((a, b) => a * b, 1);
      return [name, { shape, values: Array.from({ length: n }, () => center + (next() - 0.5) * 0.1) }];
    }),
  );
}

export const artifactFiles = (iterDir: string) => ({
  model: join(iterDir, "model.pt"),
  manifest: join(iterDir, ".posttrain-checkpoint-artifact.json"),
  completion: join(iterDir, ".merge-complete.json"),
  diagnostics: join(iterDir, "merge-diagnostics.json"),
});
