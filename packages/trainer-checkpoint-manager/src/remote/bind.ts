// Which files a direct primary's records describe, and with which digests: the writer's inventory
// (hashed as the ranks uploaded) checked against the store's listing. Pure.
import type { DcpComponent, SizedFileEntry } from "@ckpt/manifest";
import { checkInventoryEntry, type InventoryEntry, inventoryInvalid } from "../local/describe.js";

/** A DCP component's objects as the store lists them, paths relative to the component. */
export interface ListedComponent {
  readonly name: DcpComponent;
  readonly files: readonly { readonly path: string; readonly size: number }[];
}

const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/**
 * The files each listed DCP component's record describes. A component the inventory does not
 * mention is described from its listing, sizes only. One it mentions (paths relative to the
 * iteration, `model/__0_0.distcp`) is described by exactly the inventory's files, each of which
 * must be listed with the size it was written with: objects an interrupted earlier try left
 * behind and this save did not write are not described (seed 001: they are ignored). An entry
 * outside the listed components, absent, or of another size is `MANAGER_INVENTORY_INVALID`.
 */
export function bindDcpFiles(
  iterUri: string,
  listed: readonly ListedComponent[],
  inventory: readonly InventoryEntry[],
): Map<DcpComponent, SizedFileEntry[]> {
  const bound = new Map<DcpComponent, SizedFileEntry[]>();
  const sizes = new Map<string, number>();
  for (const c of listed) for (const f of c.files) sizes.set(`${c.name}/${f.path}`, f.size);
  for (const entry of inventory) {
    checkInventoryEntry(iterUri, entry);
    const cut = entry.path.indexOf("/");
    const component = listed.find((c) => c.name === entry.path.slice(0, cut));
    if (cut < 0 || component === undefined)
      throw inventoryInvalid(iterUri, entry, "which is not in a DCP component this save wrote");
    const size = sizes.get(entry.path);
    if (size === undefined) throw inventoryInvalid(iterUri, entry, "which is not in the store there");
    if (size !== entry.size)
      throw inventoryInvalid(iterUri, entry, `with ${entry.size} bytes, but the object has ${size}`);
    const files = bound.get(component.name) ?? [];
    files.push({ path: entry.path.slice(cut + 1), size, sha256: entry.sha256 });
    bound.set(component.name, files);
  }
  for (const c of listed) {
    const files = bound.get(c.name);
    bound.set(c.name, [...(files ?? c.files.map((f) => ({ path: f.path, size: f.size })))].sort(byPath));
  }
  return bound;
}
