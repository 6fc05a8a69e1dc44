import { readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  type FetchEvent,
  fetchArtifactIter,
  type FetchReport,
  readRemoteRecords,
  resolveRemoteArtifact,
} from "@ckpt/archive-reader";
import type { ObjectInfo, ObjectStore } from "@ckpt/object-store";
import { mapEvents } from "@ckpt/progress";
import { refusal } from "../errors.js";
import { MODEL_FILE } from "./open.js";

/** The archived model file as the remote records describe it: the identity used for the skip decision. */
export interface ArchivedModel {
  readonly uri: string;
  readonly iteration: number;
  readonly size: number;
  readonly sha256: string;
}

/**
 * Reads the remote manifest and declaration (bounded, nothing else is downloaded) and returns the
 * consolidated model file's descriptor. A legacy archive without a declaration is asked for the
 * model file's HEAD, whose digest metadata then stands in.
 */
export async function describeArchivedModel(
  store: ObjectStore,
  uri: string,
  signal?: AbortSignal,
): Promise<ArchivedModel> {
  const records = await readRemoteRecords(store, signal);
  const heads = new Map<string, ObjectInfo | undefined>();
  if (records.manifestBytes !== null && records.declarationBytes === null) {
    heads.set(MODEL_FILE, await store.head(MODEL_FILE, signal === undefined ? {} : { signal }));
  }
  const remote = resolveRemoteArtifact(uri, records, heads);
  const model = remote.payloads.find((p) => p.path === MODEL_FILE);
  if (remote.format !== "consolidated" || model === undefined) {
    throw refusal(
      "MATERIALIZE_SOURCE_NOT_ARTIFACT",
      `the archive ${uri} is a ${remote.format} artifact without a consolidated ${MODEL_FILE}`,
      "the build converts a consolidated model.pt",
      remote.format === "dcp"
        ? "DCP shards (a direct object-store primary's checkpoint among them) are not converted: fetch them " +
            "(ckpt artifact fetch), consolidate them into model.pt with " +
            "torch.distributed.checkpoint.format_utils.dcp_to_torch_save, and materialize that."
        : "Materialize a consolidated artifact (a trainer's model-only save or a merge output).",
      { file: uri },
    );
  }
  return { uri, iteration: remote.iteration, size: model.size, sha256: model.sha256 };
}

/** A fetched artifact. */
export interface StagedArtifact {
  readonly report: FetchReport;
  readonly modelPath: string;
}

async function listNames(dir: string): Promise<Set<string> | undefined> {
  try {
    return new Set(await readdir(dir));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Fetches the artifact into `stageRoot` through the archive reader (every file checked against its
 * declared size and digest), adding to `created` each path that did not exist before (the staging
 * root, or the artifact directory inside it), so cleanup removes only those, even after a failure.
 * A staging directory that existed before (a kept earlier fetch) is left as it is.
 */
export async function* stageArchivedArtifact(
  store: ObjectStore,
  uri: string,
  stageRoot: string,
  created: string[],
  signal?: AbortSignal,
): AsyncGenerator<FetchEvent, StagedArtifact> {
  const root = resolve(stageRoot);
  const before = await listNames(root);
  const fetching = fetchArtifactIter(store, root, { uri, ...(signal ? { signal } : {}) });
  const report = yield* mapEvents(fetching, (event) => {
    if (event.type === "plan") {
      if (before === undefined) created.push(root);
      else if (!before.has(event.stagedDir.slice(root.length + 1))) created.push(event.stagedDir);
    }
    return event;
  });
  return { report, modelPath: join(report.stagedDir, MODEL_FILE) };
}

/** Removes the paths a run created (deepest first is not needed: they never nest). */
export async function removeCreated(paths: readonly string[]): Promise<void> {
  for (const path of paths) await rm(path, { recursive: true, force: true });
}
