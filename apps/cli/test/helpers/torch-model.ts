import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { f32ToBf16Bytes, writeTorchFile } from "@ckpt/tensors";

/** A real consolidated torch file of a small network (`{"net": {...}}`, one bf16 tensor offset by `k`). */
export async function torchModel(path: string, k: number): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const shape = [16, 8];
  await writeTorchFile(path, {
    tree: { net: { "model.norm.weight": { dtype: "BF16" as const, shape } } },
    provideTensor: () => {
      const out = new Uint8Array(16 * 8 * 2);
      f32ToBf16Bytes(
        Float32Array.from({ length: 16 * 8 }, (_, i) => (i % 7) * 0.1 + k),
        out,
      );
      return out;
    },
  });
}
