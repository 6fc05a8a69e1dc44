import { z } from "zod";
import { PHYSICAL_COMPONENTS } from "./artifact-manifest.js";
import { recordApi } from "./common.js";
import { TENSOR_INVENTORY_FILE } from "./names.js";
import { canonicalTensorList, inventoryTensorSchema, MAX_COMPONENT_TENSORS } from "./tensor-list.js";

export const TENSOR_INVENTORY_VERSION = "posttrain.checkpoint-tensors.v1";

const tensorInventorySchema = z.strictObject({
  schema: z.literal(TENSOR_INVENTORY_VERSION),
  /** Per physical component (by name), its tensors in canonical order. */
  components: z.partialRecord(
    z.enum(PHYSICAL_COMPONENTS),
    z.array(inventoryTensorSchema).max(MAX_COMPONENT_TENSORS),
  ),
});
export type TensorInventory = z.infer<typeof tensorInventorySchema>;

/**
 * The sidecar `.posttrain-checkpoint-tensors.json` beside a checkpoint description: each described
 * component's tensors with dtype and global shape, listed in full. The description holds only each
 * list's count and digest, so it stays small for a component of 100,000 tensors while a pin on the
 * description still pins every list.
 */
export const TENSOR_INVENTORY = recordApi<TensorInventory, typeof TENSOR_INVENTORY_VERSION>({
  title: "checkpoint tensor inventory",
  fileName: TENSOR_INVENTORY_FILE,
  versionField: "schema",
  versions: [TENSOR_INVENTORY_VERSION],
  schema: tensorInventorySchema,
  normalize: (inventory) => ({
    ...inventory,
    components: Object.fromEntries(
      Object.entries(inventory.components).map(([name, list]) => [name, canonicalTensorList(list ?? [])]),
    ),
  }),
});
