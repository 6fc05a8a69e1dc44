import { describeRefusal, openRegularFile } from "@ckpt/errors";
import type { FileHandle } from "node:fs/promises";
import { join, resolve } from "node:path";
import { ARTIFACT_MANIFEST, fileHandleByteSource, hashFile, ManifestError } from "@ckpt/manifest";
import { openTorchFile, type TorchFile, type TorchTensorEntry } from "@ckpt/tensors";
import { HfConversionError, quote, refusal } from "../errors.js";
import type { SourceTensor } from "../plan/mapping.js";

/** The key under which a consolidated checkpoint holds its state dict: `torch.save({"net": sd})`. */
const STATE_DICT_KEY = "net";
/** The model component's file in a consolidated artifact. */
export const MODEL_FILE = "model.pt";

/** What the artifact's own records say the model file is. */
export interface ExpectedSource {
  readonly size: number;
  /** Absent when the artifact's manifest does not record a digest (the publisher adds one). */
  readonly sha256: string | undefined;
}

/** Reads an artifact directory's native manifest and finds its consolidated model file. */
export async function readArtifactModel(
  ckptDir: string,
): Promise<{ path: string; expected: ExpectedSource }> {
  const dir = resolve(ckptDir);
  const manifestPath = join(dir, ARTIFACT_MANIFEST.fileName);
  let manifest: Awaited<ReturnType<typeof ARTIFACT_MANIFEST.read>>;
  try {
    manifest = await ARTIFACT_MANIFEST.read(manifestPath);
  } catch (error) {
    if (!(error instanceof ManifestError)) throw error;
    const absent = error.code === "RECORD_NOT_FOUND";
    throw refusal(
      "MATERIALIZE_SOURCE_NOT_ARTIFACT",
      absent
        ? `${dir} has no ${ARTIFACT_MANIFEST.fileName}, so it is not a committed artifact (the manifest is written last)`
        : `${manifestPath} is not a valid artifact manifest (${error.message})`,
      "the build would have converted a model.pt nothing vouches for",
      "Point --ckpt-dir at a committed checkpoint_artifacts/iter_* directory.",
      { file: manifestPath, cause: error },
    );
  }
  const model = manifest.physical_components.find((c) => c.name === "model");
  if (manifest.format !== "consolidated" || model === undefined || model.kind !== "file") {
    throw refusal(
      "MATERIALIZE_SOURCE_NOT_ARTIFACT",
      `${manifestPath} describes a ${manifest.format} artifact ${model === undefined ? "without a model component" : `whose model is a ${model.kind === "dir" ? "directory of shards" : "file"}`}`,
      "the build converts a consolidated model.pt",
      "Materialize a consolidated artifact (a trainer's model-only save or a merge output).",
      { file: manifestPath },
    );
  }
  return { path: join(dir, model.path), expected: { size: model.size, sha256: model.sha256 } };
}

/**
 * The source model.pt, opened once. Everything the run learns about it — its size, its digest (the
 * identity of record), its tensors — comes from this one open file, so a path replaced meanwhile
 * cannot be mislabelled.
 */
export interface OpenedSource {
  /** Where it came from (a path, or the artifact URI), recorded in the marker. */
  readonly label: string;
  readonly path: string;
  /** A path naming the open file itself (`/proc/self/fd/N`), for readers on other threads. */
  readonly openPath: string;
  readonly size: number;
  readonly torch: TorchFile;
  /** Tensors of the state dict, keys without the `net.` prefix, in file order. */
  readonly tensors: readonly SourceTensor[];
  entry(name: string): TorchTensorEntry;
  /** SHA-256 of the open file (computed once, on a worker thread for large files). */
  sha256(): Promise<string>;
  /** Refuses when the open file was changed in place since it was opened (best effort: what stat reports). */
  assertUnchanged(): Promise<void>;
  close(): Promise<void>;
}

/** A path naming an open file descriptor, so a worker thread can read the same open file. */
function descriptorPath(handle: FileHandle): string {
  return process.platform === "linux" ? `/proc/self/fd/${handle.fd}` : `/dev/fd/${handle.fd}`;
}

/**
 * Opens `path` as the source: a regular file of the size its records give (checked on the open
 * file before anything is parsed), written by torch.save, holding `{"net": state_dict}`.
 */
export async function openSource(
  path: string,
  label: string,
  expected: { size: number; recordedBy: string },
): Promise<OpenedSource> {
  const opened = await openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER });
  if (!opened.ok) {
    throw new HfConversionError(
      "MATERIALIZE_SOURCE_UNREADABLE",
      `${describeRefusal(opened)}. Check that the artifact's model.pt is a readable regular file.`,
      {
        kind: opened.reason === "unreadable" ? "failed" : "input",
        file: path,
        ...(opened.reason === "missing" || opened.reason === "unreadable" ? { cause: opened.cause } : {}),
      },
    );
  }
  const { handle } = opened;
  try {
    const first = await handle.stat();
    if (first.size !== expected.size) {
      throw refusal(
        "MATERIALIZE_SOURCE_MISMATCH",
        `${path} is ${first.size} bytes, but ${expected.recordedBy} records ${expected.size}`,
        "the output would have been labelled with an identity its bytes do not have",
        "The artifact was changed after it was committed; restore it or materialize another one.",
        { file: path },
      );
    }
    const torch = await openTorchFile(fileHandleByteSource(handle, path, first.size));
    const entries = new Map<string, TorchTensorEntry>();
    const tensors: SourceTensor[] = [];
    const prefix = `${STATE_DICT_KEY}.`;
    // torch.save keeps tied weights as one storage: a later key viewing exactly the same elements.
    const views = new Map<string, string>();
    for (const entry of torch.tensors) {
      if (!entry.name.startsWith(prefix)) {
        throw refusal(
          "MATERIALIZE_KEY_EXTRA",
          `${path} holds tensor ${quote(entry.name)} outside its ${quote(STATE_DICT_KEY)} state dict`,
          "the build accounts for every tensor of a consolidated checkpoint, and would have dropped it",
          'Materialize a consolidated model file, torch.save({"net": state_dict}).',
          { file: path, key: entry.name, kind: "input" },
        );
      }
      const name = entry.name.slice(prefix.length);
      entries.set(name, entry);
      const view = JSON.stringify([
        entry.storageKey,
        entry.storageOffset,
        entry.stride,
        entry.shape,
        entry.dtype,
      ]);
      const sameAs = views.get(view);
      if (sameAs === undefined) views.set(view, name);
      tensors.push({
        name,
        dtype: entry.dtype,
        shape: entry.shape,
        ...(sameAs === undefined ? {} : { sameAs }),
      });
    }
    if (tensors.length === 0) {
      throw refusal(
        "MATERIALIZE_SOURCE_NOT_ARTIFACT",
        `${path} holds no tensors under ${quote(STATE_DICT_KEY)}`,
        "the build converts the state dict a consolidated checkpoint keeps there",
        'Materialize a consolidated model file, torch.save({"net": state_dict}).',
        { file: path, kind: "input" },
      );
    }
    let digest: Promise<string> | undefined;
    const openPath = descriptorPath(handle);
    return {
      label,
      path,
      openPath,
      size: first.size,
      torch,
      tensors,
      entry(name) {
        const entry = entries.get(name);
        if (!entry) throw new Error(`no source tensor ${name}`);
        return entry;
      },
      sha256() {
        digest ??= hashFile(openPath).then((d) => {
          if (d.size !== first.size)
            throw changed(path, `its size went from ${first.size} to ${d.size} bytes`);
          return d.sha256;
        });
        return digest;
      },
      async assertUnchanged() {
        const now = await handle.stat();
        // Not ctime: it also moves when the path is replaced (the opened inode loses its name),
        // which leaves the opened bytes intact.
        if (now.size !== first.size || now.mtimeMs !== first.mtimeMs) {
          throw changed(path, "its size or modification time changed while the build read it");
        }
      },
      close: () => torch.close(),
    };
  } catch (error) {
    await handle.close().catch(() => {});
    throw error;
  }
}

function changed(path: string, what: string): HfConversionError {
  return refusal(
    "MATERIALIZE_SOURCE_CHANGED",
    `${path} was modified in place: ${what}`,
    "the output would not match the bytes recorded as its source",
    "Re-run once nothing writes to the artifact.",
    { file: path, kind: "failed" },
  );
}
