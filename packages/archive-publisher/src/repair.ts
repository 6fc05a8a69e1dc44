import { createHash } from "node:crypto";
import { judgeRemoteObject, type RemoteObjectCheck, type RemoteObjectStatus } from "@ckpt/archive-reader";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  compareCodePoints,
  type FileEntry,
  mapPool,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { ArchivePublisherError, messageOf } from "./errors.js";
import { sameBytes } from "./internal/bytes.js";
import { readObject, storeCall } from "./internal/remote.js";
import type { LocalArtifact } from "./plan.js";
import { describeProblems } from "./plan.js";

/** An object of a committed archive that does not read back as declared, and so is re-uploaded. */
export interface RepairedObject {
  path: string;
  /** The declared size. */
  size: number;
  status: Exclude<RemoteObjectStatus, "ok" | "digest_absent">;
  /** What was found, one clause. */
  detail: string;
}

/**
 * Where the local files and the declared ones first part: the path and how, or undefined when
 * they agree. Payloads come first: the manifest differs whenever one of them does. Pure.
 */
export function firstDifference(
  local: readonly FileEntry[],
  declared: readonly FileEntry[],
): { path: string; how: string } | undefined {
  const byPath = (files: readonly FileEntry[]) => new Map(files.map((f) => [f.path, f]));
  const mine = byPath(local);
  const theirs = byPath(declared);
  const last = (path: string) => (path === ARTIFACT_MANIFEST.fileName ? 1 : 0);
  const paths = [...new Set([...mine.keys(), ...theirs.keys()])].sort(
    (a, b) => last(a) - last(b) || compareCodePoints(a, b),
  );
  for (const path of paths) {
    const a = mine.get(path);
    const b = theirs.get(path);
    if (a === undefined)
      return { path, how: "is declared by the archive but not part of the local artifact" };
    if (b === undefined)
      return { path, how: "is part of the local artifact but not declared by the archive" };
    if (a.size !== b.size || a.sha256 !== b.sha256) {
      return {
        path,
        how: `is ${a.size} bytes with sha256 ${a.sha256} locally, but the archive declares ${b.size} bytes with sha256 ${b.sha256}`,
      };
    }
  }
  return undefined;
}

/**
 * What a repair of `local` at a committed destination re-uploads: every declared object whose
 * check (made by reading it) is not `ok`, the native manifest last (it is the commit record).
 * Pure.
 */
export function planRepair(checks: readonly RemoteObjectCheck[]): RepairedObject[] {
  const damaged = checks
    .filter((c) => c.status !== "ok")
    .map((c) => ({
      path: c.path,
      size: c.expected.size,
      // An object read back always has a digest: "digest_absent" cannot occur.
      status: c.status as RepairedObject["status"],
      detail: describeProblems([c]),
    }));
  const last = (o: RepairedObject) => (o.path === ARTIFACT_MANIFEST.fileName ? 1 : 0);
  return damaged.sort((a, b) => last(a) - last(b) || compareCodePoints(a.path, b.path));
}

function refuse(
  code: "PUBLISH_REPAIR_NOT_COMMITTED" | "PUBLISH_REPAIR_MISMATCH",
  local: LocalArtifact,
  store: ObjectStore,
  reason: string,
  subject: string,
): ArchivePublisherError {
  const remedy =
    code === "PUBLISH_REPAIR_NOT_COMMITTED"
      ? "Nothing was written. Publish without --repair: it resumes an unfinished archive."
      : `Nothing was written: the archive at ${store.uri} is never overwritten with other bytes. Repair it from the artifact it was published from, or publish this one to another destination.`;
  return new ArchivePublisherError(code, `repair ${store.uri} from ${local.dir}: ${reason}. ${remedy}`, {
    kind: "refused",
    subject,
  });
}

/**
 * The committed archive's inventory, proven to be the local artifact's: its declaration (or,
 * for an archive published before declarations, its manifest) must record exactly `local.files`.
 * Refuses an uncommitted destination and one that declares other bytes, naming the first file.
 */
export async function declaredInventory(
  store: ObjectStore,
  local: LocalArtifact,
  signal: AbortSignal | undefined,
): Promise<FileEntry[]> {
  const [declaration, manifest] = await Promise.all([
    readObject(store, ARCHIVE_DECLARATION.fileName, signal),
    readObject(store, ARTIFACT_MANIFEST.fileName, signal),
  ]);
  if (declaration === undefined) {
    if (manifest === undefined) {
      throw refuse(
        "PUBLISH_REPAIR_NOT_COMMITTED",
        local,
        store,
        `the destination holds neither ${ARCHIVE_DECLARATION.fileName} nor ${ARTIFACT_MANIFEST.fileName}`,
        ARTIFACT_MANIFEST.fileName,
      );
    }
    if (!sameBytes(manifest, local.manifestBytes)) {
      throw refuse(
        "PUBLISH_REPAIR_MISMATCH",
        local,
        store,
        `${ARTIFACT_MANIFEST.fileName} differs from the local one (the archive has no declaration to say which is damaged)`,
        ARTIFACT_MANIFEST.fileName,
      );
    }
    return local.files;
  }
  if (manifest === undefined) {
    throw refuse(
      "PUBLISH_REPAIR_NOT_COMMITTED",
      local,
      store,
      `the destination holds no ${ARTIFACT_MANIFEST.fileName} (written last): the archive is unfinished, not damaged`,
      ARTIFACT_MANIFEST.fileName,
    );
  }
  let declared: FileEntry[];
  try {
    declared = ARCHIVE_DECLARATION.parse(declaration, ARCHIVE_DECLARATION.fileName).files;
  } catch (error) {
    throw refuse(
      "PUBLISH_REPAIR_MISMATCH",
      local,
      store,
      `its ${ARCHIVE_DECLARATION.fileName} is not a valid declaration (${messageOf(error)})`,
      ARCHIVE_DECLARATION.fileName,
    );
  }
  const difference = firstDifference(local.files, declared);
  if (difference !== undefined) {
    throw refuse(
      "PUBLISH_REPAIR_MISMATCH",
      local,
      store,
      `${difference.path} ${difference.how}`,
      difference.path,
    );
  }
  return local.files;
}

/** The sha256 and size of an object, from its bytes (its metadata is what a repair cannot trust). */
async function readDigest(
  store: ObjectStore,
  path: string,
  signal: AbortSignal | undefined,
): Promise<{ size: number; sha256: string }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of await store.get(path, signal ? { signal } : {})) {
    hash.update(chunk);
    size += chunk.byteLength;
  }
  return { size, sha256: hash.digest("hex") };
}

/**
 * Checks every declared object by reading it: missing (no HEAD), another size (HEAD), or bytes
 * whose sha256 is not the declared one (read in full: stored metadata can be as wrong as the body).
 */
export async function readBackArchive(
  store: ObjectStore,
  files: readonly FileEntry[],
  concurrency: number,
  signal: AbortSignal | undefined,
): Promise<RemoteObjectCheck[]> {
  return mapPool(files, concurrency, async (file) => {
    const head = await storeCall(store, "head", file.path, () =>
      store.head(file.path, signal ? { signal } : {}),
    );
    if (head === undefined || head.size !== file.size) return judgeRemoteObject(file, head);
    const read = await storeCall(store, "read", file.path, () => readDigest(store, file.path, signal));
    return judgeRemoteObject(file, { ...head, ...read });
  });
}
