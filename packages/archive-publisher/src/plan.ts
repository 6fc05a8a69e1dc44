import { join } from "node:path";
import { describeRemoteCheck, judgeRemoteObject, type RemoteObjectCheck } from "@ckpt/archive-reader";
import {
  ARCHIVE_DECLARATION,
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  UPLOADED_MARKER,
  type ArtifactManifest,
  artifactPayloadFiles,
  compareCodePoints,
  type Destination,
  type FileEntry,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  type MergeComplete,
  type PhysicalComponentName,
  type UploadedMarkerRead,
} from "@ckpt/manifest";
import { sameBytes } from "./internal/bytes.js";

/** One file publish selects, with what its record already says about it. */
export interface SelectedFile {
  path: string;
  /** Where the expectation comes from: a manifest component, or a record kept with the artifact. */
  role: "payload" | "manifest" | "merge-complete" | "legacy-manifest" | "merge-diagnostics";
  component?: PhysicalComponentName;
  /** Size and digest recorded for it, when a record states them. */
  size?: number;
  sha256?: string;
}

/**
 * The files an artifact archive holds: the native manifest's physical components, the manifest
 * itself, the merge completion and preserved legacy manifest when present, and the merge
 * diagnostic the completion records inside the artifact. Nothing else (a stale `optim.pt` of an
 * unselected component is not archived). Sorted by path. Pure.
 */
export function selectArchiveFiles(
  manifest: ArtifactManifest,
  records: { mergeComplete?: MergeComplete; legacyManifest: boolean },
): SelectedFile[] {
  const selected: SelectedFile[] = artifactPayloadFiles(manifest).map((f) => ({
    path: f.path,
    role: "payload",
    component: f.component,
    size: f.size,
    ...(f.sha256 === undefined ? {} : { sha256: f.sha256 }),
  }));
  selected.push({ path: ARTIFACT_MANIFEST.fileName, role: "manifest" });
  if (records.legacyManifest) selected.push({ path: LEGACY_ARTIFACT_MANIFEST_FILE, role: "legacy-manifest" });
  const merge = records.mergeComplete;
  if (merge !== undefined) {
    selected.push({ path: MERGE_COMPLETE.fileName, role: "merge-complete" });
    const diagnostics = merge.diagnostics;
    if (diagnostics !== null && diagnostics.location === "artifact") {
      selected.push({
        path: diagnostics.path,
        role: "merge-diagnostics",
        size: diagnostics.size,
        sha256: diagnostics.sha256,
      });
    }
  }
  return selected.sort((a, b) => compareCodePoints(a.path, b.path));
}

/** The local side of a publish, fully hashed: what would be declared and uploaded. */
export interface LocalArtifact {
  /** Absolute artifact directory. */
  dir: string;
  iteration: number;
  /** The native manifest with every digest filled in. */
  manifest: ArtifactManifest;
  /** The manifest bytes that are uploaded (and written locally first when `manifestRewrite`). */
  manifestBytes: Uint8Array;
  /** The local manifest must be rewritten: digests were added or a legacy manifest converted. */
  manifestRewrite: boolean;
  /** Original bytes of a legacy merge manifest still to be preserved beside the new one. */
  legacyOriginal?: Uint8Array;
  /** Every archived file with size and digest, sorted by path (the declaration's inventory). */
  files: FileEntry[];
  /**
   * Payloads the manifest lists that are not on disk (released by an earlier publish), sorted.
   * Their entries in `files` are what the manifest records; they were not hashed.
   */
  absent: string[];
  /**
   * Files on disk whose inventory digest is the one their manifest records, not yet checked
   * against their bytes (sizes were): an upload checks them as it reads them, and an adoption or
   * a skip hashes them first. Sorted.
   */
  unverified: string[];
  /** The canonical `.posttrain-archive.json` bytes for `files`. */
  declarationBytes: Uint8Array;
  /** The local `.uploaded`, when one exists and parses. */
  receipt?: UploadedMarkerRead;
}

/** What the destination holds, as read before acting. */
export interface RemoteState {
  /** Bytes of `.posttrain-archive.json`, when present. */
  declaration?: Uint8Array;
  /** Bytes of the remote native manifest, when present (the archive is committed). */
  manifest?: Uint8Array;
  /** HEAD of each declared payload key that exists (size, and the stored sha256 metadata). */
  objects?: ReadonlyMap<string, { size: number; sha256?: string }>;
}

export type PublishPlan =
  | {
      action: "refuse";
      code:
        | "PUBLISH_DECLARATION_CONFLICT"
        | "PUBLISH_REMOTE_CONFLICT"
        | "PUBLISH_PAYLOAD_MISMATCH"
        | "PUBLISH_RELEASED_REMOTE_INVALID";
      reason: string;
      /** What the refusal is about: a local path for a payload, else a key of the destination. */
      subject: string;
    }
  | { action: "skip" }
  | { action: "adopt" }
  | {
      action: "publish";
      /** No declaration exists yet: create it (conditionally) before any payload. */
      createDeclaration: boolean;
      /** Payloads to upload, in order. */
      upload: FileEntry[];
      /** Payloads already present with the declared size and digest. */
      present: FileEntry[];
    };

function sameInventory(
  a: readonly FileEntry[],
  b: readonly { path: string; size: number; sha256?: string }[],
): boolean {
  if (a.length !== b.length) return false;
  const sorted = [...b].sort((x, y) => compareCodePoints(x.path, y.path));
  return a.every(
    (f, i) => f.path === sorted[i]!.path && f.size === sorted[i]!.size && f.sha256 === sorted[i]!.sha256,
  );
}

function sameIdentity(a: Destination, b: Destination): boolean {
  return a.scheme === b.scheme && a.endpoint === b.endpoint && a.bucket === b.bucket && a.prefix === b.prefix;
}

/** Why the local receipt does not bind this destination to exactly this inventory, if it does not. */
function receiptProblem(local: LocalArtifact, destination: Destination): string | undefined {
  const read = local.receipt;
  if (read === undefined) return `there is no readable ${UPLOADED_MARKER.fileName} receipt`;
  if (read.legacy)
    return `the ${UPLOADED_MARKER.fileName} receipt is a legacy one-line marker that records no inventory`;
  const marker = read.marker;
  if (marker.kind !== "artifact" || marker.iteration !== local.iteration) {
    return `the ${UPLOADED_MARKER.fileName} receipt records a ${marker.kind} of iteration ${marker.iteration}`;
  }
  if (!sameIdentity(marker.destination, destination)) {
    const { scheme, bucket, prefix } = marker.destination;
    return `the ${UPLOADED_MARKER.fileName} receipt binds another destination (${scheme} ${bucket}/${prefix})`;
  }
  if (!sameInventory(local.files, marker.files)) {
    return `the ${UPLOADED_MARKER.fileName} receipt records another inventory than the manifest and the files present`;
  }
  return undefined;
}

/** Whether the local receipt already binds this destination to exactly this inventory. Pure. */
export function receiptMatches(local: LocalArtifact, destination: Destination): boolean {
  return receiptProblem(local, destination) === undefined;
}

/** Paths named in a message: the first `most`, then how many more. */
function nameSome(paths: readonly string[], most = 5): string {
  const named = paths.slice(0, most).join(", ");
  return paths.length > most ? `${named} and ${paths.length - most} more` : named;
}

/** The objects of a remote check that are not `ok`, one clause each (at most five). Pure. */
export function describeProblems(checks: readonly RemoteObjectCheck[]): string {
  const problems = checks.filter((c) => c.status !== "ok");
  const listed = problems.slice(0, 5).map((c) => describeRemoteCheck(c));
  return `${listed.join("; ")}${problems.length > 5 ? `; and ${problems.length - 5} more` : ""}`;
}

/**
 * An artifact some of whose payloads were released (`local.absent`): they can be accounted for
 * only by the receipt of this destination recording exactly this inventory, and only the archive
 * that receipt records can stand in for them; nothing can be uploaded from a released copy.
 */
function planReleased(local: LocalArtifact, remote: RemoteState, destination: Destination): PublishPlan {
  const released = `${nameSome(local.absent)} ${local.absent.length === 1 ? "is" : "are"} not on disk`;
  const problem = receiptProblem(local, destination);
  if (problem !== undefined) {
    return {
      action: "refuse",
      code: "PUBLISH_PAYLOAD_MISMATCH",
      reason: `${released}, and no receipt for this destination accounts for them: ${problem}`,
      subject: join(local.dir, local.absent[0]!),
    };
  }
  let lost: string;
  if (remote.manifest === undefined) {
    const checks = local.files
      .filter((f) => f.path !== ARTIFACT_MANIFEST.fileName)
      .map((f) => {
        const head = remote.objects?.get(f.path);
        return judgeRemoteObject(f, head === undefined ? undefined : { key: f.path, metadata: {}, ...head });
      });
    const payloads = checks.some((c) => c.status !== "ok") ? `; ${describeProblems(checks)}` : "";
    lost = `the destination holds no ${ARTIFACT_MANIFEST.fileName}${payloads}`;
  } else if (!sameBytes(remote.manifest, local.manifestBytes)) {
    lost = `the destination holds a different ${ARTIFACT_MANIFEST.fileName}`;
  } else if (remote.declaration !== undefined && !sameBytes(remote.declaration, local.declarationBytes)) {
    lost = `the destination declares a different inventory in ${ARCHIVE_DECLARATION.fileName}`;
  } else {
    return { action: "skip" };
  }
  return {
    action: "refuse",
    code: "PUBLISH_RELEASED_REMOTE_INVALID",
    reason: `${released} (released after an earlier publish), and the archive its receipt records is no longer there: ${lost}`,
    subject: ARTIFACT_MANIFEST.fileName,
  };
}

/**
 * Decides what a publish does, from the hashed local artifact and the destination's state:
 * - payloads not on disk (`local.absent`, released by an earlier publish): accepted only when the
 *   local receipt binds this destination to exactly this inventory (so it covers them, and the
 *   payloads present were hashed against it), else refuse PUBLISH_PAYLOAD_MISMATCH; then `skip`
 *   when the destination holds the committed archive (identical manifest and declaration), else
 *   refuse PUBLISH_RELEASED_REMOTE_INVALID, naming what is gone: a released copy cannot be
 *   published again;
 * - remote manifest present (committed): identical manifest and declaration → `skip` when the
 *   local receipt already matches, else `adopt`; anything else → refuse PUBLISH_REMOTE_CONFLICT
 *   (a committed prefix is never overwritten);
 * - no remote manifest: a declaration of other bytes → refuse PUBLISH_DECLARATION_CONFLICT
 *   before any write; otherwise `publish`, uploading the payloads not already present with the
 *   declared size and digest. Pure.
 */
export function planPublish(
  local: LocalArtifact,
  remote: RemoteState,
  destination: Destination,
): PublishPlan {
  if (local.absent.length > 0) return planReleased(local, remote, destination);
  const declarationMatches =
    remote.declaration === undefined || sameBytes(remote.declaration, local.declarationBytes);
  if (remote.manifest !== undefined) {
    if (!sameBytes(remote.manifest, local.manifestBytes)) {
      return {
        action: "refuse",
        code: "PUBLISH_REMOTE_CONFLICT",
        reason: `the destination is committed with a different ${ARTIFACT_MANIFEST.fileName}`,
        subject: ARTIFACT_MANIFEST.fileName,
      };
    }
    if (!declarationMatches) {
      return {
        action: "refuse",
        code: "PUBLISH_REMOTE_CONFLICT",
        reason: "the destination is committed with the same manifest but declares a different inventory",
        subject: ARTIFACT_MANIFEST.fileName,
      };
    }
    return receiptMatches(local, destination) ? { action: "skip" } : { action: "adopt" };
  }
  if (!declarationMatches) {
    return {
      action: "refuse",
      code: "PUBLISH_DECLARATION_CONFLICT",
      reason: `the destination already declares a different inventory in ${ARCHIVE_DECLARATION.fileName}`,
      subject: ARCHIVE_DECLARATION.fileName,
    };
  }
  const upload: FileEntry[] = [];
  const present: FileEntry[] = [];
  for (const file of local.files) {
    if (file.path === ARTIFACT_MANIFEST.fileName) continue;
    const object = remote.objects?.get(file.path);
    if (object !== undefined && object.size === file.size && object.sha256 === file.sha256)
      present.push(file);
    else upload.push(file);
  }
  return { action: "publish", createDeclaration: remote.declaration === undefined, upload, present };
}
