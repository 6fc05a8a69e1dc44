import { describeShortfall, isAbort, isNoSpace, messageOf, spaceShortfall } from "@ckpt/errors";
import { copyFile, mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  CURRENT_CONVERSION_VERSION,
  fsyncDirectory,
  fsyncFile,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  type MaterializedMarker,
  recoverSwap,
  type SourceFile,
  type StagedPaths,
  swapIntoPlace,
} from "@ckpt/manifest";
import { drain, type LongOperation } from "@ckpt/progress";
import { plannedShardBytes, type StagedFile, sourceBytes, writeShards } from "../convert/write.js";
import { HfConversionError, type MaterializeStage, noSpace, refusal } from "../errors.js";
import { type ConversionPlan, planConversion } from "../plan/mapping.js";
import { type BasePreflight, preflightBase } from "../preflight/base.js";
import type { OpenedSource } from "../source/open.js";
import { assertTiedCopies } from "../source/tied.js";
import { probeShard, type ShardProbe, type VerifyReport, verifyStaged } from "../verify/verify.js";
import {
  decideMaterialize,
  explainDecision,
  type MaterializeDecision,
  type OutputStates,
  type Recovery,
  type RequestIdentity,
} from "./decide.js";
import { acquireOutputLock, type OutputLock } from "./lock.js";
import {
  type MaterializeEvent,
  type MaterializeReport,
  type MaterializeRequest,
  type Options,
  resolveMaterializeOptions,
} from "./options.js";
import { type LoaderCheckRecord, runLoaderCheck } from "./loader-check.js";
import { resyncStagedSidecars } from "./resync.js";
import { SourceSession } from "./session.js";
import { inspectTree, removeOwnedTree } from "./state.js";

/**
 * Gives an error the stage it happened in; an abort noticed below (the store's, the reader's, the
 * hasher's) becomes MATERIALIZE_ABORTED, other foreign errors MATERIALIZE_BUILD_FAILED with their
 * code named.
 */
export function inStage(error: unknown, stage: MaterializeStage, out: string): unknown {
  const noSpaceYet = !(error instanceof HfConversionError && error.code === "MATERIALIZE_NO_SPACE");
  if (noSpaceYet && isNoSpace(error)) {
    const file = (error as { file?: unknown; path?: unknown }).file ?? (error as { path?: unknown }).path;
    const path = typeof file === "string" ? file : out;
    return noSpace(`the disk filled in the ${stage} stage, writing ${path}`, path, stage, error);
  }
  if (error instanceof HfConversionError) {
    error.stage ??= stage;
    return error;
  }
  const unchanged =
    stage === "convert" || stage === "sidecars" || stage === "verify" || stage === "mark"
      ? ` The staging directory was removed; ${out} is unchanged.`
      : "";
  if (isAbort(error)) {
    return new HfConversionError(
      "MATERIALIZE_ABORTED",
      `materialize ${out}: aborted in the ${stage} stage.${unchanged}`,
      {
        kind: "failed",
        stage,
        cause: error,
      },
    );
  }
  const code = (error as { code?: unknown }).code;
  const kind = (error as { kind?: unknown }).kind;
  return new HfConversionError(
    "MATERIALIZE_BUILD_FAILED",
    `materialize ${out}: the ${stage} stage failed: ${typeof code === "string" ? `[${code}] ` : ""}${messageOf(error)}${unchanged}`,
    {
      kind: kind === "input" || kind === "refused" || kind === "transient" ? kind : "failed",
      stage,
      cause: error,
    },
  );
}

/**
 * Runs one materialize request as a long operation: progress events, then the report as the
 * return value.
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
): LongOperation<MaterializeEvent, MaterializeReport> {
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
  return { ...report!, staging };
}

/** {@link materializeHfIter} drained: resolves to the report. */
export function materializeHf(request: MaterializeRequest): Promise<MaterializeReport> {
  return drain(materializeHfIter(request));
}

function requestIdentity(source: SourceFile, base: BasePreflight, options: Options): RequestIdentity {
  return {
    conversion_version: CURRENT_CONVERSION_VERSION,
    source,
    base: { source: base.dir, fingerprint: base.fingerprint },
    options: { unified_chat_template: options.unified },
  };
}

/**
 * What is at `<out>`, `<out>.tmp` and `<out>.previous`, and what the request does with it: the
 * source is hashed only when a complete tree must be compared with it. Reads only.
 */
async function decideRequest(
  options: Options,
  base: BasePreflight,
  session: SourceSession,
): Promise<{ states: OutputStates; identity: RequestIdentity | undefined; decision: MaterializeDecision }> {
  try {
    const states: OutputStates = {
      out: await inspectTree(options.out, base),
      staged: await inspectTree(options.staged, base, { sidecarsRepairable: true }),
      previous: await inspectTree(options.previous, base),
    };
    const quick = session.quickIdentity;
    let identity = quick && requestIdentity(quick, base, options);
    let decision = decideMaterialize(states, identity, options.force);
    if (decision.action === "need-identity") {
      identity = requestIdentity(await session.identity(), base, options);
      decision = decideMaterialize(states, identity, options.force);
    }
    return { states, identity, decision };
  } catch (error) {
    throw inStage(error, "inspect-output", options.out);
  }
}

/** The refusal a decision names, about the path it names. */
function refusalOf(decision: MaterializeDecision & { action: "refuse" }, options: Options): unknown {
  const { out } = options;
  const path = { out, staged: options.staged, previous: options.previous }[decision.path];
  const found = decision.found.replace(/<out>/g, out);
  const error = refusal(decision.code, found, decision.consequence, decision.remedy, { file: path });
  return inStage(error, "inspect-output", out);
}

/** The conversion plan, with what is worth knowing about it added to `notes`. */
function planWithNotes(
  request: MaterializeRequest,
  options: Options,
  base: BasePreflight,
  opened: OpenedSource,
  notes: string[],
): ConversionPlan {
  try {
    const plan = planConversion(base.shards, opened.tensors, {
      rules: request.rules,
      tiedEmbeddings: base.tiedEmbeddings,
      expectTensors: options.expectTensors,
      minTensors: options.minTensors,
    });
    for (const change of plan.dtypeChanges.slice(0, 5)) {
      notes.push(
        `${change.name} is ${change.checkpoint} in the checkpoint and ${change.base} in the base; the output keeps ${change.checkpoint}`,
      );
    }
    const applied = new Map<string, number>();
    for (const instance of plan.instances)
      applied.set(instance.rule.name, (applied.get(instance.rule.name) ?? 0) + 1);
    for (const [rule, count] of applied)
      notes.push(`expert layout rule ${rule} re-laid the experts at ${count} module path(s)`);
    for (const alias of plan.tiedAliases) {
      notes.push(
        `${alias.name} is tied to ${alias.sameAs} (${alias.proof === "storage" ? "one storage in the checkpoint" : "equal bytes, config.json ties the word embeddings"}) and the base's index does not list it; the output holds it once, as the base does`,
      );
    }
    return plan;
  } catch (error) {
    throw inStage(error, "plan", options.out);
  }
}

/** What `materialize-hf --dry-run` reports: a real run's decision, with nothing touched. */
export interface MaterializeDryRun {
  readonly dry_run: true;
  readonly action: "skip" | "publish" | "build";
  readonly out: string;
  readonly reason: string;
  /** Repairs of an interrupted earlier run a real run would do first. */
  readonly recover: readonly Recovery[];
  /** The paths a real run would replace, remove or rename, each with why. */
  readonly would_replace: readonly { readonly path: string; readonly reason: string }[];
  readonly notes: readonly string[];
}

/**
 * Decides a request as {@link materializeHfIter} would, and touches nothing: no lock, no staging
 * directory, no fetch. The base is preflighted, the output's trees inspected, a local source
 * hashed when a complete tree must be compared with it and, before a build, planned (an archive's
 * plan needs its bytes, so it is left to the real run). A refusal is thrown as a real run throws it.
 */
export async function dryRunMaterializeHf(request: MaterializeRequest): Promise<MaterializeDryRun> {
  const options = resolveMaterializeOptions(request);
  let base: BasePreflight;
  try {
    base = await preflightBase(request.base, { unifiedChatTemplate: options.unified });
  } catch (error) {
    throw inStage(error, "preflight", options.out);
  }
  const notes = base.ignored.map((name) => `base entry ${name} is not copied (not a sidecar)`);
  const session = new SourceSession(request.source, options, request.signal);
  try {
    try {
      await session.start();
    } catch (error) {
      throw inStage(error, "source", options.out);
    }
    const { states, decision } = await decideRequest(options, base, session);
    if (decision.action === "refuse") throw refusalOf(decision, options);
    if (decision.action === "need-identity") throw new Error("the decision needs an identity it was given");
    if (decision.action === "build" && request.source.kind === "local") {
      planWithNotes(request, options, base, await drain(session.bytes()), notes);
    }
    const identity = requestIdentity(await session.identity(), base, options);
    const explained = explainDecision(decision, states, identity);
    const paths = { out: options.out, staged: options.staged, previous: options.previous };
    return {
      dry_run: true,
      action: decision.action,
      out: options.out,
      reason: explained.reason,
      recover: decision.recover,
      would_replace: explained.wouldReplace.map((w) => ({
        path: paths[w.path],
        reason: w.reason.replace(/<out>/g, options.out),
      })),
      notes,
    };
  } finally {
    await session.close();
  }
}

/** The decided part of one run, under the lock. */
class Run {
  private loaderChecked: MaterializeReport["loaderCheck"] | undefined;

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
    return requestIdentity(source, this.base, this.options);
  }

  async *execute(): AsyncGenerator<MaterializeEvent, Omit<MaterializeReport, "staging">> {
    const { out } = this.options;
    // A publish under --force is followed by the rebuild it asked for: at most two rounds.
    for (let round = 0; round < 3; round++) {
      const { decision, identity } = await decideRequest(this.options, this.base, this.session);
      yield {
        type: "decision",
        action: decision.action,
        recover: "recover" in decision ? decision.recover : [],
      };
      switch (decision.action) {
        case "need-identity":
          throw new Error("the decision needs an identity it was given");
        case "refuse":
          throw refusalOf(decision, this.options);
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
          if (this.options.loaderCheck !== undefined)
            this.notes.push(
              `--loader-check ran no loader: ${out} was already built (${marker.marker.loader_check === undefined ? "its marker records no loader check" : `its marker records the loader check it passed with transformers ${marker.marker.loader_check.transformers_version}`}); --force rebuilds and checks it`,
            );
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
          await assertTiedCopies(opened, plan.tiedAliases).catch((error: unknown) => {
            throw inStage(error, "plan", this.options.out);
          });
          await this.assertRoom(plan);
          await this.recover(decision.recover);
          if (decision.discardStaged) {
            await removeOwnedTree(this.options.staged);
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
      loaderCheck: this.loaderChecked ?? null,
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
    return planWithNotes(this.request, this.options, this.base, opened, this.notes);
  }

  private async recover(steps: readonly Recovery[]): Promise<void> {
    const { out, staged, previous } = this.options;
    for (const step of steps) {
      if (step === "restore-previous") {
        await recoverSwap(this.paths, "undo");
        this.recovered.push(
          `renamed ${previous} back to ${out} (a swap was interrupted between its renames)`,
        );
      } else {
        await removeOwnedTree(staged);
        this.recovered.push(`removed ${staged}, an unfinished build of an earlier run`);
      }
    }
  }

  /**
   * Refuses before anything is touched when the build will not fit: the shards' and the index's
   * sizes follow from the plan, the sidecars' from the base (the old `<out>` stays until the swap).
   */
  private async assertRoom(plan: ConversionPlan): Promise<void> {
    const { staged, out } = this.options;
    const sidecars = this.base.sidecars.reduce((n, f) => n + f.size, 0);
    const needed = plannedShardBytes(plan, this.base.inspection.index!) + sidecars;
    const shortfall = await spaceShortfall(staged, needed);
    if (shortfall !== undefined) {
      throw noSpace(`the build of ${out}: ${describeShortfall(shortfall)}`, staged, "plan");
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
      await OVERLAY_SOURCE.write(join(staged, OVERLAY_SOURCE.fileName), {
        schema: OVERLAY_SOURCE.version,
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
      stage = "loader-check";
      const loaderCheck = yield* this.checkLoaders("the staged build was removed");
      stage = "mark";
      this.lock.assertHeld();
      const marker: MaterializedMarker = {
        schema: MATERIALIZED_MARKER.version,
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
        ...(loaderCheck === undefined ? {} : { loader_check: loaderCheck }),
      };
      await MATERIALIZED_MARKER.write(join(staged, MATERIALIZED_MARKER.fileName), marker);
      await rm(join(staged, OVERLAY_SOURCE.fileName));
      await fsyncDirectory(staged);
      return { marker, report };
    } catch (error) {
      await Promise.allSettled(files.map((f) => f.settled));
      await removeOwnedTree(staged).catch(() => {});
      throw inStage(error, stage, out);
    }
  }

  /**
   * `--loader-check`: the staged tree, complete but for its marker, loaded by transformers in a
   * child process of the given Python. A failure throws MATERIALIZE_LOADER_CHECK_FAILED with the
   * loader's messages; the caller's clean-up decides what happens to the staged tree.
   */
  private async *checkLoaders(
    onFailure: string,
  ): AsyncGenerator<MaterializeEvent, LoaderCheckRecord | undefined> {
    const { loaderCheck: python, staged, out } = this.options;
    if (python === undefined) return undefined;
    yield { type: "loader-check", python };
    const started = performance.now();
    const verdict = await runLoaderCheck(python, staged, this.request.signal);
    if (!verdict.passed) {
      throw new HfConversionError(
        "MATERIALIZE_LOADER_CHECK_FAILED",
        `materialize ${out}: the loader check (${python}) refused the staged build ${staged}: ${verdict.problem}. Nothing was published: ${onFailure}; ${out} is unchanged. Fix the base or the checkpoint, or run without --loader-check.`,
        { kind: "refused", file: staged, stage: "loader-check" },
      );
    }
    this.loaderChecked = { ...verdict.record, seconds: (performance.now() - started) / 1000 };
    return verdict.record;
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
    let marker = await this.recoverStaged();
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
          written: marker.shards,
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
    const loaderCheck = yield* this.checkLoaders(
      "the staged build is kept (it is complete, and may be the only complete one)",
    );
    if (loaderCheck !== undefined) {
      marker = { ...marker, loader_check: loaderCheck };
      await MATERIALIZED_MARKER.write(join(staged, MATERIALIZED_MARKER.fileName), marker);
      await fsyncDirectory(staged);
    }
    this.lock.assertHeld();
    if (finishesSwap) {
      await recoverSwap(this.paths, "finish");
      await removeOwnedTree(previous);
      this.recovered.push(`finished an interrupted swap: ${staged} is now ${out}, ${previous} removed`);
    } else {
      await this.swap(false);
      this.recovered.push(`published the complete staged build ${staged}`);
    }
    return { marker, report };
  }

  /**
   * Re-syncs the sidecars of the complete staged tree a publish inherits (shards and marker
   * untouched), then checks it again with its sidecars; a tree that fails is refused by name and
   * kept.
   */
  private async recoverStaged(): Promise<MaterializedMarker> {
    const { staged, out } = this.options;
    let problem: string | undefined;
    try {
      const repaired = await resyncStagedSidecars(staged, this.base);
      if (repaired.length > 0)
        this.recovered.push(`re-synced the sidecars of ${staged} from the base: ${repaired.join(", ")}`);
    } catch (error) {
      problem = `its sidecars could not be re-synced from the base (${messageOf(error)})`;
    }
    const state = await inspectTree(staged, this.base);
    if (problem === undefined && state.kind === "complete") return state.marker;
    problem ??= state.kind === "incomplete" || state.kind === "foreign" ? state.reason : state.kind;
    const at = await inspectTree(out, this.base);
    const found = at.kind === "incomplete" || at.kind === "foreign" ? `${at.kind}: ${at.reason}` : at.kind;
    throw inStage(
      refusal(
        "MATERIALIZE_STAGED_RECOVERY_FAILED",
        `${staged}, the only complete build, failed its recovery check (${problem}); ${out} is ${found}`,
        "publishing it would have shipped an output that is not intact",
        `Its shards and marker are kept. Fix the cause and re-run the request, or move ${staged} away to rebuild.`,
        { file: staged },
      ),
      "recover",
      out,
    );
  }

  /** `<out>` -> `<out>.previous`, `<out>.tmp` -> `<out>`, `<out>.previous` removed; each step fsynced. */
  private async swap(previousAtSwap: boolean): Promise<void> {
    const { out, previous } = this.options;
    try {
      this.lock.assertHeld();
      if (previousAtSwap) {
        await removeOwnedTree(previous);
        this.recovered.push(`removed ${previous} left by an interrupted swap`);
      }
      await swapIntoPlace(this.paths, removeOwnedTree);
    } catch (error) {
      throw inStage(error, "swap", out);
    }
  }

  /** `<out>` and its two side directories, as @ckpt/manifest's staged directory names them. */
  private get paths(): StagedPaths {
    return { final: this.options.out, staging: this.options.staged, previous: this.options.previous };
  }
}
