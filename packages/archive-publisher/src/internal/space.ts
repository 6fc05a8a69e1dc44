import {
  describeShortfall,
  describeUnfinishedWrite,
  isNoSpace,
  type SpaceShortfall,
  spaceShortfall,
} from "@ckpt/errors";
import type { DestinationIdentity } from "@ckpt/object-store";
import { ArchivePublisherError } from "../errors.js";
import type { LocalArtifact, PublishPlan } from "../plan.js";

/** The closing words of every PUBLISH_NO_SPACE message. */
const NO_SPACE_REMEDY = "Nothing under the final name changed; free space and run again.";

/** Bytes a publish or upload will write below one directory, and what they are (for the message). */
export interface SpaceNeed {
  readonly path: string;
  readonly bytes: number;
  readonly what: string;
}

/**
 * The local directory a store writes into, when it has one (a `file://` store's root), else
 * undefined: a remote store's free space is not ours to see. Pure.
 */
function localRootOf(identity: DestinationIdentity): string | undefined {
  return identity.scheme === "file" ? identity.bucket : undefined;
}

/**
 * What a publish planned as `plan` will write, by directory: into a `file://` store's root the
 * payloads to upload, the declaration when it is created, and the manifest; into the artifact
 * directory the rewritten manifest (and the legacy original kept beside it) and the receipt
 * (`receiptBytes`; a skip writes none). Each atomic write needs its new bytes while the old ones
 * still exist, so nothing is subtracted. Pure.
 */
export function publishSpaceNeeds(
  local: LocalArtifact,
  plan: Exclude<PublishPlan, { action: "refuse" }>,
  store: DestinationIdentity,
  receiptBytes: number,
): SpaceNeed[] {
  const needs: SpaceNeed[] = [];
  const root = localRootOf(store);
  if (plan.action === "publish" && root !== undefined) {
    const payloads = plan.upload.reduce((sum, f) => sum + f.size, 0);
    const declaration = plan.createDeclaration ? local.declarationBytes.byteLength : 0;
    needs.push({
      path: root,
      bytes: payloads + declaration + local.manifestBytes.byteLength,
      what: `${plan.upload.length} payload file(s) and the archive records`,
    });
  }
  const rewrite = local.manifestRewrite
    ? local.manifestBytes.byteLength + (local.legacyOriginal?.byteLength ?? 0)
    : 0;
  const receipt = plan.action === "skip" ? 0 : receiptBytes;
  needs.push({ path: local.dir, bytes: rewrite + receipt, what: "the local manifest and receipt" });
  return needs;
}

/**
 * Refuses early, before anything is written, the first need whose directory's filesystem has less
 * free space than it needs. Needs of zero bytes are not asked about.
 */
export async function refuseShortfall(context: string, needs: readonly SpaceNeed[]): Promise<void> {
  for (const need of needs) {
    if (need.bytes === 0) continue;
    const shortfall: SpaceShortfall | undefined = await spaceShortfall(need.path, need.bytes);
    if (shortfall === undefined) continue;
    throw new ArchivePublisherError(
      "PUBLISH_NO_SPACE",
      `${context}: not enough space for ${need.what}: ${describeShortfall(shortfall)}. Nothing was written. ${NO_SPACE_REMEDY}`,
      { kind: "failed", subject: need.path },
    );
  }
}

/**
 * PUBLISH_NO_SPACE for a local write of `bytes` to `path` that met a full disk (ENOSPC or EDQUOT)
 * half way, or `undefined` when `error` is something else. The atomic write removed its temporary,
 * so all `bytes` are still to write.
 */
export function localNoSpace(
  path: string,
  bytes: number,
  error: unknown,
  state: string,
): ArchivePublisherError | undefined {
  if (!isNoSpace(error)) return undefined;
  return new ArchivePublisherError(
    "PUBLISH_NO_SPACE",
    `${describeUnfinishedWrite(path, bytes)}. ${state} ${NO_SPACE_REMEDY}`,
    { kind: "failed", subject: path, cause: error },
  );
}

/**
 * PUBLISH_NO_SPACE for a store write the store refused for lack of space (STORE_NO_SPACE, whose
 * message names the key, the bytes and what it left), with what that leaves of the operation.
 */
export function storeNoSpace(
  what: string,
  uri: string,
  key: string,
  error: Error,
  state: string,
): ArchivePublisherError {
  return new ArchivePublisherError(
    "PUBLISH_NO_SPACE",
    `${what} ${uri}/${key}: ${error.message} ${state} ${NO_SPACE_REMEDY}`,
    { kind: "failed", subject: key, cause: error },
  );
}
