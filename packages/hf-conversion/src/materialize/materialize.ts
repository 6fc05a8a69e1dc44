import { copyFile, mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import type { FetchEvent } from "@ckpt/archive-reader";
import {
  CURRENT_CONVERSION_VERSION,
  fsyncDirectory,
  fsyncFile,
  MATERIALIZED_MARKER_FILE,
  MATERIALIZED_MARKER_RECORD,
  type MaterializedMarker,
  OVERLAY_SOURCE_FILE,
  OVERLAY_SOURCE_RECORD,
  type OverlaySource,
  OVERLAY_SOURCE_SCHEMA,
  MATERIALIZED_MARKER_SCHEMA,
  type SourceFile,
  writeRecordFile,
} from "@ckpt/manifest";
import type { ObjectStore } from "@ckpt/object-store";
import { type ConvertProgress, type StagedFile, sourceBytes, writeShards } from "../convert/write.js";
import { describe, HfConversionError, type MaterializeStage, refusal } from "../errors.js";
import { type ConversionPlan, planConversion } from "../plan/mapping.js";
import type { ExpertLayoutRule } from "../plan/rules.js";
import { type BasePreflight, preflightBase } from "../preflight/base.js";
import { describeArchivedModel, removeCreated, stageArchivedArtifact } from "../source/archive.js";
import { type ExpectedSource, type OpenedSource, openSource, readArtifactModel } from "../source/open.js";
import { probeShard, type ShardProbe, type VerifyReport, verifyStaged } from "../verify/verify.js";
import {
  decideMaterialize,
  type MaterializeDecision,
  type OutputStates,
  type Recovery,
  type RequestIdentity,
} from "./decide.js";
import { acquireOutputLock, type OutputLock } from "./lock.js";
import { inspectTree } from "./state.js";

/** `--min-tensors` when not given: a real model has hundreds of tensors; a tiny export is a mistake. */
export const DEFAULT_MIN_TENSORS = 800;
/** `--lock-wait-seconds` when not given. */
export const DEFAULT_LOCK_WAIT_SECONDS = 120;

/** Where the model.pt comes from: a local artifact directory, or an archive read through `store`. */
export type MaterializeSource =
  | { readonly kind: "local"; readonly ckptDir: string }
  | { readonly kind: "archive"; readonly uri: string; readonly store: ObjectStore };

export interface MaterializeRequest {
  readonly source: MaterializeSource;
  readonly base: string;
  readonly out: string;
  /** Archive staging root (default `<out>.stage`). */
  readonly stageDir?: string;
  /** Keep what this run staged from the archive. */
  readonly keepStaged?: boolean;
  /** Exact output tensor count; 0 (default) = none. */
  readonly expectTensors?: number;
  /** Fewest output tensors (default {@link DEFAULT_MIN_TENSORS}). */
  readonly minTensors?: number;
  /** false skips tensor probing only (`--no-verify`). */
  readonly verify?: boolean;
  readonly force?: boolean;
  readonly unifiedChatTemplate?: boolean;
  /** Finite, >= 0 (default {@link DEFAULT_LOCK_WAIT_SECONDS}). */
  readonly lockWaitSeconds?: number;
  /** Expert layout rules (default: the built-in ones). */
  readonly rules?: readonly ExpertLayoutRule[];
  readonly signal?: AbortSignal;
}

export interface MaterializeReport {
  /** `built`: converted now; `skipped`: an intact output of this request was there; `published`: a complete staged build was verified and swapped in. */
  readonly action: "built" | "skipped" | "published";
  readonly out: string;
  readonly marker: MaterializedMarker;
  /** Repairs of an interrupted earlier run, in the order done. */
  readonly recovered: readonly string[];
  /** Things worth knowing that changed nothing (kept leftovers, ignored base entries, dtype changes). */
  readonly notes: readonly string[];
  /** null for a skip, or a publish under --no-verify. */
  readonly verification: VerifyReport | null;
  /** The archive staging this run fetched into, and what of it this run removed (null: nothing fetched). */
  readonly staging: { readonly dir: string; readonly removed: readonly string[] } | null;
}

export type MaterializeEvent =
  | {
      readonly type: "preflight";
      readonly base: string;
      readonly fingerprint: string;
      readonly tensors: number;
      readonly sidecars: number;
    }
  | { readonly type: "lock"; readonly waitedFor: string | undefined }
  | {
      readonly type: "decision";
      readonly action: MaterializeDecision["action"];
      readonly recover: readonly Recovery[];
    }
  | { readonly type: "fetch"; readonly event: FetchEvent }
  | ConvertProgress
  | { readonly type: "verify"; readonly probing: boolean }
  | { readonly type: "done"; readonly report: MaterializeReport };

interface Options {
  readonly out: string;
  readonly staged: string;
  readonly previous: string;
  readonly stageRoot: string;
  readonly keepStaged: boolean;
  readonly expectTensors: number;
  readonly minTensors: number;
  readonly verify: boolean;
  readonly force: boolean;
  readonly unified: boolean;
  readonly lockWaitSeconds: number;
}

function badOption(message: string): HfConversionError {
  return new HfConversionError("MATERIALIZE_BAD_OPTION", message, { kind: "input" });
}

const isInside = (parent: string, child: string) => {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !rel.startsWith(sep) && rel !== "..");
};

/** Checks and completes a request's options. Pure. */
export function resolveMaterializeOptions(request: MaterializeRequest): Options {
  const count = (name: string, value: number | undefined, fallback: number) => {
    const v = value ?? fallback;
    if (!Number.isSafeInteger(v) || v < 0) throw badOption(`--${name} ${v} is not a whole number >= 0.`);
    return v;
  };
  const wait = request.lockWaitSeconds ?? DEFAULT_LOCK_WAIT_SECONDS;
  if (typeof wait !== "number" || !Number.isFinite(wait) || wait < 0) {
    throw badOption(
      `--lock-wait-seconds ${wait} is not a finite number of seconds >= 0 (inf and nan are refused).`,
    );
  }
  if (request.source.kind === "local" && (request.stageDir !== undefined || request.keepStaged)) {
    throw badOption(
      "--stage-dir and --keep-staged apply to --artifact-uri only; a local artifact is read in place.",
    );
  }
  const out = resolve(request.out);
  const base = resolve(request.base);
  if (isInside(base, out) || isInside(out, base)) {
    throw badOption(`--out ${out} and --base ${base} overlap; the output must be a directory of its own.`);
  }
  if (request.source.kind === "local") {
    const dir = resolve(request.source.ckptDir);
    if (isInside(out, dir) || isInside(dir, out))
      throw badOption(`--out ${out} and --ckpt-dir ${dir} overlap.`);
  }
  return {
    out,
    staged: `${out}.tmp`,
    previous: `${out}.previous`,
    stageRoot: resolve(request.stageDir ?? `${out}.stage`),
    keepStaged: request.keepStaged ?? false,
    expectTensors: count("expect-tensors", request.expectTensors, 0),
    minTensors: count("min-tensors", request.minTensors, DEFAULT_MIN_TENSORS),
    verify: request.verify ?? true,
    force: request.force ?? false,
    unified: request.unifiedChatTemplate ?? false,
    lockWaitSeconds: wait,
  };
}

/** Gives an error the stage it happened in; foreign errors become MATERIALIZE_BUILD_FAILED with their code named. */
function inStage(error: unknown, stage: MaterializeStage, out: string): unknown {
  if (error instanceof HfConversionError) {
    error.stage ??= stage;
    return error;
  }
  const code = (error as { code?: unknown }).code;
  const kind = (error as { kind?: unknown }).kind;
  return new HfConversionError(
    "MATERIALIZE_BUILD_FAILED",
    `materialize ${out}: the ${stage} stage failed: ${typeof code === "string" ? `[${code}] ` : ""}${describe(error)}${
      stage === "convert" || stage === "sidecars" || stage === "verify" || stage === "mark"
        ? ` The staging directory was removed; ${out} is unchanged.`
        : ""
    }`,
    {
      kind: kind === "input" || kind === "refused" || kind === "transient" ? kind : "failed",
      stage,
      cause: error,
    },
  );
}

/** The source of a run: identity first (cheap where possible), bytes when a build needs them. */
class SourceSession {
  private opened: OpenedSource | undefined;
  private expected: ExpectedSource | undefined;
  private descriptor: SourceFile | undefined;
  readonly stagingCreated: string[] = [];
  stagingDir: string | undefined;

  constructor(
    private readonly source: MaterializeSource,
    private readonly options: Options,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** Under the lock: a local model.pt is opened (and starts hashing); an archive's descriptor is read. */
  async start(): Promise<void> {
    if (this.source.kind === "local") {
      const model = await readArtifactModel(this.source.ckptDir);
      this.expected = model.expected;
      this.opened = await openSource(model.path, model.path, {
        size: model.expected.size,
        recordedBy: "its artifact manifest",
      });
      // Hash on a worker thread while the run inspects the output (and converts, if it builds).
      this.opened.sha256().catch(() => {});
    } else {
      const model = await describeArchivedModel(this.source.store, this.source.uri, this.signal);
      this.expected = { size: model.size, sha256: model.sha256 };
      this.descriptor = { source: this.source.uri, size: model.size, sha256: model.sha256 };
    }
  }

  private mismatch(what: string): HfConversionError {
    const path = this.opened?.path ?? "model.pt";
    return refusal(
      "MATERIALIZE_SOURCE_MISMATCH",
      `${path} ${what}`,
      "the output would have been labelled with an identity its bytes do not have",
      "The artifact was changed after it was committed; restore it or materialize another one.",
      { file: path },
    );
  }

  /** The identity without hashing: known for an archive (its descriptor), or once a local hash is done. */
  get quickIdentity(): SourceFile | undefined {
    return this.descriptor;
  }

  /** The identity of record (hashes a local model.pt if not done). */
  async identity(): Promise<SourceFile> {
    if (this.descriptor) return this.descriptor;
    const opened = this.opened!;
    const sha256 = await opened.sha256();
    if (this.expected?.sha256 !== undefined && this.expected.sha256 !== sha256) {
      throw this.mismatch(`has sha256 ${sha256}, but its artifact manifest records ${this.expected.sha256}`);
    }
    this.descriptor = { source: opened.label, size: opened.size, sha256 };
    return this.descriptor;
  }

  /** The opened model.pt; an archive is fetched (digest-checked) into the staging directory first. */
  async *bytes(): AsyncGenerator<MaterializeEvent, OpenedSource> {
    if (this.opened) return this.opened;
    if (this.source.kind !== "archive") throw new Error("a local source is opened at start");
    const staged = yield* mapFetch(
      stageArchivedArtifact(
        this.source.store,
        this.source.uri,
        this.options.stageRoot,
        this.stagingCreated,
        this.signal,
      ),
    );
    this.stagingDir = staged.report.stagedDir;
    this.opened = await openSource(staged.modelPath, this.source.uri, {
      size: this.expected!.size,
      recordedBy: "the archive",
    });
    this.opened.sha256().catch(() => {});
    return this.opened;
  }

  /** After a build read it: the digest of the bytes read equals the identity, and the file did not change. */
  async confirm(): Promise<SourceFile> {
    const opened = this.opened!;
    const sha256 = await opened.sha256();
    await opened.assertUnchanged();
    if (this.expected?.sha256 !== undefined && this.expected.sha256 !== sha256) {
      throw this.mismatch(
        `has sha256 ${sha256}, but ${this.source.kind === "archive" ? "the archive" : "its artifact manifest"} records ${this.expected.sha256}`,
      );
    }
    const identity = await this.identity();
    if (identity.sha256 !== sha256)
      throw this.mismatch(`has sha256 ${sha256}, not the ${identity.sha256} the decision used`);
    return identity;
  }

  async close(): Promise<string[]> {
    await this.opened?.close().catch(() => {});
    if (this.options.keepStaged) return [];
    await removeCreated(this.stagingCreated);
    return [...this.stagingCreated];
  }
}

async function* mapFetch<R>(inner: AsyncGenerator<FetchEvent, R>): AsyncGenerator<MaterializeEvent, R> {
  for (;;) {
    const step = await inner.next();
    if (step.done) return step.value;
    yield { type: "fetch", event: step.value };
  }
}

/**
 * Removes a tree this tool owns with its ownership records (`.overlay_source.json`, then
 * `.materialized`) last, so a kill halfway leaves a tree still recognisably this tool's, which the
 * next run removes again, rather than an unmarked remnant it must refuse as foreign.
 */
async function removeTree(path: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const records = [OVERLAY_SOURCE_FILE, MATERIALIZED_MARKER_FILE];
  for (const name of names) {
    if (!records.includes(name)) await rm(join(path, name), { recursive: true, force: true });
  }
  for (const name of records) await rm(join(path, name), { force: true });
  await rm(path, { recursive: true, force: true });
  await fsyncDirectory(dirname(path));
}

/**
 * Runs one materialize request and yields its progress; the last event is `done` with the report.
 *
 * Order: options; the base's preflight (read-only; a refusal writes nothing); the output's lock;
 * the source (a local model.pt opened and hashed from that one open file, an archive's descriptor);
 * what is at `<out>`, `<out>.tmp`, `<out>.previous`; the decision ({@link decideMaterialize});
 * then a skip, a publish of a complete staged build, or a build in `<out>.tmp` (plan, overlay
 * record, shards, index, sidecars, source digest, verification, marker) and the swap
 * (`<out>` -> `<out>.previous`, `<out>.tmp` -> `<out>`, remove `<out>.previous`). A failure before
 * the swap removes the staging directory and leaves `<out>` byte-identical.
 */
export async function* materializeHfIter(
  request: MaterializeRequest,
): AsyncGenerator<MaterializeEvent, void> {
  const options = resolveMaterializeOptions(request);
  const { out } = options;
  let base: BasePreflight;
  try {
    base = await preflightBase(request.base, { unifiedChatTemplate: options.unified });
  } catch (error) {
    throw inStage(error, "preflight", out);
  }
  yield {
    type: "preflight",
    base: base.dir,
    fingerprint: base.fingerprint,
    tensors: base.tensors.size,
    sidecars: base.sidecars.length,
  };
  await mkdir(dirname(out), { recursive: true });
  let waitedFor: string | undefined;
  let lock: OutputLock;
  try {
    lock = await acquireOutputLock(out, {
      waitSeconds: options.lockWaitSeconds,
      signal: request.signal,
      onWait: (holder) => {
        waitedFor = holder;
      },
    });
  } catch (error) {
    throw inStage(error, "lock", out);
  }
  yield { type: "lock", waitedFor };
  const session = new SourceSession(request.source, options, request.signal);
  const recovered: string[] = [];
  const notes: string[] = base.ignored.map((name) => `base entry ${name} is not copied (not a sidecar)`);
  let report: Omit<MaterializeReport, "staging"> | undefined;
  let failure: unknown;
  try {
    try {
      await session.start();
    } catch (error) {
      throw inStage(error, "source", out);
    }
    const run = new Run(request, options, base, lock, session, recovered, notes);
    report = yield* run.execute();
  } catch (error) {
    failure = error;
  }
  let removed: string[] = [];
  try {
    removed = await session.close();
  } finally {
    await lock.release();
  }
  if (failure !== undefined) throw failure;
  const staging =
    request.source.kind === "archive" && session.stagingDir !== undefined
      ? { dir: session.stagingDir, removed }
      : null;
  yield { type: "done", report: { ...report!, staging } };
}

/** {@link materializeHfIter} drained: resolves to the report. */
export async function materializeHf(request: MaterializeRequest): Promise<MaterializeReport> {
  for await (const event of materializeHfIter(request)) if (event.type === "done") return event.report;
  throw new Error("materializeHfIter ended without a report");
}

/** The decided part of one run, under the lock. */
class Run {
  constructor(
    private readonly request: MaterializeRequest,
    private readonly options: Options,
    private readonly base: BasePreflight,
    private readonly lock: OutputLock,
    private readonly session: SourceSession,
    private readonly recovered: string[],
    private readonly notes: string[],
  ) {}

  private identityOf(source: SourceFile): RequestIdentity {
    return {
      conversion_version: CURRENT_CONVERSION_VERSION,
      source,
      base: { source: this.base.dir, fingerprint: this.base.fingerprint },
      options: { unified_chat_template: this.options.unified },
    };
  }

  private async states(): Promise<OutputStates> {
    const { out, staged, previous } = this.options;
    return {
      out: await inspectTree(out, this.base),
      staged: await inspectTree(staged, this.base),
      previous: await inspectTree(previous, this.base),
    };
  }

  async *execute(): AsyncGenerator<MaterializeEvent, Omit<MaterializeReport, "staging">> {
    const { out } = this.options;
    // A publish under --force is followed by the rebuild it asked for: at most two rounds.
    for (let round = 0; round < 3; round++) {
      let decision: MaterializeDecision;
      let identity: RequestIdentity | undefined;
      try {
        const states = await this.states();
        const quick = this.session.quickIdentity;
        identity = quick && this.identityOf(quick);
        decision = decideMaterialize(states, identity, this.options.force);
        if (decision.action === "need-identity") {
          identity = this.identityOf(await this.session.identity());
          decision = decideMaterialize(states, identity, this.options.force);
        }
      } catch (error) {
        throw inStage(error, "inspect-output", out);
      }
      yield {
        type: "decision",
        action: decision.action,
        recover: "recover" in decision ? decision.recover : [],
      };
      switch (decision.action) {
        case "need-identity":
          throw new Error("the decision needs an identity it was given");
        case "refuse": {
          const path = { out, staged: this.options.staged, previous: this.options.previous }[decision.path];
          const found = decision.found.replace(/<out>/g, out);
          const error = refusal(decision.code, found, decision.consequence, decision.remedy, { file: path });
          throw inStage(error, "inspect-output", out);
        }
        case "skip": {
          await this.recover(decision.recover);
          if (decision.previousKept)
            this.notes.push(
              `${this.options.previous} is left beside ${out}; --force removes it at the next build`,
            );
          const marker = (await inspectTree(out, this.base)) as {
            kind: "complete";
            marker: MaterializedMarker;
          };
          return this.finish("skipped", marker.marker, undefined);
        }
        case "publish": {
          await this.recover(decision.recover);
          const verification = yield* this.publish(decision.finishesSwap, identity!);
          if (!decision.thenBuild) return this.finish("published", verification.marker, verification.report);
          continue;
        }
        case "build": {
          const opened = yield* this.stage("fetch", () => this.session.bytes());
          const plan = this.plan(opened);
          await this.recover(decision.recover);
          if (decision.discardStaged) {
            await removeTree(this.options.staged);
            this.recovered.push(`removed ${this.options.staged} left by an earlier run`);
          }
          const built = yield* this.build(opened, plan);
          await this.swap(decision.previousAtSwap);
          return this.finish("built", built.marker, built.report);
        }
      }
    }
    throw new Error("materialize did not settle in three rounds");
  }

  private finish(
    action: MaterializeReport["action"],
    marker: MaterializedMarker,
    verification: VerifyReport | undefined,
  ): Omit<MaterializeReport, "staging"> {
    return {
      action,
      out: this.options.out,
      marker,
      recovered: this.recovered,
      notes: this.notes,
      verification: verification ?? null,
    };
  }

  private async *stage<T>(
    stage: MaterializeStage,
    work: () => AsyncGenerator<MaterializeEvent, T>,
  ): AsyncGenerator<MaterializeEvent, T> {
    try {
      return yield* work();
    } catch (error) {
      throw inStage(error, stage, this.options.out);
    }
  }

  private plan(opened: OpenedSource): ConversionPlan {
    try {
      const plan = planConversion(this.base.shards, opened.tensors, {
        rules: this.request.rules,
        expectTensors: this.options.expectTensors,
        minTensors: this.options.minTensors,
      });
      for (const change of plan.dtypeChanges.slice(0, 5)) {
        this.notes.push(
          `${change.name} is ${change.checkpoint} in the checkpoint and ${change.base} in the base; the output keeps ${change.checkpoint}`,
        );
      }
      return plan;
    } catch (error) {
      throw inStage(error, "plan", this.options.out);
    }
  }

  private async recover(steps: readonly Recovery[]): Promise<void> {
    const { out, staged, previous } = this.options;
    for (const step of steps) {
      if (step === "restore-previous") {
        await rename(previous, out);
        await fsyncDirectory(dirname(out));
        this.recovered.push(
          `renamed ${previous} back to ${out} (a swap was interrupted between its renames)`,
        );
      } else {
        await removeTree(staged);
        this.recovered.push(`removed ${staged}, an unfinished build of an earlier run`);
      }
    }
  }

  /** Builds in `<out>.tmp`; on any failure the staging directory is removed. */
  private async *build(
    opened: OpenedSource,
    plan: ConversionPlan,
  ): AsyncGenerator<MaterializeEvent, { marker: MaterializedMarker; report: VerifyReport }> {
    const { staged, out } = this.options;
    const base = this.base;
    await mkdir(staged);
    let stage: MaterializeStage = "convert";
    let files: StagedFile[] = [];
    try {
      const known = this.session.quickIdentity;
      await writeRecordFile<OverlaySource>(join(staged, OVERLAY_SOURCE_FILE), OVERLAY_SOURCE_RECORD, {
        schema: OVERLAY_SOURCE_SCHEMA,
        conversion_version: CURRENT_CONVERSION_VERSION,
        source: { source: opened.label, size: opened.size, sha256: known?.sha256 ?? null },
        base: { source: base.dir, fingerprint: base.fingerprint },
        options: { unified_chat_template: this.options.unified },
      });
      // Each shard's copied tensors are probed against the source as soon as it is written,
      // while the next shards are converted.
      const probes = new Map<string, Promise<ShardProbe>>();
      const bytes = sourceBytes(opened);
      files = yield* writeShards(staged, plan, opened, base.inspection.index!, (shard) => {
        if (!this.options.verify) return;
        const probe = probeShard(staged, shard, bytes);
        probe.catch(() => {});
        probes.set(shard.file, probe);
      });
      stage = "sidecars";
      await this.copySidecars();
      stage = "verify";
      yield { type: "verify", probing: this.options.verify };
      // Verification reads the page cache while the shards are fsynced and hashed, and while the
      // source's digest (hashed since the start of the run) is finished and checked.
      const [report, source] = await Promise.all([
        verifyStaged({
          dir: staged,
          base,
          plan,
          written: files,
          source: this.options.verify ? bytes : undefined,
          probes,
          expectTensors: this.options.expectTensors,
          minTensors: this.options.minTensors,
          seed: `${base.fingerprint}:${opened.size}`,
        }),
        this.session.confirm().catch((error: unknown) => {
          stage = "source";
          throw error;
        }),
      ]);
      stage = "convert";
      const written = await Promise.all(files.map((f) => f.settled));
      stage = "mark";
      this.lock.assertHeld();
      const marker: MaterializedMarker = {
        schema: MATERIALIZED_MARKER_SCHEMA,
        ...this.identityOf(source),
        shards: written,
        tensor_count: report.tensorCount,
        tensors_verified: report.tensorsVerified,
        chat_template: base.unified
          ? {
              processor_template_sha256: base.unified.processorTemplateSha256,
              files: base.unified.files.map(({ path, sha256 }) => ({ path, sha256 })),
              diff: base.unified.diff,
            }
          : null,
      };
      await writeRecordFile(join(staged, MATERIALIZED_MARKER_FILE), MATERIALIZED_MARKER_RECORD, marker);
      await rm(join(staged, OVERLAY_SOURCE_FILE));
      await fsyncDirectory(staged);
      return { marker, report };
    } catch (error) {
      await Promise.allSettled(files.map((f) => f.settled));
      await removeTree(staged).catch(() => {});
      throw inStage(error, stage, out);
    }
  }

  /** Copies every base sidecar (the unified templates written from the plan) into the staging directory. */
  private async copySidecars(): Promise<void> {
    const { staged } = this.options;
    const rewritten = new Map(this.base.unified?.files.map((f) => [f.path, f.bytes]) ?? []);
    const dirs = new Set<string>([staged]);
    for (const file of this.base.sidecars) {
      const target = join(staged, ...file.path.split("/"));
      const bytes = rewritten.get(file.path);
      await mkdir(dirname(target), { recursive: true });
      dirs.add(dirname(target));
      if (bytes !== undefined) await writeFile(target, bytes, { flag: "wx" });
      else await copyFile(join(this.base.dir, ...file.path.split("/")), target);
      await fsyncFile(target);
    }
    for (const dir of dirs) await fsyncDirectory(dir);
  }

  /**
   * Verifies a complete staged tree of this request before it is published: like a fresh build's
   * output (probing against the source) or, under --no-verify, trusting its bytes on the sizes and
   * tensor count its marker records (checked when it was judged intact).
   */
  private async *publish(
    finishesSwap: boolean,
    identity: RequestIdentity,
  ): AsyncGenerator<MaterializeEvent, { marker: MaterializedMarker; report: VerifyReport | undefined }> {
    const { staged, out, previous } = this.options;
    const state = await inspectTree(staged, this.base);
    if (state.kind !== "complete") throw new Error("publish of a staged tree that is not complete");
    let report: VerifyReport | undefined;
    if (this.options.verify) {
      const opened = yield* this.stage("fetch", () => this.session.bytes());
      const plan = this.plan(opened);
      try {
        const source = await this.session.confirm();
        if (source.sha256 !== identity.source.sha256)
          throw new Error("the source changed since the decision");
        yield { type: "verify", probing: true };
        report = await verifyStaged({
          dir: staged,
          base: this.base,
          plan,
          written: state.marker.shards,
          source: sourceBytes(opened),
          expectTensors: this.options.expectTensors,
          minTensors: this.options.minTensors,
          seed: `${this.base.fingerprint}:${opened.size}`,
        });
      } catch (error) {
        // The staged tree stays: it is complete, and may be the only complete one.
        throw inStage(error, "verify", out);
      }
    }
    this.lock.assertHeld();
    if (finishesSwap) {
      await rename(staged, out);
      await fsyncDirectory(dirname(out));
      await removeTree(previous);
      this.recovered.push(`finished an interrupted swap: ${staged} is now ${out}, ${previous} removed`);
    } else {
      await this.swap(false);
      this.recovered.push(`published the complete staged build ${staged}`);
    }
    return { marker: state.marker, report };
  }

  /** `<out>` -> `<out>.previous`, `<out>.tmp` -> `<out>`, `<out>.previous` removed; each step fsynced. */
  private async swap(previousAtSwap: boolean): Promise<void> {
    const { out, staged, previous } = this.options;
    const parent = dirname(out);
    try {
      this.lock.assertHeld();
      if (previousAtSwap) {
        await removeTree(previous);
        this.recovered.push(`removed ${previous} left by an interrupted swap`);
      }
      let replaced = false;
      try {
        await rename(out, previous);
        replaced = true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
      if (replaced) await fsyncDirectory(parent);
      await rename(staged, out);
      await fsyncDirectory(parent);
      if (replaced) await removeTree(previous);
    } catch (error) {
      throw inStage(error, "swap", out);
    }
  }
}
