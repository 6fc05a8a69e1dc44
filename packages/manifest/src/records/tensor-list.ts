import { createHash } from "node:crypto";
import { z } from "zod";
import { canonicalJson, compareCodePoints } from "../json/canonical.js";
import { sha256Schema, textSchema } from "./common.js";

/**
 * Most tensors one component's list may hold: MoE state dicts have tens of thousands; at this
 * bound the sidecar stays within a record's size limit. A bigger component is described without one.
 */
export const MAX_COMPONENT_TENSORS = 262_144;
const MAX_TENSOR_DIMS = 64;

/** One tensor of a component: name, dtype (safetensors names, or torch's for a type ckpt has none for), global shape. */
export const inventoryTensorSchema = z.strictObject({
  name: textSchema(4096),
  dtype: textSchema(64),
  shape: z.array(z.number().int().min(0)).max(MAX_TENSOR_DIMS),
});
export type InventoryTensor = z.infer<typeof inventoryTensorSchema>;

/**
 * What a description records of a component's tensors: how many and the SHA-256 of their canonical
 * list (`tensorListDigest`). Constant size whatever the count; the list itself is in the sidecar.
 */
export const tensorListSummarySchema = z.strictObject({
  count: z.number().int().min(0).max(MAX_COMPONENT_TENSORS),
  sha256: sha256Schema,
});
export type TensorListSummary = z.infer<typeof tensorListSummarySchema>;

/** The list in canonical order: by name, code-point order. Pure. */
export function canonicalTensorList(tensors: readonly InventoryTensor[]): InventoryTensor[] {
  return [...tensors]
    .map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape] }))
    .sort((a, b) => compareCodePoints(a.name, b.name));
}

/** Count and SHA-256 of the canonical JSON of the canonical list: equal lists, equal digests. Pure. */
export function tensorListDigest(tensors: readonly InventoryTensor[]): TensorListSummary {
  const canonical = canonicalTensorList(tensors);
  const sha256 = createHash("sha256").update(canonicalJson(canonical)).digest("hex");
  return { count: canonical.length, sha256 };
}
