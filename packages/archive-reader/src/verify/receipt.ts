import { join } from "node:path";
import {
  type Destination,
  ManifestError,
  UPLOADED_MARKER,
  type UploadedMarker,
  type UploadedMarkerRead,
} from "@ckpt/manifest";
import { type ObjectStore, sameDestination } from "@ckpt/object-store";
import { ArchiveReaderError } from "../errors.js";
import { describeDestination } from "../internal/destination.js";
import {
  describeRemoteCheck,
  type RemoteObjectCheck,
  type RemoteObjectStatus,
  type VerifyRemoteOptions,
  verifyRemoteFiles,
} from "./remote.js";

export interface VerifyProblem {
  readonly path: string;
  readonly status: Exclude<RemoteObjectStatus, "ok">;
  readonly message: string;
}

/** The outcome of verifying a local receipt against its destination. */
export interface VerifyReport {
  /** True when every recorded object is live with its recorded size and digest. */
  readonly ok: boolean;
  /** The destination the receipt binds (equal to the store's identity). */
  readonly destination: Destination;
  /** The receipt that was read. */
  readonly receipt: string;
  readonly kind: UploadedMarker["kind"];
  readonly iteration: number;
  readonly objects: readonly RemoteObjectCheck[];
  /** One entry per object that is not ok, naming it. */
  readonly problems: readonly VerifyProblem[];
}

export type VerifyReceiptOptions = VerifyRemoteOptions;

/**
 * Reads `<iterDir>/.uploaded` and returns the receipt it holds. A missing or malformed file is
 * input the caller must fix; a legacy one-line receipt is refused: it binds no destination and no
 * digest, so nothing can be verified through it.
 */
export async function readReceipt(iterDir: string): Promise<{ path: string; marker: UploadedMarker }> {
  const path = join(iterDir, UPLOADED_MARKER.fileName);
  let read: UploadedMarkerRead;
  try {
    read = await UPLOADED_MARKER.read(path);
  } catch (error) {
    if (error instanceof ManifestError && error.code === "RECORD_NOT_FOUND") {
      throw new ArchiveReaderError(
        "READER_RECEIPT_MISSING",
        `verify ${iterDir}: there is no ${UPLOADED_MARKER.fileName} receipt. Publish the artifact first; only a published directory can be verified.`,
        { kind: "input", subject: path, cause: error },
      );
    }
    if (error instanceof ManifestError && error.kind === "input") {
      throw new ArchiveReaderError(
        "READER_RECEIPT_INVALID",
        `verify ${iterDir}: the receipt cannot be used: ${error.message}`,
        { kind: "input", subject: path, cause: error },
      );
    }
    throw error;
  }
  if (read.legacy) {
    throw new ArchiveReaderError(
      "READER_LEGACY_RECEIPT",
      `verify ${iterDir}: ${path} is a legacy one-line receipt; it names no destination and no digests, so it cannot be verified. ` +
        "Publish the artifact again to write a verifiable receipt.",
      { kind: "refused", subject: path },
    );
  }
  return { path, marker: read.marker };
}

/**
 * Verifies a local receipt: refuses one bound to another destination than `store.identity`
 * before any request is made, then HEADs every recorded object. A missing object, a changed size
 * and a changed or absent digest each fail verification with the object named. HEAD only: the
 * contents are not downloaded (fetch proves the bytes).
 */
export async function verifyReceipt(
  iterDir: string,
  store: ObjectStore,
  options: VerifyReceiptOptions = {},
): Promise<VerifyReport> {
  const { path, marker } = await readReceipt(iterDir);
  if (!sameDestination(marker.destination, store.identity)) {
    throw new ArchiveReaderError(
      "READER_RECEIPT_DESTINATION_MISMATCH",
      `verify ${iterDir}: the receipt binds ${describeDestination(marker.destination)}, but the store opened is ` +
        `${describeDestination(store.identity)}. Pass the credentials (endpoint) and URI of the destination the receipt names.`,
      { kind: "refused", subject: path },
    );
  }
  const check = await verifyRemoteFiles(store, marker.files, options);
  const problems: VerifyProblem[] = [];
  for (const object of check.objects) {
    if (object.status === "ok") continue;
    problems.push({ path: object.path, status: object.status, message: describeRemoteCheck(object) });
  }
  return {
    ok: check.ok,
    destination: marker.destination,
    receipt: path,
    kind: marker.kind,
    iteration: marker.iteration,
    objects: check.objects,
    problems,
  };
}
