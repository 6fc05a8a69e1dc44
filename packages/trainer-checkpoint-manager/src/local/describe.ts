import { lstat, open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { ArchivePublisherError, planCommit } from "@ckpt/archive-publisher";
import {
  type ArtifactManifest,
  ARTIFACT_MANIFEST,
  type CheckpointFormat,
  compareCodePoints,
  fsyncDirectory,
  hashFiles,
  type InventoryTensor,
  type LogicalComponent,
  MAX_COMPONENT_TENSORS,
  mapPool,
  PHYSICAL_COMPONENTS,
  type PhysicalComponent,
  type PhysicalComponentName,
  pathProblem,
  physicalComponentPath,
  type TensorInventory,
  TENSOR_INVENTORY,
  tensorListDigest,
} from "@ckpt/manifest";
import { listTensors } from "@ckpt/tensors";
import { verifyPath } from "@ckpt/verify";
import { ManagerError, messageOf } from "../errors.js";
import { entryKind } from "../internal/fs.js";

/** Files fsynced at once: enough to overlap a DCP directory's many shards, few enough for a shared filesystem. */
const FSYNC_CONCURRENCY = 8;

export interface DescribedComponents {
  /** The description (artifact-manifest shape), sizes only (`digestDescribed` adds the SHA-256s). */
  readonly manifest: ArtifactManifest;
  /** Every payload file, absolute. */
  readonly files: readonly string[];
  /** Every directory holding payload files (component directories and their sub-directories), absolute. */
  readonly dirs: readonly string[];
  readonly bytes: number;
}

function componentError(error: ArchivePublisherError): ManagerError {
  const code =
    error.code === "COMMIT_COMPONENT_MISSING" ? "MANAGER_COMPONENT_MISSING" : "MANAGER_COMPONENT_CONFLICT";
  return new ManagerError(code, error.message, {
    kind: "refused",
    ...(error.subject ? { subject: error.subject } : {}),
    cause: error,
  });
}

async function walk(root: string, dirs: string[]): Promise<Array<{ path: string; size: number }>> {
  const out: Array<{ path: string; size: number }> = [];
  const visit = async (relative: string) => {
    const absolute = relative === "" ? root : join(root, relative);
    dirs.push(absolute);
    for (const name of await readdir(absolute)) {
      const child = relative === "" ? name : `${relative}/${name}`;
      const info = await lstat(join(root, child));
      if (info.isDirectory()) await visit(child);
      else if (info.isFile()) out.push({ path: child, size: info.size });
      else {
        throw new ManagerError(
          "MANAGER_COMPONENT_CONFLICT",
          `describe ${join(root, child)}: it is not a regular file (a symbolic link?); a checkpoint holds only files. Write the file itself.`,
          { kind: "refused", subject: join(root, child) },
        );
      }
    }
  };
  await visit("");
  return out.sort((a, b) => compareCodePoints(a.path, b.path));
}

/**
 * Refuses a DCP component directory that `ckpt verify` would not pass: the one judge of DCP
 * completeness is @ckpt/verify (`.metadata` present and readable, every chunk stored, every shard
 * it references there and long enough). The message names the component and the first problem.
 */
async function requireCompleteDcp(dir: string, component: string): Promise<void> {
  const absolute = join(dir, component);
  const report = await verifyPath(absolute, { kind: "dcp" });
  const first = report.problems[0];
  if (first === undefined) return;
  throw new ManagerError(
    "MANAGER_DCP_INCOMPLETE",
    `commit ${dir}: the DCP component ${component}/ is not complete: ${first.code} ${component}/${first.path}: ${first.message}` +
      ` (${report.problems.length} problem(s); \`ckpt verify ${absolute}\` lists them). ` +
      "Let every rank finish torch.distributed.checkpoint.save (rank 0 writes .metadata last) before committing.",
    { kind: "refused", subject: join(absolute, first.path) },
  );
}

/**
 * Describes the written components of `plan` in `dir` (which physical components exist, their
 * files and sizes) using the same component rules as an artifact commit: every planned logical
 * component needs its main payload, optional ones are described when present, both `x.pt` and
 * `x/` is a conflict; a DCP component must be complete (`MANAGER_DCP_INCOMPLETE`). No hashing.
 */
export async function describeComponents(
  dir: string,
  iteration: number,
  format: CheckpointFormat,
  plan: readonly LogicalComponent[],
  producer: string,
): Promise<DescribedComponents> {
  const presence = {} as Record<PhysicalComponentName, { file: boolean; dir: boolean }>;
  for (const name of PHYSICAL_COMPONENTS) {
    const asFile = await entryKind(join(dir, physicalComponentPath(name, "file")));
    const asDir = await entryKind(join(dir, physicalComponentPath(name, "dir")));
    if (asFile === "other" || asDir === "other") {
      throw new ManagerError(
        "MANAGER_COMPONENT_CONFLICT",
        `describe ${dir}: the ${name} component is neither a regular file nor a directory (a symbolic link?). Write the payload itself.`,
        { kind: "refused", subject: join(dir, name) },
      );
    }
    presence[name] = { file: asFile === "file", dir: asDir === "dir" };
  }
  let layout: ReturnType<typeof planCommit>;
  try {
    layout = planCommit(dir, format, plan, presence);
  } catch (error) {
    if (error instanceof ArchivePublisherError) throw componentError(error);
    throw error;
  }
  const files: string[] = [];
  const dirs: string[] = [];
  let bytes = 0;
  const physical: PhysicalComponent[] = [];
  for (const c of layout.components) {
    const absolute = join(dir, c.path);
    if (c.kind === "file") {
      const { size } = await lstat(absolute);
      files.push(absolute);
      bytes += size;
      physical.push({ name: c.name, kind: "file", path: c.path, size });
      continue;
    }
    const tree = await walk(absolute, dirs);
    if (tree.length === 0) {
      throw new ManagerError(
        "MANAGER_COMPONENT_MISSING",
        `describe ${dir}: ${c.path}/ is empty. Write the ${c.name} shards first.`,
        {
          kind: "refused",
          subject: absolute,
        },
      );
    }
    if (format === "dcp") await requireCompleteDcp(dir, c.path);
    for (const f of tree) {
      files.push(join(absolute, f.path));
      bytes += f.size;
    }
    physical.push({ name: c.name, kind: "dir", path: c.path, files: tree });
  }
  const manifest: ArtifactManifest = {
    schema: ARTIFACT_MANIFEST.version,
    iteration,
    format,
    logical_components: [...plan],
    physical_components: physical,
    producer,
  };
  return { manifest, files, dirs, bytes };
}

/** fdatasync: the bytes and the size, not the timestamps; nearly free when the trainer already synced. */
async function datasync(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes the described payload durable: every file's data, then every directory holding them
 * (component directories in parallel). The iteration directory itself is fsynced by the caller
 * once the description is in it, so its entries and the description become durable together.
 */
export async function fsyncDescribed(dir: string, described: DescribedComponents): Promise<void> {
  try {
    await mapPool(described.files, FSYNC_CONCURRENCY, (file) => datasync(file));
    await mapPool(described.dirs, FSYNC_CONCURRENCY, (d) => fsyncDirectory(d));
  } catch (error) {
    throw new ManagerError("MANAGER_COMMIT_FAILED", `make ${dir} durable: ${messageOf(error)}`, {
      kind: "failed",
      subject: dir,
      cause: error,
    });
  }
}

/** A writer's record of one file it wrote (`CommitOptions.inventory`). */
export interface InventoryEntry {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
}

export function inventoryInvalid(dir: string, entry: InventoryEntry, why: string): ManagerError {
  return new ManagerError(
    "MANAGER_INVENTORY_INVALID",
    `commit ${dir}: the writer's inventory lists ${JSON.stringify(entry.path)}, ${why}. ` +
      "List each file the save wrote by its path relative to the save's directory, with the size and SHA-256 it was written with.",
    { kind: "refused", subject: dir },
  );
}

/** Refuses an inventory entry whose path is not safe and relative or whose digest is malformed. */
export function checkInventoryEntry(dir: string, entry: InventoryEntry): void {
  const problem = pathProblem(entry.path);
  if (problem !== undefined)
    throw inventoryInvalid(dir, entry, `which is not a safe relative path (${problem.reason})`);
  if (!/^[0-9a-f]{64}$/.test(entry.sha256))
    throw inventoryInvalid(dir, entry, "whose SHA-256 is not 64 lower-case hex digits");
}

/**
 * Checks a writer's inventory against the save's directory: every path safe and relative, a
 * regular file there, with the size listed, and a lower-case hex SHA-256. Returns the digests by
 * path; refuses the first entry that disagrees (`MANAGER_INVENTORY_INVALID`).
 */
export async function checkInventory(
  dir: string,
  inventory: readonly InventoryEntry[],
): Promise<Map<string, string>> {
  const digests = new Map<string, string>();
  for (const entry of inventory) {
    checkInventoryEntry(dir, entry);
    const info = await lstat(join(dir, entry.path)).catch(() => undefined);
    if (info === undefined || !info.isFile())
      throw inventoryInvalid(dir, entry, "which is not a regular file there");
    if (info.size !== entry.size)
      throw inventoryInvalid(dir, entry, `with ${entry.size} bytes, but it has ${info.size}`);
    digests.set(entry.path, entry.sha256);
  }
  return digests;
}

/**
 * The description with every file's SHA-256: the writer's (`known`, paths relative to `dir`) where
 * it gave one, the rest hashed here (worker threads, the hashing every ckpt tool shares).
 */
export async function digestDescribed(
  dir: string,
  manifest: ArtifactManifest,
  known: ReadonlyMap<string, string>,
): Promise<ArtifactManifest> {
  const relative = manifest.physical_components.flatMap((c) =>
    c.kind === "file" ? [c.path] : c.files.map((f) => `${c.path}/${f.path}`),
  );
  const toHash = relative.filter((p) => !known.has(p)).map((p) => join(dir, p));
  let hashed: Map<string, { sha256: string }>;
  try {
    hashed = await hashFiles(toHash);
  } catch (error) {
    throw new ManagerError("MANAGER_COMMIT_FAILED", `hash ${dir}: ${messageOf(error)}`, {
      kind: "failed",
      subject: dir,
      cause: error,
    });
  }
  const digest = (path: string) => known.get(path) ?? hashed.get(join(dir, path))!.sha256;
  return {
    ...manifest,
    physical_components: manifest.physical_components.map((c) =>
      c.kind === "file"
        ? { ...c, sha256: digest(c.path) }
        : { ...c, files: c.files.map((f) => ({ ...f, sha256: digest(`${c.path}/${f.path}`) })) },
    ),
  };
}

/** The components whose tensors a description lists: `.pt` files and DCP directories. Pure. */
function listsTensors(c: PhysicalComponent, format: CheckpointFormat): boolean {
  return c.kind === "file" ? c.path.endsWith(".pt") : format === "dcp";
}

/**
 * The description with each `.pt` file's and DCP directory's tensor list summarised (count and
 * digest), and the sidecar listing them in full. Only headers are read (the pickle, `.metadata`).
 * A `.pt` that is not a torch.save file (the trainer's own format) and a component beyond
 * MAX_COMPONENT_TENSORS are described without a list: sizes and digests still bind them.
 */
export async function summariseTensors(
  dir: string,
  manifest: ArtifactManifest,
): Promise<{ manifest: ArtifactManifest; inventory: TensorInventory }> {
  const components: Partial<Record<PhysicalComponentName, InventoryTensor[]>> = {};
  const physical: PhysicalComponent[] = [];
  for (const c of manifest.physical_components) {
    let tensors: InventoryTensor[] | undefined;
    if (listsTensors(c, manifest.format))
      tensors = await listTensors(join(dir, c.path)).catch(() => undefined);
    if (tensors === undefined || tensors.length > MAX_COMPONENT_TENSORS) {
      physical.push(c);
      continue;
    }
    components[c.name] = tensors;
    physical.push({ ...c, tensors: tensorListDigest(tensors) });
  }
  return {
    manifest: { ...manifest, physical_components: physical },
    inventory: { schema: TENSOR_INVENTORY.version, components },
  };
}
