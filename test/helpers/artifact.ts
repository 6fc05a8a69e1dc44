// A small real artifact on disk (model.pt + a DCP-style optimizer directory of shards + the
// native manifest), and snapshots of files a command must never touch.
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { ARTIFACT_MANIFEST, type ArtifactManifest, formatIterDir } from "@ckpt/manifest";
import { parseDcpMetadata } from "@ckpt/tensors";
import { mulberry32 } from "@ckpt/test-utils";

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

/** Pseudo-random bytes from a seed (fast: 4 bytes per PRNG step). */
export function seededBytes(size: number, seed: number): Buffer {
  const random = mulberry32(seed);
  const out = Buffer.allocUnsafe(size);
  let i = 0;
  for (; i + 4 <= size; i += 4) out.writeUInt32LE(Math.floor(random() * 4294967296), i);
  for (; i < size; i++) out[i] = Math.floor(random() * 256);
  return out;
}

export interface ArtifactSpec {
  readonly iteration?: number;
  readonly modelBytes?: number;
  readonly shards?: number;
  readonly shardBytes?: number;
  readonly seed?: number;
}

export interface BuiltArtifact {
  /** `<root>/<project>/<group>/<run>/<ts>/checkpoint_artifacts/iter_<n>` */
  readonly dir: string;
  /** `<project>/<group>/<run>/<ts>/checkpoints`: the run's upload prefix. */
  readonly uploadPrefix: string;
  /** The key prefix the artifact is archived under (sibling `checkpoint_artifacts/iter_<n>`). */
  readonly archivePrefix: string;
  readonly iterDir: string;
  readonly iteration: number;
  readonly manifest: ArtifactManifest;
  /** Every file of the artifact directory (payloads and manifest), relative path -> digest. */
  readonly files: ReadonlyMap<string, { size: number; sha256: string }>;
}

const RUN = ["proj", "grp", "run-a", "20260101000000"] as const;

/** Real DCP `.metadata` files referencing N shards each (see test/archive/fixtures/README.md). */
const DCP_SHARD_COUNTS = [6, 24, 32, 36] as const;
const dcpMetadataFixture = (shards: number): string =>
  join(dirname(fileURLToPath(import.meta.url)), "..", "archive", "fixtures", `dcp-shards-${shards}.metadata`);

/**
 * Writes a consolidated artifact: `model.pt` (`modelBytes`), an `optim/` DCP directory with a real
 * `.metadata` and the `shards` (6, 24, 32 or 36) files it references, each of seeded bytes at least
 * as long as the metadata needs, and the native manifest with every digest.
 */
export async function writeArtifact(root: string, spec: ArtifactSpec = {}): Promise<BuiltArtifact> {
  const iteration = spec.iteration ?? 300;
  const seed = spec.seed ?? 1;
  const iterDir = formatIterDir(iteration);
  const dir = join(root, ...RUN, "checkpoint_artifacts", iterDir);
  await mkdir(join(dir, "optim"), { recursive: true });
  const files = new Map<string, { size: number; sha256: string }>();
  const put = async (path: string, bytes: Buffer) => {
    await writeFile(join(dir, path), bytes);
    files.set(path, { size: bytes.length, sha256: sha256(bytes) });
  };
  await put("model.pt", seededBytes(spec.modelBytes ?? 4 * 1024 * 1024, seed));
  const shardFiles: Array<{ path: string; size: number; sha256: string }> = [];
  const shards = spec.shards ?? 6;
  if (!(DCP_SHARD_COUNTS as readonly number[]).includes(shards)) {
    throw new Error(
      `writeArtifact: no DCP fixture with ${shards} shards (have ${DCP_SHARD_COUNTS.join(", ")})`,
    );
  }
  const metadataPath = dcpMetadataFixture(shards);
  const metadataBytes = await readFile(metadataPath);
  await put("optim/.metadata", metadataBytes);
  shardFiles.push({ path: ".metadata", ...files.get("optim/.metadata")! });
  const needed = parseDcpMetadata(metadataBytes, metadataPath).files;
  for (const [i, { relativePath, requiredLength }] of needed.entries()) {
    const size = Math.max(spec.shardBytes ?? 256 * 1024, requiredLength);
    await put(`optim/${relativePath}`, seededBytes(size, seed + 1 + i));
    shardFiles.push({ path: relativePath, ...files.get(`optim/${relativePath}`)! });
  }
  const model = files.get("model.pt")!;
  const manifest: ArtifactManifest = {
    schema: "posttrain.checkpoint-artifact.v1",
    iteration,
    format: "consolidated",
    logical_components: ["model", "optimizer"],
    physical_components: [
      { name: "model", kind: "file", path: "model.pt", size: model.size, sha256: model.sha256 },
      { name: "optim", kind: "dir", path: "optim", files: shardFiles },
    ],
  };
  const manifestBytes = Buffer.from(ARTIFACT_MANIFEST.serialize(manifest));
  await put(ARTIFACT_MANIFEST.fileName, manifestBytes);
  const runPrefix = RUN.join("/");
  return {
    dir,
    uploadPrefix: `${runPrefix}/checkpoints`,
    archivePrefix: `${runPrefix}/checkpoint_artifacts/${iterDir}`,
    iterDir,
    iteration,
    manifest,
    files,
  };
}

/** Every regular file below `dir`, relative path -> sha256 (missing dir: empty). */
export async function snapshotTree(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (current: string): Promise<void> => {
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(current, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    for (const entry of entries) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) out.set(relative(dir, path), sha256(await readFile(path)));
      else out.set(relative(dir, path), `<${entry.isSymbolicLink() ? "symlink" : "special"}>`);
    }
  };
  await walk(dir);
  return out;
}

/** Plants foreign files (not made by ckpt) under `dir`; returns their snapshot to compare later. */
export async function plantForeign(dir: string, label: string): Promise<Map<string, string>> {
  await mkdir(join(dir, `foreign-${label}-dir`, "nested"), { recursive: true });
  await writeFile(join(dir, `foreign-${label}.bin`), seededBytes(4096, 77));
  await writeFile(join(dir, `foreign-${label}-dir`, "nested", "keep.txt"), `not ckpt's: ${label}\n`);
  return snapshotTree(dir);
}

/** Fails unless every path of `before` still exists under `dir` with the same bytes. */
export async function assertForeignIntact(dir: string, before: ReadonlyMap<string, string>): Promise<void> {
  const now = await snapshotTree(dir);
  for (const [path, digest] of before) {
    const current = now.get(path);
    if (current === undefined) throw new Error(`foreign file ${join(dir, path)} was removed`);
    if (current !== digest) throw new Error(`foreign file ${join(dir, path)} was changed`);
  }
}
