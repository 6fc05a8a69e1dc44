import { messageOf } from "@ckpt/errors";
import { readdir } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  CHECKPOINT_DESCRIPTION,
  CONTROL_MANIFEST,
  MATERIALIZED_MARKER,
  MERGE_COMPLETE,
  MULTI_ROLE_SUCCESS,
  STAGED_RECORD,
  UPLOADED_MARKER,
  VALIDATION_STATE_FILE,
  type ArtifactManifest,
  artifactPayloadFiles,
  canonicalTensorList,
  type Destination,
  hashFile,
  hashFiles,
  type InventoryTensor,
  ManifestError,
  PHYSICAL_COMPONENTS,
  type PhysicalComponentName,
  parseIterDir,
  physicalComponentPath,
  pathInfo,
  TENSOR_INVENTORY,
  type TensorListSummary,
  tensorListDigest,
} from "@ckpt/manifest";
import { listTensors, type TensorFileFormat, verifyDcpDirectory, verifyTensorFile } from "@ckpt/tensors";
import { type Expectation, judgeExpectations, type LocalProblem, type Observation } from "./judge.js";

/** What a local directory was judged as. */
export type LocalVerifyKind = "artifact" | "stage" | "checkpoint" | "hf";

export type LocalVerifyEvent = {
  /** `hash`: SHA-256 of files records describe; `scan`: tensor files read by --finite / --deep. */
  readonly type: "hash" | "scan";
  readonly path: string;
  readonly doneBytes: number;
  readonly totalBytes: number;
};

export interface LocalVerifyOptions {
  /** Scan every floating tensor of `.pt` components for NaN/±Inf. */
  readonly finite?: boolean;
  /** Read every byte of `.pt` components and check each zip member's CRC-32. */
  readonly crc?: boolean;
  /**
   * Hash the files whose records carry a SHA-256 and compare (default true). False checks presence
   * and sizes only: what a trainer's resume checks when its checkpoint is not pinned.
   */
  readonly digests?: boolean;
  /**
   * Open every `.pt` component and check its structure (default true). False leaves them to the
   * records' sizes (and digests); DCP directories are still checked for completeness.
   */
  readonly tensorFiles?: boolean;
  readonly signal?: AbortSignal;
  readonly onProgress?: (event: LocalVerifyEvent) => void;
}

export interface LocalVerifyReport {
  readonly kind: LocalVerifyKind;
  readonly path: string;
  /** The iteration the records (or the directory name) give. */
  readonly iteration: number | undefined;
  readonly ok: boolean;
  readonly problems: readonly LocalProblem[];
  /** Files absent locally that the archive receipt records: released after archiving. */
  readonly released: readonly string[];
  /** Files whose records carry no digest: only their size was checked. */
  readonly sizeOnly: readonly string[];
  /**
   * A full checkpoint's retention state: whether it holds optimizer state, and the recorded
   * optimizer files that retention (`keep_optim_last`) released as a whole. Absent for other kinds.
   */
  readonly retention?: { readonly hasOptimizer: boolean; readonly optimizerReleased: readonly string[] };
  /** What was not checked and why, and facts worth knowing (never problems). */
  readonly notes: readonly string[];
  /** Files whose bytes were hashed, and how many bytes. */
  readonly hashedFiles: number;
  readonly hashedBytes: number;
  /** The archive the receipt binds, when there is a receipt (`ckpt artifact verify` checks it remotely). */
  readonly archive: Destination | undefined;
  /** Roles of a multi-role boundary (`_SUCCESS`), each judged as a checkpoint of its own. */
  readonly roles?: readonly string[];
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

async function kindAt(path: string): Promise<Observation> {
  const { kind, size } = await pathInfo(path);
  return kind === "file" ? { kind, size } : { kind };
}

/** Every non-directory entry below `dir`, relative POSIX paths (symlinks and special files included, as such). */
async function listEntries(dir: string, rel = ""): Promise<string[]> {
  const out: string[] = [];
  for (const dirent of await readdir(join(dir, rel), { withFileTypes: true })) {
    const path = rel === "" ? dirent.name : `${rel}/${dirent.name}`;
    if (dirent.isDirectory()) out.push(...(await listEntries(dir, path)));
    else out.push(path);
  }
  return out;
}

/**
 * One verification in progress: records read, what they expect, what else must be checked.
 * `prefix` places a sub-checkpoint (a role directory) inside the reported paths.
 */
class Inspection {
  readonly expectations: Expectation[] = [];
  readonly problems: LocalProblem[] = [];
  readonly notes: string[] = [];
  /** A (role's) local layout holds no optimizer state. */
  withoutOptimizer = false;
  /** Recorded optimizer files retention released as a whole (see releaseOptimizerExpectations). */
  readonly optimizerReleased: string[] = [];
  /** Tensor files to open (structure; plus scans when asked), relative to the root. */
  readonly tensorFiles: Array<{ readonly rel: string; readonly format: TensorFileFormat }> = [];
  /** DCP directories to check, relative to the root. */
  readonly dcpDirs: string[] = [];
  /** Components whose tensor list a description records, relative to the root. */
  readonly tensorLists: Array<{
    /** The (role) directory of the description, relative to the root: "" or `<role>/`. */
    readonly prefix: string;
    readonly component: PhysicalComponentName;
    readonly kind: "file" | "dir";
    readonly summary: TensorListSummary;
    readonly record: string;
  }> = [];
  receipt: Map<string, { size: number; sha256?: string }> | undefined;
  archive: Destination | undefined;

  constructor(
    readonly root: string,
    readonly options: LocalVerifyOptions,
  ) {}

  /**
   * Reads a record when it is there: `undefined` when absent, `null` (and a VERIFY_RECORD_INVALID
   * problem naming its code) when it cannot be read or validated.
   */
  async record<T>(rel: string, read: (path: string) => Promise<T>): Promise<T | undefined | null> {
    const path = join(this.root, rel);
    if ((await kindAt(path)).kind === "absent") return undefined;
    try {
      return await read(path);
    } catch (error) {
      if (!(error instanceof ManifestError)) throw error;
      this.problems.push({
        code: "VERIFY_RECORD_INVALID",
        path: rel,
        record: rel,
        cause: error.code,
        message: `${rel} cannot be used: ${messageOf(error)}`,
      });
      return null;
    }
  }

  iterationCheck(rel: string, recorded: number, dirIteration: number | undefined): void {
    if (dirIteration !== undefined && recorded !== dirIteration) {
      this.problems.push({
        code: "VERIFY_ITERATION_MISMATCH",
        path: rel,
        record: rel,
        message: `${rel} records iteration ${recorded}, but the directory is ${basename(this.root)}`,
      });
    }
  }

  /** Reads `.uploaded` (prefix: inside a role directory); its inventory decides what counts as released. */
  async readReceipt(prefix: string, kind: "artifact" | "full_checkpoint"): Promise<void> {
    const rel = `${prefix}${UPLOADED_MARKER.fileName}`;
    const read = await this.record(rel, UPLOADED_MARKER.read);
    if (read === undefined || read === null) return;
    if (read.legacy) {
      this.notes.push(`${rel} is a legacy one-line receipt: it proves no destination or digest`);
      return;
    }
    const marker = read.marker;
    if (marker.kind !== kind) {
      this.problems.push({
        code: "VERIFY_RECORD_INVALID",
        path: rel,
        record: rel,
        message: `${rel} is a ${marker.kind} receipt, but this is ${kind === "artifact" ? "an artifact" : "a full checkpoint"}`,
      });
      return;
    }
    this.archive = marker.destination;
    this.receipt ??= new Map();
    for (const f of marker.files) {
      this.receipt.set(`${prefix}${f.path}`, f);
      // The validation record moves on (publication_pending -> published) after the upload
      // recorded it: the receipt's size for it is stale by design, as resume knows too.
      if (f.path === VALIDATION_STATE_FILE) continue;
      this.expectations.push({
        path: `${prefix}${f.path}`,
        size: f.size,
        ...(f.sha256 ? { sha256: f.sha256 } : {}),
        record: rel,
      });
    }
  }
}

/** Artifact judgement: the native manifest, merge record and receipt against the files. */
async function inspectArtifact(
  ins: Inspection,
  dirIteration: number | undefined,
): Promise<number | undefined> {
  const manifest = await ins.record(ARTIFACT_MANIFEST.fileName, ARTIFACT_MANIFEST.read);
  if (manifest === undefined) {
    ins.problems.push({
      code: "VERIFY_ARTIFACT_UNCOMMITTED",
      path: ARTIFACT_MANIFEST.fileName,
      message: `there is no ${ARTIFACT_MANIFEST.fileName}: the artifact was never committed (its writer stopped, or is still writing)`,
    });
  }
  await ins.readReceipt("", "artifact");
  const merge = await ins.record(MERGE_COMPLETE.fileName, MERGE_COMPLETE.read);
  if (merge) {
    for (const f of merge.files) ins.expectations.push({ ...f, record: MERGE_COMPLETE.fileName });
  }
  if (!manifest) return undefined;
  ins.iterationCheck(ARTIFACT_MANIFEST.fileName, manifest.iteration, dirIteration);
  for (const f of artifactPayloadFiles(manifest)) {
    ins.expectations.push({
      path: f.path,
      size: f.size,
      ...(f.sha256 ? { sha256: f.sha256 } : {}),
      record: ARTIFACT_MANIFEST.fileName,
    });
  }
  await inspectArtifactComponents(ins, manifest);
  return manifest.iteration;
}

async function inspectArtifactComponents(ins: Inspection, manifest: ArtifactManifest): Promise<void> {
  for (const c of manifest.physical_components) {
    const at = await kindAt(join(ins.root, c.path));
    if (c.kind === "file") {
      if (at.kind === "file" && c.path.endsWith(".pt"))
        ins.tensorFiles.push({ rel: c.path, format: "torch" });
      continue;
    }
    if (at.kind !== "dir") continue; // absent (released or missing) or not a directory: judged by the expectations
    const listed = new Set(c.files.map((f) => f.path));
    for (const entry of await listEntries(join(ins.root, c.path))) {
      if (!listed.has(entry)) {
        ins.problems.push({
          code: "VERIFY_FILE_UNLISTED",
          path: `${c.path}/${entry}`,
          record: ARTIFACT_MANIFEST.fileName,
          message: `${c.path}/${entry} is in the component directory but ${ARTIFACT_MANIFEST.fileName} does not list it`,
        });
      }
    }
    if (listed.has(".metadata")) ins.dcpDirs.push(c.path);
  }
}

/**
 * A full checkpoint's components in the local layout: `<name>.pt` or `<name>/` for each physical
 * name, and every file the checkpoint manager's description (when there is one) records.
 */
async function inspectLocalLayout(ins: Inspection, prefix: string): Promise<void> {
  const descriptionRel = `${prefix}${CHECKPOINT_DESCRIPTION.fileName}`;
  const description = await ins.record(descriptionRel, CHECKPOINT_DESCRIPTION.read);
  for (const f of description ? artifactPayloadFiles(description) : []) {
    ins.expectations.push({
      path: `${prefix}${f.path}`,
      size: f.size,
      ...(f.sha256 ? { sha256: f.sha256 } : {}),
      record: descriptionRel,
    });
  }
  for (const c of description ? description.physical_components : []) {
    if (c.tensors !== undefined)
      ins.tensorLists.push({
        prefix,
        component: c.name,
        kind: c.kind,
        summary: c.tensors,
        record: descriptionRel,
      });
  }
  const present = new Map<string, "file" | "dir">();
  for (const name of PHYSICAL_COMPONENTS) {
    const file = await kindAt(join(ins.root, `${prefix}${name}.pt`));
    const dir = await kindAt(join(ins.root, `${prefix}${name}`));
    if (file.kind === "file" && dir.kind === "dir") {
      ins.problems.push({
        code: "VERIFY_COMPONENT_AMBIGUOUS",
        path: `${prefix}${name}`,
        message: `${prefix}${name}.pt and ${prefix}${name}/ are both present; a loader cannot tell which one holds the ${name} state`,
      });
      continue;
    }
    if (file.kind === "file") {
      present.set(name, "file");
      ins.tensorFiles.push({ rel: `${prefix}${name}.pt`, format: "torch" });
    } else if (dir.kind === "dir") {
      present.set(name, "dir");
      await inspectComponentDir(ins, `${prefix}${name}`);
    }
  }
  for (const required of ["model", "trainer"] as const) {
    if (!present.has(required)) {
      const released =
        ins.receipt !== undefined &&
        [...ins.receipt.keys()].some(
          (p) => p === `${prefix}${required}.pt` || p.startsWith(`${prefix}${required}/`),
        );
      if (released) continue;
      ins.problems.push({
        code: "VERIFY_COMPONENT_MISSING",
        path: `${prefix}${required}${required === "model" ? "" : ".pt"}`,
        message:
          required === "model"
            ? `${prefix || "the checkpoint "}has no model.pt or model/: there are no weights to load`
            : `${prefix || "the checkpoint "}has no trainer.pt: the clocks and RNG state an exact resume needs are missing`,
      });
    }
  }
  if (!present.has("optim")) {
    ins.withoutOptimizer = true;
    await releaseOptimizerExpectations(ins, prefix, descriptionRel);
    ins.notes.push(
      `${prefix || "the checkpoint "}holds no optimizer state (retention keeps it only in the newest keep_optim_last checkpoints): usable for evaluation or initialisation, not for an exact resume`,
    );
  }
}

/**
 * The optimizer files a description records, when none of them is here, no archive receipt
 * records them and a newer checkpoint beside this one still holds optimizer state: optimizer
 * retention (`keep_optim_last`, which always keeps the newest) released them as a whole, by
 * design, so they are retention state (`optimizerReleased`), not missing files. An optimizer
 * partly absent, or absent from the newest checkpoint, keeps its expectations (VERIFY_FILE_MISSING).
 */
async function releaseOptimizerExpectations(
  ins: Inspection,
  prefix: string,
  descriptionRel: string,
): Promise<void> {
  const isOptimizer = (path: string) => path === `${prefix}optim.pt` || path.startsWith(`${prefix}optim/`);
  const recorded = ins.expectations.filter((e) => e.record === descriptionRel && isOptimizer(e.path));
  if (recorded.length === 0 || recorded.some((e) => ins.receipt?.has(e.path))) return;
  if (!(await newerCheckpointHoldsOptimizer(ins.root, prefix))) return;
  for (const e of recorded) ins.expectations.splice(ins.expectations.indexOf(e), 1);
  ins.optimizerReleased.push(...recorded.map((e) => e.path));
}

/** Whether an `iter_*` sibling newer than `dir` holds optimizer state (in the same role), newest first. */
async function newerCheckpointHoldsOptimizer(dir: string, prefix: string): Promise<boolean> {
  const iteration = dirIterationOf(dir);
  if (iteration === undefined) return false;
  const parent = dirname(dir.replace(/\/+$/, ""));
  const newer = (await readdir(parent).catch(() => [] as string[]))
    .map((name) => ({ name, iteration: parseIterDir(name) }))
    .filter(
      (e): e is { name: string; iteration: number } => e.iteration !== undefined && e.iteration > iteration,
    )
    .sort((a, b) => b.iteration - a.iteration);
  for (const { name } of newer) {
    const at = join(parent, name, `${prefix}optim`);
    if ((await kindAt(`${at}.pt`)).kind === "file" || (await kindAt(at)).kind === "dir") return true;
  }
  return false;
}

/** A component directory: DCP when it has `.metadata`, else the per-rank `.pt` files a sharded consolidated writer leaves. */
async function inspectComponentDir(ins: Inspection, rel: string): Promise<void> {
  if ((await kindAt(join(ins.root, rel, ".metadata"))).kind !== "absent") {
    ins.dcpDirs.push(rel);
    return;
  }
  const entries = await listEntries(join(ins.root, rel));
  const shards = entries.filter((e) => e.endsWith(".pt"));
  if (shards.length === 0) {
    ins.problems.push({
      code: "VERIFY_COMPONENT_MISSING",
      path: `${rel}/.metadata`,
      message: `${rel}/ has no DCP .metadata and no .pt shards: the component cannot be loaded`,
    });
  }
  for (const shard of shards) ins.tensorFiles.push({ rel: `${rel}/${shard}`, format: "torch" });
}

/** A full checkpoint written directly to an object store and copied here: control manifest, DCP components, control files. */
async function inspectControlManifest(
  ins: Inspection,
  dirIteration: number | undefined,
): Promise<number | undefined> {
  const control = await ins.record(CONTROL_MANIFEST.fileName, CONTROL_MANIFEST.read);
  if (!control) return undefined;
  ins.iterationCheck(CONTROL_MANIFEST.fileName, control.iteration, dirIteration);
  for (const component of control.components) {
    if ((await kindAt(join(ins.root, component))).kind === "dir") ins.dcpDirs.push(component);
    else {
      ins.problems.push({
        code: "VERIFY_COMPONENT_MISSING",
        path: component,
        record: CONTROL_MANIFEST.fileName,
        message: `${CONTROL_MANIFEST.fileName} names the DCP component ${component}/, which is not a directory here`,
      });
    }
  }
  for (const entry of [control.control.trainer, control.control.data]) {
    if (entry !== null) ins.expectations.push({ ...entry, record: CONTROL_MANIFEST.fileName });
  }
  if (
    control.validation_publication !== null &&
    (await kindAt(join(ins.root, control.validation_publication))).kind !== "file"
  ) {
    ins.problems.push({
      code: "VERIFY_FILE_MISSING",
      path: control.validation_publication,
      record: CONTROL_MANIFEST.fileName,
      message: `${CONTROL_MANIFEST.fileName} references ${control.validation_publication}, which is missing`,
    });
  }
  return control.iteration;
}

/** Observes every expected path, then hashes the regular files whose size matches a record with a digest. */
async function observe(
  ins: Inspection,
): Promise<{ observed: Map<string, Observation>; hashedFiles: number; hashedBytes: number }> {
  const observed = new Map<string, Observation>();
  for (const e of ins.expectations) {
    if (!observed.has(e.path)) observed.set(e.path, await kindAt(join(ins.root, e.path)));
  }
  const toHash = [
    ...new Set(
      ins.expectations
        .filter(
          (e) =>
            ins.options.digests !== false &&
            e.sha256 !== undefined &&
            observed.get(e.path)?.kind === "file" &&
            observed.get(e.path)?.size === e.size,
        )
        .map((e) => e.path),
    ),
  ];
  const absolute = toHash.map((p) => join(ins.root, p));
  const onProgress = ins.options.onProgress;
  const hashOptions = {
    ...(ins.options.signal ? { signal: ins.options.signal } : {}),
    ...(onProgress
      ? {
          onProgress: (e: { path: string; doneBytes: number; totalBytes: number }) =>
            onProgress({ type: "hash", path: e.path, doneBytes: e.doneBytes, totalBytes: e.totalBytes }),
        }
      : {}),
  };
  let digests: Map<string, { size: number; sha256: string }>;
  try {
    digests = await hashFiles(absolute, hashOptions);
  } catch (error) {
    if (ins.options.signal?.aborted) throw error;
    // Attribute the failure: hash one by one, reporting the files that cannot be read.
    digests = new Map();
    for (const [i, path] of absolute.entries()) {
      try {
        digests.set(path, await hashFile(path, hashOptions));
      } catch (cause) {
        ins.problems.push({
          code: "FILE_UNREADABLE",
          path: toHash[i]!,
          message: `${toHash[i]}: ${messageOf(cause)}`,
          ...(codeOf(cause) ? { cause: codeOf(cause)! } : {}),
        });
      }
    }
  }
  let hashedBytes = 0;
  for (const [i, rel] of toHash.entries()) {
    const digest = digests.get(absolute[i]!);
    if (digest === undefined) continue;
    observed.set(rel, { kind: "file", size: digest.size, sha256: digest.sha256 });
    hashedBytes += digest.size;
  }
  return { observed, hashedFiles: digests.size, hashedBytes };
}

/** The first tensor where two canonical lists differ, described for a message. Pure. */
function firstDifference(recorded: readonly InventoryTensor[], found: readonly InventoryTensor[]): string {
  const key = (t: InventoryTensor) => `${t.name} ${t.dtype} [${t.shape.join(", ")}]`;
  for (let i = 0; i < Math.max(recorded.length, found.length); i++) {
    const was = recorded[i];
    const is = found[i];
    if (was === undefined) return `it also holds ${key(is!)}`;
    if (is === undefined || is.name !== was.name) return `it lacks ${key(was)}`;
    if (key(is) !== key(was)) return `the description records ${key(was)}, the file holds ${key(is)}`;
  }
  return "the lists differ";
}

/**
 * Recomputes the tensor list of each component whose description records one (headers only: the
 * pickle, `.metadata`) and compares its digest: the identity check that needs no bulk read. A
 * component with a problem already (missing, wrong size, unreadable; not a changed digest) is
 * left to it; one that cannot be listed is unreadable. The sidecar, when readable, names the first tensor that differs.
 */
async function checkTensorLists(ins: Inspection, judged: ReadonlySet<string>): Promise<void> {
  for (const { prefix, component, kind, summary, record } of ins.tensorLists) {
    const rel = `${prefix}${physicalComponentPath(component, kind)}`;
    const subject = kind === "dir" ? `${rel}/.metadata` : rel;
    if (judged.has(subject) || judged.has(rel) || (await kindAt(join(ins.root, subject))).kind !== "file")
      continue;
    let found: InventoryTensor[];
    try {
      found = await listTensors(join(ins.root, rel));
    } catch (error) {
      ins.problems.push({
        code: "FILE_UNREADABLE",
        path: subject,
        message: `${subject}: its tensors cannot be listed: ${messageOf(error)}`,
        ...(codeOf(error) ? { cause: codeOf(error)! } : {}),
      });
      continue;
    }
    const digest = tensorListDigest(found);
    if (digest.sha256 === summary.sha256) continue;
    const sidecar = await TENSOR_INVENTORY.read(join(ins.root, prefix, TENSOR_INVENTORY.fileName)).catch(
      () => undefined,
    );
    const listed = sidecar?.components[component];
    const detail =
      listed !== undefined && tensorListDigest(listed).sha256 === summary.sha256
        ? firstDifference(listed, canonicalTensorList(found))
        : `${digest.count} tensors listed now, ${summary.count} recorded`;
    ins.problems.push({
      code: "VERIFY_TENSORS_MISMATCH",
      path: subject,
      record,
      message: `${subject} does not hold the tensors ${record} records for ${component}: ${detail}`,
    });
  }
}

/** Opens every `.pt` component (scans as asked) and checks every DCP directory. */
async function checkTensors(ins: Inspection): Promise<void> {
  const { finite, crc, onProgress, signal } = ins.options;
  for (const { rel, format } of ins.options.tensorFiles === false ? [] : ins.tensorFiles) {
    let report: Awaited<ReturnType<typeof verifyTensorFile>>;
    try {
      report = await verifyTensorFile(join(ins.root, rel), {
        format,
        label: rel,
        ...(finite ? { finite } : {}),
        ...(crc ? { crc } : {}),
        ...(signal ? { signal } : {}),
        ...(onProgress ? { onProgress: (e) => onProgress({ type: "scan", ...e }) } : {}),
      });
    } catch (error) {
      // Listed a moment ago, it cannot be opened now (removed, permissions): the file is unreadable.
      if (signal?.aborted || codeOf(error) === undefined) throw error;
      ins.problems.push({
        code: "FILE_UNREADABLE",
        path: rel,
        cause: codeOf(error)!,
        message: `${rel}: ${messageOf(error)}`,
      });
      continue;
    }
    ins.problems.push(...report.problems);
    ins.notes.push(...report.notes);
  }
  for (const rel of ins.dcpDirs) {
    const report = await verifyDcpDirectory(join(ins.root, rel), rel);
    ins.problems.push(...report.problems);
  }
  if (finite && ins.dcpDirs.length > 0) {
    ins.notes.push(
      `DCP shards (${ins.dcpDirs.join(", ")}) are checked for presence and length; their tensors are not scanned for NaN/Inf`,
    );
  }
}

async function finish(
  ins: Inspection,
  kind: LocalVerifyKind,
  iteration: number | undefined,
  extra: { roles?: readonly string[] } = {},
): Promise<LocalVerifyReport> {
  const { observed, hashedFiles, hashedBytes } = await observe(ins);
  const judged = judgeExpectations(ins.expectations, observed, ins.receipt, UPLOADED_MARKER.fileName);
  await checkTensors(ins);
  // After the structure checks, so a file they found unreadable or a missing one is not reported twice.
  // A changed digest is not: the tensor list then says what changed.
  const judgedPaths = [...ins.problems, ...judged.problems].filter(
    (p) => p.code !== "VERIFY_DIGEST_MISMATCH",
  );
  await checkTensorLists(ins, new Set(judgedPaths.map((p) => p.path)));
  const problems = [...ins.problems, ...judged.problems];
  return {
    kind,
    path: ins.root,
    iteration,
    ok: problems.length === 0,
    problems,
    released: judged.released,
    sizeOnly: judged.sizeOnly,
    ...(kind === "checkpoint"
      ? { retention: { hasOptimizer: !ins.withoutOptimizer, optimizerReleased: ins.optimizerReleased } }
      : {}),
    notes: ins.notes,
    hashedFiles,
    hashedBytes,
    archive: ins.archive,
    ...extra,
  };
}

function dirIterationOf(dir: string): number | undefined {
  return parseIterDir(basename(dir.replace(/\/+$/, "")));
}

/**
 * Verifies an artifact directory (`checkpoint_artifacts/iter_*`) on local disk: the native
 * manifest must be there and read; every payload it describes must be present with its size and
 * SHA-256 (or, when absent, recorded by the archive receipt: released after archiving); a
 * component directory may hold no unlisted file; `.merge-complete.json` and `.uploaded` must agree
 * with the files; `.pt` payloads must open; DCP directories must be complete. What is wrong is
 * reported with a code from LOCAL_PROBLEM_CODES / TENSOR_PROBLEM_CODES; only I/O on the directory
 * itself throws.
 */
export async function verifyArtifactDir(
  dir: string,
  options: LocalVerifyOptions = {},
): Promise<LocalVerifyReport> {
  const ins = new Inspection(dir, options);
  const dirIteration = dirIterationOf(dir);
  const iteration = await inspectArtifact(ins, dirIteration);
  return finish(ins, "artifact", iteration ?? dirIteration);
}

/**
 * Verifies a fetched stage (`<dst>/iter_*` with `.staged.json`): the fetch must have completed,
 * every file it staged must match its recorded size and SHA-256, the staged manifest must be the
 * source it records, and the staged directory must pass the artifact verification.
 */
export async function verifyStagedDir(
  dir: string,
  options: LocalVerifyOptions = {},
): Promise<LocalVerifyReport> {
  const ins = new Inspection(dir, options);
  const dirIteration = dirIterationOf(dir);
  const staged = await ins.record(STAGED_RECORD.fileName, STAGED_RECORD.read);
  if (staged === undefined) {
    ins.problems.push({
      code: "VERIFY_RECORD_INVALID",
      path: STAGED_RECORD.fileName,
      record: STAGED_RECORD.fileName,
      cause: "RECORD_NOT_FOUND",
      message: `there is no ${STAGED_RECORD.fileName}: this directory was not staged by ckpt artifact fetch`,
    });
  }
  if (staged) {
    ins.iterationCheck(STAGED_RECORD.fileName, staged.iteration, dirIteration);
    if (!staged.complete) {
      ins.problems.push({
        code: "VERIFY_STAGE_INCOMPLETE",
        path: STAGED_RECORD.fileName,
        record: STAGED_RECORD.fileName,
        message: `${STAGED_RECORD.fileName} says the fetch did not complete; run the same ckpt artifact fetch again to finish it`,
      });
    }
    for (const f of staged.files) ins.expectations.push({ ...f, record: STAGED_RECORD.fileName });
    // The staged manifest (checked against this entry like every staged file) is the fetched identity.
    const entry = staged.files.find((f) => f.path === ARTIFACT_MANIFEST.fileName);
    if (entry?.sha256 !== staged.source.manifest_sha256) {
      ins.problems.push({
        code: "VERIFY_STAGE_SOURCE_MISMATCH",
        path: ARTIFACT_MANIFEST.fileName,
        record: STAGED_RECORD.fileName,
        message: `${STAGED_RECORD.fileName} names source manifest ${staged.source.manifest_sha256} but stages ${entry === undefined ? "no manifest" : `a manifest with sha256 ${entry.sha256}`}`,
      });
    }
  }
  const iteration = await inspectArtifact(ins, dirIteration);
  return finish(ins, "stage", staged?.iteration ?? iteration ?? dirIteration);
}

/**
 * Verifies a full checkpoint's `iter_*` directory: a multi-role boundary (`_SUCCESS` and one
 * sub-checkpoint per role), a copied direct object-store checkpoint (`.posttrain-manifest.json`,
 * DCP components, control files by size and SHA-256), or the local layout (`model.pt`|`model/`,
 * `trainer.pt` required; `optim`, `old`, `ref`, `data` when present; `.pt` files must open and DCP
 * directories be complete; every file the manager's description `.posttrain-checkpoint.json`
 * records must be there with its size and, unless `digests: false`, its SHA-256). An archive
 * receipt, when present, must agree with the files that are still here.
 */
export async function verifyCheckpointDir(
  dir: string,
  options: LocalVerifyOptions = {},
): Promise<LocalVerifyReport> {
  const ins = new Inspection(dir, options);
  const dirIteration = dirIterationOf(dir);
  const success = await ins.record(MULTI_ROLE_SUCCESS.fileName, MULTI_ROLE_SUCCESS.read);
  if (success) {
    ins.iterationCheck(MULTI_ROLE_SUCCESS.fileName, success.iteration, dirIteration);
    const roles = Object.keys(success.roles).sort();
    for (const role of roles) {
      if ((await kindAt(join(dir, role))).kind !== "dir") {
        ins.problems.push({
          code: "VERIFY_COMPONENT_MISSING",
          path: role,
          record: MULTI_ROLE_SUCCESS.fileName,
          message: `${MULTI_ROLE_SUCCESS.fileName} commits the role ${role}, but ${role}/ is not a directory here`,
        });
        continue;
      }
      await ins.readReceipt(`${role}/`, "full_checkpoint");
      await inspectLocalLayout(ins, `${role}/`);
    }
    await ins.readReceipt("", "full_checkpoint");
    return finish(ins, "checkpoint", success.iteration, { roles });
  }
  if (success === null) return finish(ins, "checkpoint", dirIteration);
  await ins.readReceipt("", "full_checkpoint");
  if ((await kindAt(join(dir, CONTROL_MANIFEST.fileName))).kind !== "absent") {
    const iteration = await inspectControlManifest(ins, dirIteration);
    return finish(ins, "checkpoint", iteration ?? dirIteration);
  }
  await inspectLocalLayout(ins, "");
  return finish(ins, "checkpoint", dirIteration);
}

/**
 * Verifies a Hugging Face directory against its `.materialized` marker: every shard (and the
 * index) it records must be present with its size and SHA-256; with `finite`, every
 * `.safetensors` shard is scanned for NaN/±Inf. The index and header structure is not judged here
 * (@ckpt/hf-conversion's `checkHfDirectory` does that); without a marker only the scan runs.
 */
export async function verifyMaterializedDir(
  dir: string,
  options: LocalVerifyOptions = {},
): Promise<LocalVerifyReport> {
  const ins = new Inspection(dir, options);
  const marker = await ins.record(MATERIALIZED_MARKER.fileName, MATERIALIZED_MARKER.read);
  if (marker === undefined) {
    ins.notes.push(
      `there is no ${MATERIALIZED_MARKER.fileName} marker: no recorded digests to check the shards against`,
    );
  }
  for (const shard of marker?.shards ?? [])
    ins.expectations.push({ ...shard, record: MATERIALIZED_MARKER.fileName });
  if (options.finite) {
    const shards = marker ? marker.shards.map((s) => s.path) : await listEntries(dir);
    for (const rel of shards.filter((p) => p.endsWith(".safetensors"))) {
      if ((await kindAt(join(dir, rel))).kind === "file")
        ins.tensorFiles.push({ rel, format: "safetensors" });
    }
  }
  return finish(ins, "hf", undefined);
}
