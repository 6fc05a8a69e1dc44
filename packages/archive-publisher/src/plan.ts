import {
  ARTIFACT_MANIFEST_FILE,
  type ArtifactManifest,
  artifactPayloadFiles,
  compareCodePoints,
  type Destination,
  type FileEntry,
  LEGACY_ARTIFACT_MANIFEST_FILE,
  MERGE_COMPLETE_FILE,
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
  selected.push({ path: ARTIFACT_MANIFEST_FILE, role: "manifest" });
  if (records.legacyManifest) selected.push({ path: LEGACY_ARTIFACT_MANIFEST_FILE, role: "legacy-manifest" });
  const merge = records.mergeComplete;
  if (merge !== undefined) {
    selected.push({ path: MERGE_COMPLETE_FILE, role: "merge-complete" });
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
      code: "PUBLISH_DECLARATION_CONFLICT" | "PUBLISH_REMOTE_CONFLICT";
      reason: string;
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

/** Whether the local receipt already binds this destination to exactly this inventory. Pure. */
export function receiptMatches(local: LocalArtifact, destination: Destination): boolean {
  const read = local.receipt;
  if (read === undefined || read.legacy) return false;
  const marker = read.marker;
  return (
    marker.kind === "artifact" &&
    marker.iteration === local.iteration &&
    sameIdentity(marker.destination, destination) &&
    sameInventory(local.files, marker.files)
  );
}

/**
 * Decides what a publish does, from the hashed local artifact and the destination's state:
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
  const declarationMatches =
    remote.declaration === undefined || sameBytes(remote.declaration, local.declarationBytes);
  if (remote.manifest !== undefined) {
    if (!sameBytes(remote.manifest, local.manifestBytes)) {
      return {
        action: "refuse",
        code: "PUBLISH_REMOTE_CONFLICT",
        reason: `the destination is committed with a different ${ARTIFACT_MANIFEST_FILE}`,
      };
    }
    if (!declarationMatches) {
      return {
        action: "refuse",
        code: "PUBLISH_REMOTE_CONFLICT",
        reason: "the destination is committed with the same manifest but declares a different inventory",
      };
    }
    return receiptMatches(local, destination) ? { action: "skip" } : { action: "adopt" };
  }
  if (!declarationMatches) {
    return {
      action: "refuse",
      code: "PUBLISH_DECLARATION_CONFLICT",
      reason: "the destination already declares a different inventory in .posttrain-archive.json",
    };
  }
  const upload: FileEntry[] = [];
  const present: FileEntry[] = [];
  for (const file of local.files) {
    if (file.path === ARTIFACT_MANIFEST_FILE) continue;
    const object = remote.objects?.get(file.path);
    if (object !== undefined && object.size === file.size && object.sha256 === file.sha256)
      present.push(file);
    else upload.push(file);
  }
  return { action: "publish", createDeclaration: remote.declaration === undefined, upload, present };
}
