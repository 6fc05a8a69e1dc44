import { basename, dirname } from "node:path";
import {
  type ArtifactManifest,
  artifactPayloadFiles,
  CHECKPOINT_ARTIFACTS_DIR,
  CHECKPOINTS_DIR,
  classifyIterPath,
  type UploadedMarker,
} from "@ckpt/manifest";
import { type DestinationIdentity, sameDestination } from "@ckpt/object-store";
import type { RemoteInventoryCheck, RemoteObjectCheck } from "@ckpt/archive-reader";
import { RetentionError } from "../errors.js";

/**
 * Why prune-verified keeps an artifact. A closed set: every gate has its code. The codes in
 * {@link PRUNE_ERROR_CODES} are also errors (the command fails); the others are ordinary keeps.
 */
export type PruneKeepCode =
  | "PRUNE_NOT_FOUND"
  | "PRUNE_NOT_AN_ARTIFACT"
  | "PRUNE_NO_MANIFEST"
  | "PRUNE_INVALID_MANIFEST"
  | "PRUNE_NO_RECEIPT"
  | "PRUNE_LEGACY_RECEIPT"
  | "PRUNE_INVALID_RECEIPT"
  | "PRUNE_MISSING_DIGEST"
  | "PRUNE_DESTINATION_MISMATCH"
  | "PRUNE_UNCOVERED_PAYLOAD"
  | "PRUNE_MANIFEST_CONFLICT"
  | "PRUNE_UNCOVERED_LOCAL_FILE"
  | "PRUNE_ALREADY_RELEASED"
  | "PRUNE_LOCAL_DIGEST_MISMATCH"
  | "PRUNE_REMOTE_MISSING"
  | "PRUNE_REMOTE_SIZE_MISMATCH"
  | "PRUNE_REMOTE_DIGEST_MISMATCH"
  | "PRUNE_REMOTE_DIGEST_ABSENT"
  | "PRUNE_REMOTE_SIZE_CONFLICT"
  | "PRUNE_REMOTE_UNREACHABLE"
  | "PRUNE_LOCAL_UNREADABLE"
  | "PRUNE_LOCAL_CHANGED"
  | "PRUNE_DELETE_FAILED";

export const PRUNE_KEEP_CODES: readonly PruneKeepCode[] = [
  "PRUNE_NOT_FOUND",
  "PRUNE_NOT_AN_ARTIFACT",
  "PRUNE_NO_MANIFEST",
  "PRUNE_INVALID_MANIFEST",
  "PRUNE_NO_RECEIPT",
  "PRUNE_LEGACY_RECEIPT",
  "PRUNE_INVALID_RECEIPT",
  "PRUNE_MISSING_DIGEST",
  "PRUNE_DESTINATION_MISMATCH",
  "PRUNE_UNCOVERED_PAYLOAD",
  "PRUNE_MANIFEST_CONFLICT",
  "PRUNE_UNCOVERED_LOCAL_FILE",
  "PRUNE_ALREADY_RELEASED",
  "PRUNE_LOCAL_DIGEST_MISMATCH",
  "PRUNE_REMOTE_MISSING",
  "PRUNE_REMOTE_SIZE_MISMATCH",
  "PRUNE_REMOTE_DIGEST_MISMATCH",
  "PRUNE_REMOTE_DIGEST_ABSENT",
  "PRUNE_REMOTE_SIZE_CONFLICT",
  "PRUNE_REMOTE_UNREACHABLE",
  "PRUNE_LOCAL_UNREADABLE",
  "PRUNE_LOCAL_CHANGED",
  "PRUNE_DELETE_FAILED",
];

/**
 * Keeps that are errors: a remote object that claims the recorded digest with another size (the
 * destination contradicts itself), and an executor that could not reach the store, read the local
 * files or delete them.
 */
export const PRUNE_ERROR_CODES: ReadonlySet<PruneKeepCode> = new Set([
  "PRUNE_REMOTE_SIZE_CONFLICT",
  "PRUNE_REMOTE_UNREACHABLE",
  "PRUNE_LOCAL_UNREADABLE",
  "PRUNE_LOCAL_CHANGED",
  "PRUNE_DELETE_FAILED",
]);

/** What the given path is on disk. `realPath` has every symbolic link resolved. */
export type PathTarget =
  | { readonly type: "missing" }
  | { readonly type: "directory" | "file" | "other"; readonly realPath: string };

export type ManifestEvidence =
  | { readonly state: "absent" }
  | { readonly state: "invalid"; readonly detail: string }
  | { readonly state: "valid"; readonly manifest: ArtifactManifest };

export type ReceiptEvidence =
  | { readonly state: "absent" }
  | { readonly state: "legacy" }
  /** `missingDigest`: a JSON receipt with an entry lacking its sha256. */
  | { readonly state: "invalid"; readonly detail: string; readonly missingDigest: boolean }
  | { readonly state: "valid"; readonly marker: UploadedMarker };

/** The destination the supplied credentials address at the receipt's scheme, bucket and prefix. */
export type AddressedEvidence =
  | { readonly ok: true; readonly destination: DestinationIdentity }
  | { readonly ok: false; readonly detail: string };

/** One entry under the artifact directory (the receipt and its temporary excluded). */
export interface LocalEntry {
  /** Relative to the artifact directory, POSIX separators. */
  readonly path: string;
  /** `other`: a symbolic link, FIFO, socket or device: never covered by a receipt. */
  readonly type: "file" | "other";
  readonly size: number;
}

/**
 * Everything prune-verified knows about one requested path. The executor fills the fields in the
 * order {@link nextEvidence} asks for them, so nothing expensive (hashing, HEAD requests) is done
 * for an artifact an earlier gate already keeps.
 */
export interface ArtifactEvidence {
  /** The path as the caller gave it. */
  readonly path: string;
  readonly target: PathTarget;
  readonly manifest?: ManifestEvidence;
  readonly receipt?: ReceiptEvidence;
  readonly addressed?: AddressedEvidence;
  readonly local?: readonly LocalEntry[];
  /** sha256 of each local regular file, by relative path. */
  readonly localDigests?: Readonly<Record<string, string>>;
  readonly remote?: RemoteInventoryCheck;
}

export type EvidenceField = "manifest" | "receipt" | "addressed" | "local" | "localDigests" | "remote";

export interface PruneRemoval {
  readonly path: string;
  readonly artifactDir: string;
  /** The payload files present locally, relative to the artifact directory. */
  readonly files: readonly { readonly path: string; readonly size: number }[];
  readonly bytes: number;
}

export interface PruneKeep {
  readonly path: string;
  readonly artifactDir?: string;
  readonly code: PruneKeepCode;
  readonly reason: string;
}

export interface PrunePlan {
  readonly remove: readonly PruneRemoval[];
  readonly keep: readonly PruneKeep[];
}

type Verdict =
  | { readonly kind: "remove"; readonly removal: PruneRemoval }
  | { readonly kind: "keep"; readonly keep: PruneKeep }
  | { readonly kind: "need"; readonly field: EvidenceField };

/** The artifact directory a path names: `checkpoint_artifacts/iter_*` itself, or its `model.pt`. Pure. */
export function locateArtifact(
  target: PathTarget,
): { ok: true; dir: string; iteration: number } | { ok: false; reason: string } {
  if (target.type === "missing") return { ok: false, reason: "it does not exist" };
  const dir =
    target.type === "file" && basename(target.realPath) === "model.pt"
      ? dirname(target.realPath)
      : target.realPath;
  const where = classifyIterPath(dir);
  if (where?.root === CHECKPOINTS_DIR) {
    return {
      ok: false,
      reason: `it is a full checkpoint under ${CHECKPOINTS_DIR}/; those are released by the retention policies (keep_optim_last, keep_model_last), never by prune-verified`,
    };
  }
  if (where?.root !== CHECKPOINT_ARTIFACTS_DIR || (target.type !== "directory" && dir === target.realPath)) {
    return {
      ok: false,
      reason: `it is not a ${CHECKPOINT_ARTIFACTS_DIR}/iter_* directory or the model.pt inside one`,
    };
  }
  return { ok: true, dir, iteration: where.iteration };
}

const MAX_NAMED = 5;
function named(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_NAMED).join(", ");
  return paths.length > MAX_NAMED ? `${shown} and ${paths.length - MAX_NAMED} more` : shown;
}

const REMOTE_ORDER: ReadonlyArray<[RemoteObjectCheck["status"], PruneKeepCode, string]> = [
  ["missing", "PRUNE_REMOTE_MISSING", "missing from the destination"],
  ["size_mismatch", "PRUNE_REMOTE_SIZE_MISMATCH", "of another size at the destination than recorded"],
  ["digest_mismatch", "PRUNE_REMOTE_DIGEST_MISMATCH", "of another sha256 at the destination than recorded"],
  [
    "digest_absent",
    "PRUNE_REMOTE_DIGEST_ABSENT",
    "without sha256 metadata at the destination, so a HEAD cannot verify it",
  ],
];

function evaluate(e: ArtifactEvidence): Verdict {
  const keep = (code: PruneKeepCode, reason: string, artifactDir?: string): Verdict => ({
    kind: "keep",
    keep: { path: e.path, ...(artifactDir === undefined ? {} : { artifactDir }), code, reason },
  });
  if (e.target.type === "missing")
    return keep("PRUNE_NOT_FOUND", `${e.path} does not exist. Check the path.`);
  const located = locateArtifact(e.target);
  if (!located.ok) return keep("PRUNE_NOT_AN_ARTIFACT", `${e.path}: ${located.reason}.`);
  const dir = located.dir;
  const k = (code: PruneKeepCode, reason: string) => keep(code, `${dir}: ${reason}`, dir);

  if (e.manifest === undefined) return { kind: "need", field: "manifest" };
  if (e.manifest.state === "absent") {
    return k(
      "PRUNE_NO_MANIFEST",
      "there is no native manifest, so it is not a committed artifact. Nothing is released.",
    );
  }
  if (e.manifest.state === "invalid") {
    return k("PRUNE_INVALID_MANIFEST", `the native manifest cannot be used: ${e.manifest.detail}`);
  }
  const manifest = e.manifest.manifest;
  if (manifest.iteration !== located.iteration) {
    return k(
      "PRUNE_INVALID_MANIFEST",
      `the native manifest records iteration ${manifest.iteration}, but the directory is iteration ${located.iteration}.`,
    );
  }

  if (e.receipt === undefined) return { kind: "need", field: "receipt" };
  const publish = "Publish it (ckpt artifact publish) to write a receipt, then prune again.";
  switch (e.receipt.state) {
    case "absent":
      return k("PRUNE_NO_RECEIPT", `there is no .uploaded receipt, so no archive is proven. ${publish}`);
    case "legacy":
      return k(
        "PRUNE_LEGACY_RECEIPT",
        `.uploaded is a legacy one-line marker; it binds no destination and no digests, so it never authorises deletion. ${publish}`,
      );
    case "invalid":
      return e.receipt.missingDigest
        ? k(
            "PRUNE_MISSING_DIGEST",
            `the receipt lists a file without a sha256, so it cannot be verified. ${publish}`,
          )
        : k("PRUNE_INVALID_RECEIPT", `the receipt cannot be used: ${e.receipt.detail}`);
  }
  const marker = e.receipt.marker;
  if (marker.kind !== "artifact") {
    return k(
      "PRUNE_INVALID_RECEIPT",
      `the receipt is a ${marker.kind} receipt, not an artifact receipt. ${publish}`,
    );
  }
  if (marker.iteration !== located.iteration) {
    return k(
      "PRUNE_INVALID_RECEIPT",
      `the receipt records iteration ${marker.iteration}, but the directory is iteration ${located.iteration}. ${publish}`,
    );
  }

  if (e.addressed === undefined) return { kind: "need", field: "addressed" };
  const bound = marker.destination;
  const where = `${bound.scheme}://${bound.bucket}${bound.prefix === "" ? "" : `/${bound.prefix}`} at ${bound.endpoint}`;
  if (!e.addressed.ok) {
    return k(
      "PRUNE_DESTINATION_MISMATCH",
      `the receipt's destination ${where} cannot be addressed: ${e.addressed.detail}`,
    );
  }
  if (!sameDestination(e.addressed.destination, bound)) {
    return k(
      "PRUNE_DESTINATION_MISMATCH",
      `the receipt binds ${where}, but the credentials address endpoint ${e.addressed.destination.endpoint}. ` +
        "Pass the credentials of the destination the receipt names.",
    );
  }

  const recorded = new Map(marker.files.map((f) => [f.path, f]));
  const payload = artifactPayloadFiles(manifest);
  const unlisted = payload.filter((p) => !recorded.has(p.path)).map((p) => p.path);
  if (unlisted.length > 0) {
    return k(
      "PRUNE_UNCOVERED_PAYLOAD",
      `the receipt does not list the payload ${named(unlisted)}. ${publish}`,
    );
  }
  const conflicting = payload
    .filter((p) => {
      const r = recorded.get(p.path)!;
      return r.size !== p.size || (p.sha256 !== undefined && r.sha256 !== p.sha256);
    })
    .map((p) => p.path);
  if (conflicting.length > 0) {
    return k(
      "PRUNE_MANIFEST_CONFLICT",
      `the manifest and the receipt disagree on the size or sha256 of ${named(conflicting)}. Publish it again before pruning.`,
    );
  }

  if (e.local === undefined) return { kind: "need", field: "local" };
  const uncovered = e.local.filter((f) => f.type !== "file" || !recorded.has(f.path)).map((f) => f.path);
  if (uncovered.length > 0) {
    return k(
      "PRUNE_UNCOVERED_LOCAL_FILE",
      `${named(uncovered)} ${uncovered.length === 1 ? "is" : "are"} not covered by the receipt (not archived, or not a regular file). ` +
        "Move them out of the artifact, or publish to a new destination, before pruning.",
    );
  }
  const present = new Map(e.local.map((f) => [f.path, f]));
  const releasable = payload.filter((p) => present.has(p.path));
  if (releasable.length === 0) {
    return k(
      "PRUNE_ALREADY_RELEASED",
      "its payload files are already released; the manifest and receipt stay.",
    );
  }
  const resized = e.local.filter((f) => f.size !== recorded.get(f.path)!.size).map((f) => f.path);
  if (resized.length > 0) {
    return k(
      "PRUNE_LOCAL_DIGEST_MISMATCH",
      `${named(resized)} changed size since the receipt was written. Publish again before pruning.`,
    );
  }

  if (e.localDigests === undefined) return { kind: "need", field: "localDigests" };
  const digests = e.localDigests;
  const changed = e.local.filter((f) => digests[f.path] !== recorded.get(f.path)!.sha256).map((f) => f.path);
  if (changed.length > 0) {
    return k(
      "PRUNE_LOCAL_DIGEST_MISMATCH",
      `the bytes of ${named(changed)} no longer match the receipt's sha256. Publish again before pruning.`,
    );
  }

  if (e.remote === undefined) return { kind: "need", field: "remote" };
  const checks = new Map(e.remote.objects.map((o) => [o.path, o]));
  const statusOf = (path: string) => checks.get(path)?.status ?? "missing";
  const conflict = marker.files.filter((f) => {
    const o = checks.get(f.path);
    return o?.status === "size_mismatch" && o.actual?.sha256 !== undefined && o.actual.sha256 === f.sha256;
  });
  if (conflict.length > 0) {
    const o = checks.get(conflict[0]!.path)!;
    return k(
      "PRUNE_REMOTE_SIZE_CONFLICT",
      `the destination's ${named(conflict.map((f) => f.path))} claims the recorded sha256 with another size ` +
        `(${o.actual?.size} bytes, ${o.expected.size} recorded): the destination contradicts itself. Investigate it before releasing anything.`,
    );
  }
  for (const [status, code, what] of REMOTE_ORDER) {
    const bad = marker.files.filter((f) => statusOf(f.path) === status).map((f) => f.path);
    if (bad.length > 0) {
      return k(
        code,
        `remote check of ${named(bad)}: ${what}. The local copy stays. Repair the archive from it: ckpt artifact publish --repair (the --artifact-dir, --upload-prefix and --bucket it was published with) re-uploads the missing or damaged objects; or restore them from another copy of the archive (ckpt store copy <copy> <uri>).`,
      );
    }
  }

  const files = releasable.map((p) => ({ path: p.path, size: present.get(p.path)!.size }));
  return {
    kind: "remove",
    removal: { path: e.path, artifactDir: dir, files, bytes: files.reduce((s, f) => s + f.size, 0) },
  };
}

/**
 * The next piece of evidence the gates need for this path, or undefined once a decision can be
 * made. Executors gather exactly what this asks for. Pure.
 */
export function nextEvidence(evidence: ArtifactEvidence): EvidenceField | undefined {
  const verdict = evaluate(evidence);
  return verdict.kind === "need" ? verdict.field : undefined;
}

/**
 * Decides, for each candidate, whether its payload files may be released. A candidate is removed
 * only when every gate passes: it is a `checkpoint_artifacts/iter_*` directory (or its model.pt)
 * with a valid native manifest; a JSON artifact receipt (a legacy one never authorises) bound to the
 * destination the credentials address; the receipt lists every payload and covers every local file;
 * the local bytes match the receipt; and every recorded object is live with the recorded size and
 * sha256. Anything else is kept with a code and a reason. Throws `RETENTION_EVIDENCE_INCOMPLETE`
 * when a gate needs evidence the candidate lacks (see {@link nextEvidence}). Pure.
 */
export function planPruneVerified(candidates: readonly ArtifactEvidence[]): PrunePlan {
  const remove: PruneRemoval[] = [];
  const keep: PruneKeep[] = [];
  for (const candidate of candidates) {
    const verdict = evaluate(candidate);
    if (verdict.kind === "need") {
      throw new RetentionError(
        "RETENTION_EVIDENCE_INCOMPLETE",
        `plan prune of ${candidate.path}: the ${verdict.field} evidence is missing. Gather what nextEvidence() asks for before planning.`,
        { kind: "input", subject: candidate.path },
      );
    }
    if (verdict.kind === "keep") keep.push(verdict.keep);
    else remove.push(verdict.removal);
  }
  return { remove, keep };
}
