import { basename, relative } from "node:path";
import { canonicalJson, type FileDigest, type HashProgressEvent, hashFiles, sha256Hex } from "@ckpt/manifest";
import { MergeError } from "../errors.js";
import { type FileStamp, stampOf, type TensorInput } from "./inputs.js";

export interface InputDigests {
  /** Per expert, in request order. */
  readonly experts: readonly FileDigest[];
  /** Fingerprint of the base's weights (index and shards), or null without a base. */
  readonly baseFingerprint: string | null;
}

/**
 * A base directory's fingerprint: SHA-256 of the canonical JSON list of its weight files (the
 * index and every safetensors shard) with their sizes and digests. Sidecars (config, tokenizer)
 * do not enter a merge and are not part of it.
 */
function fingerprintOf(dir: string, files: readonly { path: string; digest: FileDigest }[]): string {
  const entries = files
    .map((f) => ({ path: relative(dir, f.path), size: f.digest.size, sha256: f.digest.sha256 }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return sha256Hex(canonicalJson({ files: entries }));
}

/** Hashes every input file (worker threads, in parallel with whatever else runs). */
export async function digestInputs(
  experts: readonly TensorInput[],
  base: TensorInput | undefined,
  options: { concurrency?: number; signal?: AbortSignal; onProgress?: (event: HashProgressEvent) => void },
): Promise<InputDigests> {
  const paths = [...experts.flatMap((e) => e.files), ...(base?.files ?? [])];
  const digests = await hashFiles(paths, options);
  return {
    experts: experts.map((e) => digests.get(e.files[0]!)!),
    baseFingerprint:
      base === undefined
        ? null
        : fingerprintOf(
            base.file,
            base.files.map((path) => ({ path, digest: digests.get(path)! })),
          ),
  };
}

const sameStamp = (a: FileStamp, b: FileStamp) =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;

/**
 * Refuses to record an identity for inputs that were replaced or modified while the merge read
 * them: the digests would not describe the bytes that were merged.
 */
export async function assertInputsUnchanged(inputs: readonly TensorInput[]): Promise<void> {
  for (const input of inputs) {
    for (const before of input.opened) {
      const now = await stampOf(before.path).catch(() => undefined);
      if (now === undefined || !sameStamp(before, now)) {
        throw new MergeError(
          "MERGE_INPUT_CHANGED",
          `merge: ${before.path} was ${now === undefined ? "removed" : "modified or replaced"} while the merge read it (${basename(before.path)}); the result was not committed. Run the merge again once the inputs are final.`,
          { kind: "failed", file: before.path },
        );
      }
    }
  }
}
