import { mkdir, readdir, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
  type ArtifactManifest,
  type FileDigest,
  type HeldLock,
  hashFile,
  type MergeComplete,
  type MergeRequest,
  openFileByteSource,
  pathKind,
  writeFileAtomic,
} from "@ckpt/manifest";
import { drain, type LongOperation, withEvents } from "@ckpt/progress";
import { openTorchFile, type TorchTensorDesc, writeTorchFile } from "@ckpt/tensors";
import {
  checkIntact,
  classifyOutput,
  compareRequests,
  decideMerge,
  mergeOwnedNames,
  type OutputState,
  type RequestedIdentity,
} from "./decide.js";
import { buildDiagnostics, serializeDiagnostics } from "./diagnostics.js";
import { isAbort } from "@ckpt/errors";
import { MergeError } from "./errors.js";
import { assertInputsUnchanged, digestInputs, type InputDigests } from "./internal/identity.js";
import { EXPERT_STATE_KEY, openBase, openExpert, type TensorInput } from "./internal/inputs.js";
import { emptyStats, MergeKernel } from "./internal/kernel.js";
import {
  assertLockHeld,
  digestRecordedFiles,
  lockOutput,
  readOutputFacts,
  recoverInterruptedSwap,
  sideNameOccupied,
  sidePaths,
  swapIntoPlace,
} from "./internal/output.js";
import { ChunkPipeline, DEFAULT_CHUNK_ELEMENTS } from "./internal/pipeline.js";
import { assertRoom, writeStep } from "./internal/space.js";
import { type MergePlan, planMerge } from "./plan.js";
import {
  MERGE_MODEL_FILE,
  MERGE_TOOL_VERSION,
  type MergeOptions,
  type ResolvedMergeRequest,
  resolveMergeRequest,
} from "./request.js";

export interface MergeRunOptions {
  readonly signal?: AbortSignal;
  /** Directory relative paths resolve against (default: the process's). */
  readonly cwd?: string;
  /** Elements per streamed chunk (default 2^20); tests use small values to cross chunk edges. */
  readonly chunkElements?: number;
  /** Worker threads hashing the inputs while the merge runs (default 1: the merge needs the other core). */
  readonly hashConcurrency?: number;
  /** How long to wait for another merge into the same artifact to finish (default 120 s). */
  readonly lockWaitMs?: number;
}

const DEFAULT_MERGE_LOCK_WAIT_MS = 120_000;

export type MergeEvent =
  | { readonly type: "recovered"; readonly actions: readonly string[] }
  | {
      readonly type: "planned";
      readonly tensors: number;
      readonly totalBytes: number;
      readonly largestBytes: number;
    }
  | { readonly type: "decided"; readonly action: "skip" | "build"; readonly reason: string }
  | {
      readonly type: "bytes";
      readonly doneBytes: number;
      readonly totalBytes: number;
      readonly tensor: string;
    }
  | { readonly type: "phase"; readonly phase: "hash-inputs" | "verify" | "commit" };

/** The outcome of a merge, for the CLI's JSON report. */
export interface MergeReport {
  readonly status: "merged" | "skipped";
  readonly reason: string;
  readonly out: string;
  readonly artifactDir: string;
  readonly iteration: number;
  readonly mode: "avg" | "tv";
  readonly lam: number | null;
  readonly experts: MergeRequest["experts"];
  readonly base: MergeRequest["base"];
  readonly tensors: number;
  readonly model: FileDigest;
  /** Where the diagnostics are (absolute path). */
  readonly diagnostics: string;
  readonly recovered: readonly string[];
}

/** Digest placeholder of a draft record, validated before the work so a bad field fails early. */
const DRAFT_SHA = "0".repeat(64);

/** The request as a completion record states it, with whatever digests are known so far. */
function identityOf(
  request: ResolvedMergeRequest,
  experts: readonly TensorInput[],
  digests: InputDigests | undefined,
): RequestedIdentity {
  return {
    request: {
      mode: request.mode,
      experts: experts.map((e, i) => ({
        source: e.file,
        size: e.opened[0]!.size,
        ...(digests ? { sha256: digests.experts[i]!.sha256 } : {}),
      })),
      base:
        request.base === null
          ? null
          : {
              source: request.base,
              ...(digests?.baseFingerprint ? { fingerprint: digests.baseFingerprint } : {}),
            },
      lam: request.lam,
      iteration: request.iteration,
    },
    diagnostics: request.diagnostics,
  };
}

function completionRecord(
  request: ResolvedMergeRequest,
  experts: readonly TensorInput[],
  digests: InputDigests,
  files: MergeComplete["files"],
  diagnostics: FileDigest,
): MergeComplete {
  const d = request.diagnostics;
  return {
    schema: MERGE_COMPLETE.version,
    tool_version: MERGE_TOOL_VERSION,
    request: {
      mode: request.mode,
      experts: experts.map((e, i) => ({
        source: e.file,
        size: e.opened[0]!.size,
        sha256: digests.experts[i]!.sha256,
      })),
      base: request.base === null ? null : { source: request.base, fingerprint: digests.baseFingerprint! },
      lam: request.lam,
      iteration: request.iteration,
    },
    files,
    diagnostics:
      d.location === "external"
        ? { location: "external", source: d.path }
        : { location: "artifact", path: d.path, size: diagnostics.size, sha256: diagnostics.sha256 },
  };
}

/** The tree torch.save would write for `{"net": state_dict}`; a null prototype keeps every key an own key. */
function outputTree(plan: MergePlan): { net: Record<string, TorchTensorDesc> } {
  const net: Record<string, TorchTensorDesc> = Object.create(null);
  for (const t of plan.tensors) net[t.name] = { dtype: t.dtype, shape: t.shape };
  return { net };
}

/** Reads the written model back: it must list exactly the planned tensors under "net". */
async function verifyModel(path: string, plan: MergePlan): Promise<FileDigest> {
  const file = await openTorchFile(await openFileByteSource(path));
  try {
    const want = new Map(plan.tensors.map((t) => [`${EXPERT_STATE_KEY}.${t.name}`, t]));
    const problem =
      file.tensors.length !== want.size
        ? `${file.tensors.length} tensors instead of ${want.size}`
        : file.tensors
            .map((t) => {
              const p = want.get(t.name);
              if (p === undefined) return `unexpected tensor ${t.name}`;
              if (t.dtype !== p.dtype || t.shape.join(",") !== p.shape.join(",") || !t.contiguous) {
                return `tensor ${t.name} reads back as ${t.dtype} [${t.shape}]`;
              }
              return undefined;
            })
            .find((p) => p !== undefined);
    if (problem !== undefined) {
      throw new MergeError(
        "MERGE_VERIFY_FAILED",
        `merge: the written ${path} holds ${problem}; nothing was committed.`,
        {
          kind: "failed",
          file: path,
        },
      );
    }
  } finally {
    await file.close();
  }
  return hashFile(path);
}

async function openInputs(
  request: ResolvedMergeRequest,
): Promise<{ experts: TensorInput[]; base: TensorInput | undefined }> {
  const opened: TensorInput[] = [];
  try {
    for (const path of request.experts) opened.push(await openExpert(path));
    const base = request.base === null ? undefined : await openBase(request.base);
    return { experts: opened, base };
  } catch (error) {
    for (const input of opened) await input.close().catch(() => {});
    throw error;
  }
}

interface Context {
  readonly request: ResolvedMergeRequest;
  readonly run: MergeRunOptions;
  readonly emit: (event: MergeEvent) => void;
  /** The output's lock: taken at the start when the artifact's parent exists, else before the build creates it. */
  lock: HeldLock | undefined;
}

const takeLock = async (ctx: Context): Promise<HeldLock> =>
  (ctx.lock ??= await lockOutput(
    ctx.request.iterDir,
    ctx.run.lockWaitMs ?? DEFAULT_MERGE_LOCK_WAIT_MS,
    ctx.run.signal,
  ));

/** The decision for the output as it is, hashing only what the decision needs. */
async function decide(
  ctx: Context,
  experts: readonly TensorInput[],
  base: TensorInput | undefined,
): Promise<{
  action: "skip" | "build";
  reason: string;
  digests: InputDigests | undefined;
  existing?: MergeComplete;
}> {
  const { request } = ctx;
  const facts = await readOutputFacts(request.iterDir);
  const classified = classifyOutput(facts, MERGE_TOOL_VERSION, MERGE_MODEL_FILE);
  let state: OutputState = classified;
  let differences: string[] | undefined;
  let digests: InputDigests | undefined;
  if (classified.kind === "completed") {
    const actual = await digestRecordedFiles(request.iterDir, classified.record);
    const problems = checkIntact(classified.record, actual, facts.manifest, MERGE_MODEL_FILE);
    if (problems.length > 0) state = { kind: "damaged", problems };
    else {
      // Cheap fields first: only a request that agrees on them is worth hashing the inputs for.
      differences = compareRequests(classified.record, identityOf(request, experts, undefined));
      if (differences.length === 0) {
        ctx.emit({ type: "phase", phase: "hash-inputs" });
        digests = await digestInputs(experts, base, { concurrency: 2, signal: ctx.run.signal });
        differences = compareRequests(classified.record, identityOf(request, experts, digests));
      }
    }
  }
  const recordedDiag = facts.completion.status === "ok" ? facts.completion.value.diagnostics : null;
  const owned = mergeOwnedNames(MERGE_MODEL_FILE, ARTIFACT_MANIFEST.fileName, MERGE_COMPLETE.fileName, [
    recordedDiag?.location === "artifact" ? recordedDiag.path : undefined,
    request.diagnostics.location === "artifact" ? request.diagnostics.path : undefined,
  ]);
  const decision = decideMerge({
    iterDir: request.iterDir,
    state,
    differences,
    force: request.force,
    toolVersion: MERGE_TOOL_VERSION,
    foreignEntries: facts.entries.filter((name) => !owned.has(name)),
  });
  if (decision.action === "refuse") throw decision.error;
  return {
    ...decision,
    digests,
    ...(classified.kind === "completed" ? { existing: classified.record } : {}),
  };
}

async function build(
  ctx: Context,
  plan: MergePlan,
  experts: readonly TensorInput[],
  base: TensorInput | undefined,
  known: InputDigests | undefined,
): Promise<{ model: FileDigest; record: MergeComplete }> {
  const { request, run, emit } = ctx;
  const { staging } = sidePaths(request.iterDir);
  // The tensors' bytes are known from the headers: a disk that cannot hold them is refused first.
  await assertRoom(`the build of ${request.iterDir}`, staging, plan.totalBytes);
  await writeStep(
    dirname(request.iterDir),
    () => 0,
    () => mkdir(dirname(request.iterDir), { recursive: true }),
  );
  const lock = await takeLock(ctx);
  try {
    await writeStep(
      staging,
      () => 0,
      () => mkdir(staging),
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    throw sideNameOccupied(staging, await pathKind(staging));
  }
  try {
    // The identity is hashed on worker threads while this thread merges.
    const hashing =
      known === undefined
        ? digestInputs(experts, base, { concurrency: run.hashConcurrency ?? 1, signal: run.signal })
        : Promise.resolve(known);
    hashing.catch(() => {});
    const kernel = new MergeKernel(request.mode, plan.experts, plan.withBase, request.lam);
    const stats = plan.tensors.map(() => emptyStats(plan.experts));
    const pipeline = new ChunkPipeline(
      plan,
      experts,
      base,
      kernel,
      stats,
      run.chunkElements ?? DEFAULT_CHUNK_ELEMENTS,
      run.signal,
    );
    let done = 0;
    let index = 0;
    const modelPath = join(staging, MERGE_MODEL_FILE);
    await writeStep(
      modelPath,
      () => plan.totalBytes - done,
      () =>
        writeTorchFile(modelPath, {
          tree: outputTree(plan),
          sync: true,
          provideTensor: () => {
            const tensorIndex = index++;
            const tensor = plan.tensors[tensorIndex]!;
            return (async function* () {
              for await (const chunk of pipeline.tensorChunks(tensorIndex)) {
                yield chunk;
                done += chunk.length;
                emit({ type: "bytes", doneBytes: done, totalBytes: plan.totalBytes, tensor: tensor.name });
              }
            })();
          },
        }),
    );
    emit({ type: "phase", phase: "verify" });
    const model = await verifyModel(modelPath, plan);
    // A replaced input shows as a failed hash or a changed stamp: either way, say which file changed.
    const inputs = [...experts, ...(base === undefined ? [] : [base])];
    const digests = await hashing.catch(async (error: unknown) => {
      await assertInputsUnchanged(inputs);
      throw error;
    });
    await assertInputsUnchanged(inputs);

    emit({ type: "phase", phase: "commit" });
    const diagnosticsBytes = serializeDiagnostics(
      buildDiagnostics(plan, stats, {
        toolVersion: MERGE_TOOL_VERSION,
        lam: request.lam,
        experts: request.experts,
        base: request.base,
      }),
    );
    let diagnostics: FileDigest | undefined;
    const writeRecord = (path: string, bytes: Uint8Array | string) =>
      writeStep(
        path,
        () => Buffer.byteLength(bytes),
        () => writeFileAtomic(path, bytes),
      );
    if (request.diagnostics.location === "artifact") {
      diagnostics = await writeRecord(join(staging, request.diagnostics.path), diagnosticsBytes);
    } else {
      const external = request.diagnostics.path;
      await writeStep(
        dirname(external),
        () => 0,
        () => mkdir(dirname(external), { recursive: true }),
      );
      await writeRecord(external, diagnosticsBytes);
    }
    const manifest: ArtifactManifest = {
      schema: "posttrain.checkpoint-artifact.v1",
      iteration: request.iteration,
      format: "consolidated",
      logical_components: ["model"],
      physical_components: [{ name: "model", kind: "file", path: MERGE_MODEL_FILE, ...model }],
      producer: MERGE_TOOL_VERSION,
    };
    const manifestWritten = await writeRecord(
      join(staging, ARTIFACT_MANIFEST.fileName),
      ARTIFACT_MANIFEST.serialize(manifest),
    );
    const record = completionRecord(
      request,
      experts,
      digests,
      [
        { path: MERGE_MODEL_FILE, ...model },
        { path: ARTIFACT_MANIFEST.fileName, size: manifestWritten.size, sha256: manifestWritten.sha256 },
      ],
      diagnostics ?? { size: 0, sha256: DRAFT_SHA },
    );
    // Last: the completion record, then the swap that publishes the whole directory at once.
    await writeRecord(join(staging, MERGE_COMPLETE.fileName), MERGE_COMPLETE.serialize(record));
    assertLockHeld(lock, request.iterDir);
    await swapIntoPlace(request.iterDir);
    return { model, record };
  } catch (error) {
    await rm(staging, { recursive: true, force: true }).catch(() => {});
    throw error;
  }
}

async function execute(
  options: MergeOptions,
  run: MergeRunOptions,
  emit: (e: MergeEvent) => void,
): Promise<MergeReport> {
  const request = resolveMergeRequest(options, run.cwd ?? process.cwd());
  const ctx: Context = { request, run, emit, lock: undefined };
  try {
    return await executeLocked(ctx);
  } finally {
    await ctx.lock?.release();
  }
}

async function executeLocked(ctx: Context): Promise<MergeReport> {
  const { request, emit } = ctx;
  // Recovery renames the output's side directories: only under the lock. Without a parent there
  // is nothing to recover and nobody else's staging; the build takes the lock once it makes one.
  const parent = await stat(dirname(request.iterDir)).catch(() => undefined);
  if (parent !== undefined) await takeLock(ctx);
  const recovered = await recoverInterruptedSwap(request.iterDir);
  if (recovered.length > 0) emit({ type: "recovered", actions: recovered });
  const { experts, base } = await openInputs(request);
  try {
    const plan = planMerge(
      request.mode,
      experts.map((e) => e.listing),
      base?.listing,
    );
    // Every field of the record is checked now, so a path the record cannot hold fails before the work.
    const draftDigests: InputDigests = {
      experts: experts.map((e) => ({ size: e.opened[0]!.size, sha256: DRAFT_SHA })),
      baseFingerprint: base === undefined ? null : DRAFT_SHA,
    };
    const draftFile = { size: 0, sha256: DRAFT_SHA };
    const draft = MERGE_COMPLETE.validate(
      completionRecord(request, experts, draftDigests, [{ path: MERGE_MODEL_FILE, ...draftFile }], draftFile),
      MERGE_COMPLETE.fileName,
    );
    if (!draft.ok) {
      throw new MergeError(
        "MERGE_BAD_REQUEST",
        `merge: the request cannot be recorded: ${draft.error.message}`,
        { kind: "input", cause: draft.error },
      );
    }
    emit({
      type: "planned",
      tensors: plan.tensors.length,
      totalBytes: plan.totalBytes,
      largestBytes: plan.largestBytes,
    });
    const decision = await decide(ctx, experts, base);
    emit({ type: "decided", action: decision.action, reason: decision.reason });
    const diagnosticsPath =
      request.diagnostics.location === "artifact"
        ? join(request.iterDir, request.diagnostics.path)
        : request.diagnostics.path;
    const summary = {
      reason: decision.reason,
      out: request.out,
      artifactDir: request.iterDir,
      iteration: request.iteration,
      mode: request.mode,
      lam: request.lam,
      tensors: plan.tensors.length,
      diagnostics: diagnosticsPath,
      recovered,
    };
    if (decision.action === "skip") {
      const existing = decision.existing!;
      const model = existing.files.find((f) => f.path === MERGE_MODEL_FILE)!;
      return {
        status: "skipped",
        ...summary,
        experts: existing.request.experts,
        base: existing.request.base,
        model: { size: model.size, sha256: model.sha256 },
      };
    }
    const { model, record } = await build(ctx, plan, experts, base, decision.digests);
    return {
      status: "merged",
      ...summary,
      experts: record.request.experts,
      base: record.request.base,
      model,
    };
  } finally {
    for (const input of [...experts, ...(base === undefined ? [] : [base])])
      await input.close().catch(() => {});
  }
}

/**
 * Merges experts into `<...>/iter_<n>/model.pt` as a long operation (see {@link mergeExperts}):
 * progress events, then the report as the return value; a refusal or failure is thrown. Leaving
 * the loop early aborts the merge.
 */
export function mergeExpertsIter(
  options: MergeOptions,
  run: MergeRunOptions = {},
): LongOperation<MergeEvent, MergeReport> {
  return withEvents(
    (emit, signal) =>
      execute(options, { ...run, signal }, emit).catch((error: unknown) => {
        // An abort noticed below (the hasher's, a lock wait's) is the merge's abort.
        if (!isAbort(error) || error instanceof MergeError) throw error;
        throw new MergeError("MERGE_ABORTED", "merge: aborted; the output was not changed.", {
          kind: "failed",
          cause: error,
        });
      }),
    run.signal,
  );
}

/** What a merge would do to its output, decided as {@link mergeExperts} decides; nothing written. */
export interface MergeDryRun {
  readonly dry_run: true;
  readonly action: "build" | "skip";
  readonly reason: string;
  readonly out: string;
  readonly artifactDir: string;
  /** Entries of the existing output a build would replace (the output directory is swapped whole). */
  readonly would_replace: readonly string[];
}

/**
 * Decides a merge exactly as {@link mergeExperts} would (the inputs opened and planned, the output
 * judged, a refusal thrown) and stops: nothing is locked, recovered, built or replaced.
 */
export async function dryRunMerge(options: MergeOptions, run: MergeRunOptions = {}): Promise<MergeDryRun> {
  const request = resolveMergeRequest(options, run.cwd ?? process.cwd());
  const ctx: Context = { request, run, emit: () => {}, lock: undefined };
  const { experts, base } = await openInputs(request);
  try {
    planMerge(
      request.mode,
      experts.map((e) => e.listing),
      base?.listing,
    );
    const decision = await decide(ctx, experts, base);
    const existing = decision.action === "build" ? await readdir(request.iterDir).catch(() => []) : [];
    return {
      dry_run: true,
      action: decision.action,
      reason: decision.reason,
      out: request.out,
      artifactDir: request.iterDir,
      would_replace: existing.sort(),
    };
  } finally {
    for (const input of [...experts, ...(base === undefined ? [] : [base])])
      await input.close().catch(() => {});
  }
}

/**
 * Merges consolidated experts (`avg`: uniform average; `tv`: base + lam × Σ(expert − base)),
 * streaming chunk by chunk with F32 accumulation and one rounding to the output dtype, into a
 * model-only artifact with diagnostics, the native manifest and `.merge-complete.json` last.
 * Skips a completed identical request; rebuilds an incomplete or damaged output; refuses a
 * completed different request, another tool version's output or another writer's artifact unless
 * `force`.
 */
export function mergeExperts(options: MergeOptions, run: MergeRunOptions = {}): Promise<MergeReport> {
  return drain(mergeExpertsIter(options, run));
}
