// Invariant checkers of the archive lifecycle, reading the remote store and the local disk
// directly (never through the publisher or reader under test).
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  STAGED_RECORD,
  UPLOADED_MARKER,
  type ArchiveDeclaration,
  artifactPayloadFiles,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { sha256 } from "./artifact.js";

async function readObject(store: ObjectStore, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await store.get(key)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** What a kill left in the remote archive. */
type RemoteLabel = "empty" | "declared" | "uploading" | "committed";

/** Prefix of the publisher's conditional-create probe objects. */
const PROBE_PREFIX = ".posttrain-archive.probe-";

export interface RemoteCheck {
  readonly label: RemoteLabel;
  /** Leftover conditional-create probe objects (harmless, counted). */
  readonly probes: number;
  readonly declaration?: ArchiveDeclaration;
}

/**
 * The remote invariants of an archive at `prefix`:
 * - nothing of the artifact is there without the declaration (it is created first);
 * - the declaration, when there, is a valid record and (given `expected`) declares exactly the
 *   expected files;
 * - a native manifest is there only if the declaration is, the manifest's bytes match the
 *   declared digest and size, every physical component is declared, and EVERY declared file is
 *   present with the declared size, content digest and sha256 metadata.
 */
export async function checkRemoteArchive(
  store: ObjectStore,
  prefix: string,
  expected?: ReadonlyMap<string, { size: number; sha256: string }>,
): Promise<RemoteCheck> {
  const base = prefix === "" ? "" : `${prefix}/`;
  const present = new Map<string, number>();
  let probes = 0;
  for await (const info of store.list(base)) {
    const name = info.key.slice(base.length);
    // The publisher's conditional-create probe: a leftover one (killed mid-probe) names itself
    // and is never part of an inventory.
    if (name.startsWith(PROBE_PREFIX)) probes++;
    else present.set(name, info.size);
  }
  if (present.size === 0) return { label: "empty", probes };
  if (!present.has(ARCHIVE_DECLARATION.fileName)) {
    throw new Error(
      `remote ${base}: objects ${[...present.keys()].join(", ")} without ${ARCHIVE_DECLARATION.fileName}`,
    );
  }
  const declarationBytes = await readObject(store, `${base}${ARCHIVE_DECLARATION.fileName}`);
  const declaration = ARCHIVE_DECLARATION.parse(declarationBytes, `${base}${ARCHIVE_DECLARATION.fileName}`);
  if (expected !== undefined) {
    const declared = new Map(declaration.files.map((f) => [f.path, f]));
    for (const [path, want] of expected) {
      const got = declared.get(path);
      if (got === undefined || got.size !== want.size || got.sha256 !== want.sha256) {
        throw new Error(
          `declaration ${base}: ${path} declared as ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`,
        );
      }
    }
    for (const path of declared.keys()) {
      if (!expected.has(path))
        throw new Error(`declaration ${base}: declares ${path}, which is not part of the artifact`);
    }
  }
  if (!present.has(ARTIFACT_MANIFEST.fileName)) {
    return { label: present.size === 1 ? "declared" : "uploading", declaration, probes };
  }
  // Committed: every declared payload must be there and verified.
  const manifestBytes = await readObject(store, `${base}${ARTIFACT_MANIFEST.fileName}`);
  if (
    sha256(manifestBytes) !== declaration.manifest_sha256 ||
    manifestBytes.length !== declaration.manifest_size
  ) {
    throw new Error(
      `remote ${base}${ARTIFACT_MANIFEST.fileName}: bytes differ from the declared manifest digest/size`,
    );
  }
  const manifest = ARTIFACT_MANIFEST.parse(manifestBytes, `${base}${ARTIFACT_MANIFEST.fileName}`);
  const declared = new Map(declaration.files.map((f) => [f.path, f]));
  for (const payload of artifactPayloadFiles(manifest)) {
    const entry = declared.get(payload.path);
    if (
      entry === undefined ||
      entry.size !== payload.size ||
      (payload.sha256 && payload.sha256 !== entry.sha256)
    ) {
      throw new Error(`remote ${base}: manifest component file ${payload.path} is not declared as such`);
    }
  }
  for (const file of declaration.files) {
    const key = `${base}${file.path}`;
    const info = await store.head(key);
    if (info === undefined) throw new Error(`committed archive ${base}: declared ${file.path} is missing`);
    if (info.size !== file.size) {
      throw new Error(
        `committed archive ${base}: ${file.path} has ${info.size} bytes, declared ${file.size}`,
      );
    }
    if (info.sha256 !== undefined && info.sha256 !== file.sha256) {
      throw new Error(
        `committed archive ${base}: ${file.path} carries sha256 ${info.sha256}, declared ${file.sha256}`,
      );
    }
    const actual = sha256(await readObject(store, key));
    if (actual !== file.sha256) {
      throw new Error(
        `committed archive ${base}: ${file.path} content is ${actual}, declared ${file.sha256}`,
      );
    }
  }
  return { label: "committed", declaration, probes };
}

/**
 * The local receipt, if any, must be a valid record, exist only once the remote archive is
 * committed, and list exactly what was declared.
 */
export async function checkReceipt(
  artifactDir: string,
  remote: RemoteCheck,
): Promise<"receipt" | "no-receipt"> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(artifactDir, UPLOADED_MARKER.fileName));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "no-receipt";
    throw error;
  }
  const read = UPLOADED_MARKER.parse(bytes, join(artifactDir, UPLOADED_MARKER.fileName));
  if (read.legacy) throw new Error("publish wrote a legacy receipt");
  const receipt = read.marker;
  if (remote.label !== "committed")
    throw new Error(`receipt written while the remote archive is ${remote.label}`);
  if (receipt.kind !== "artifact") throw new Error(`receipt kind ${receipt.kind}`);
  const declared = new Map(remote.declaration!.files.map((f) => [f.path, f]));
  for (const f of receipt.files) {
    const d = declared.get(f.path);
    if (d === undefined || d.size !== f.size || d.sha256 !== f.sha256) {
      throw new Error(`receipt lists ${f.path} unlike the declaration`);
    }
  }
  if (receipt.files.length !== declared.size) throw new Error("receipt does not cover the declaration");
  return "receipt";
}

/** What a kill left in a fetch's staging directory. */
export type StagedLabel = "absent" | "no-record" | "incomplete" | "incomplete+manifest" | "complete";

async function fileDigest(path: string): Promise<{ size: number; sha256: string } | undefined> {
  try {
    const s = await stat(path);
    if (!s.isFile()) return undefined;
    return { size: s.size, sha256: sha256(await readFile(path)) };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * The staging invariants of a fetch of `declaration` into `iterDir`:
 * - a `.staged.json`, when there, is a valid record whose files are all declared with the same
 *   size and digest;
 * - `complete: true` means every fetched file (the native manifest and every file of its
 *   physical components) is in place with the declared size and digest;
 * - the local native manifest is put in place after every payload, so its presence means the
 *   same even before the record is completed.
 * Anything else must be resumable: the caller re-runs the fetch and checks it completes.
 */
export async function checkStaged(iterDir: string, declaration: ArchiveDeclaration): Promise<StagedLabel> {
  let entries: string[];
  try {
    entries = await readdir(iterDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw error;
  }
  const declared = new Map(declaration.files.map((f) => [f.path, f]));
  const recordBytes = await readFile(join(iterDir, STAGED_RECORD.fileName)).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    },
  );
  if (recordBytes === undefined) {
    const stray = entries.filter(
      (e) => !e.startsWith(`.${STAGED_RECORD.fileName}`) && !e.startsWith(STAGED_RECORD.fileName),
    );
    if (stray.length > 0)
      throw new Error(`staging dir ${iterDir} holds ${stray.join(", ")} without ${STAGED_RECORD.fileName}`);
    return "no-record";
  }
  const record = STAGED_RECORD.parse(recordBytes, join(iterDir, STAGED_RECORD.fileName));
  for (const f of record.files) {
    const d = declared.get(f.path);
    if (d === undefined || d.size !== f.size || d.sha256 !== f.sha256) {
      throw new Error(
        `${STAGED_RECORD.fileName} lists ${f.path} (${f.size}, ${f.sha256}) unlike the declaration`,
      );
    }
  }
  const manifestEntry = declared.get(ARTIFACT_MANIFEST.fileName);
  if (manifestEntry === undefined) throw new Error("declaration without the native manifest");
  const localManifest = await fileDigest(join(iterDir, ARTIFACT_MANIFEST.fileName));
  if (!record.complete && localManifest === undefined) return "incomplete";
  // From here every fetched file must be in place and verified.
  if (localManifest === undefined || localManifest.sha256 !== manifestEntry.sha256) {
    throw new Error(`complete staging ${iterDir}: native manifest missing or different`);
  }
  const manifest = ARTIFACT_MANIFEST.parse(
    await readFile(join(iterDir, ARTIFACT_MANIFEST.fileName)),
    iterDir,
  );
  const wanted = [ARTIFACT_MANIFEST.fileName, ...artifactPayloadFiles(manifest).map((p) => p.path)];
  const owned = new Set(record.files.map((f) => f.path));
  for (const path of wanted) {
    const d = declared.get(path);
    if (d === undefined) throw new Error(`fetched ${path} is not declared`);
    const got = await fileDigest(join(iterDir, path));
    if (got === undefined || got.size !== d.size || got.sha256 !== d.sha256) {
      throw new Error(
        `${record.complete ? "complete" : "manifest-bearing"} staging ${iterDir}: ${path} is ${JSON.stringify(got)}, declared ${d.size}/${d.sha256}`,
      );
    }
    if (record.complete && !owned.has(path))
      throw new Error(`complete ${STAGED_RECORD.fileName} does not own ${path}`);
  }
  return record.complete ? "complete" : "incomplete+manifest";
}
