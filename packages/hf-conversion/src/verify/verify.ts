import { messageOf } from "@ckpt/errors";
import { createHash } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  type ByteSource,
  compareFileRanges,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  openFileByteSource,
  type RangePair,
} from "@ckpt/manifest";
import { dtypeSize, HF_INDEX_FILE, openSafetensors, type SafetensorsTensorInfo } from "@ckpt/tensors";
import { inspectHfDirectory } from "../check/hf-directory.js";
import { HfConversionError } from "../errors.js";
import { GrowableBuffer, expertBlockBytes, type SourceBytes } from "../convert/assemble.js";
import type { BasePreflight } from "../preflight/base.js";
import { TEMPLATE_DIR } from "../preflight/templates.js";
import type { ConversionPlan, OutputShard, OutputTensor, RuleInstance } from "../plan/mapping.js";
import { elementIndex, groupKey, partHome } from "../plan/rules.js";
import { checkSidecars } from "./sidecars.js";

/**
 * Bytes compared at a time by the probe: small enough that both sides are still in the CPU's
 * cache when compared, large enough to keep the reads few.
 */
const PROBE_CHUNK_BYTES = 1024 * 1024;
/** Experts sampled per rule instance (the first, the last and two drawn from the seed). */
const SAMPLED_EXPERTS = 4;
/** Elements compared per sampled expert matrix part (two corners plus draws). */
const SAMPLED_ELEMENTS = 64;

export interface VerifyReport {
  /** Names of the checks that ran, in order. */
  readonly checks: readonly string[];
  readonly tensorCount: number;
  /** Whether tensors were probed (false under --no-verify). */
  readonly tensorsVerified: boolean;
  /** Bytes of non-expert tensors compared bit for bit with the source. */
  readonly probedBytes: number;
  readonly probedTensors: number;
  /** Expert matrix parts whose layout was checked element by element (sampled). */
  readonly sampledExpertParts: number;
}

export interface VerifyInput {
  readonly dir: string;
  readonly base: BasePreflight;
  readonly plan: ConversionPlan;
  /** The written files (shards and index) with their sizes. */
  readonly written: readonly { readonly path: string; readonly size: number }[];
  /** Source bytes to probe against; undefined skips tensor probing (--no-verify). */
  readonly source: SourceBytes | undefined;
  readonly expectTensors: number;
  readonly minTensors: number;
  /** Probes of copied tensors already started, by shard file (the rest are started here). */
  readonly probes?: ReadonlyMap<string, Promise<ShardProbe>>;
  /** Seeds the expert sampling, so a re-run of the same request samples the same places. */
  readonly seed: string;
}

/** Deterministic draws in [0, 1) from a seed: SHA-256 of the seed and a counter, so a re-run samples the same places. */
function seededDraws(seed: string): () => number {
  let counter = 0;
  return () => createHash("sha256").update(`${seed}:${counter++}`).digest().readUInt32BE(0) / 2 ** 32;
}

/** Reads output tensors through one open source per shard. */
class OutputReader {
  private readonly open = new Map<string, Promise<ByteSource>>();
  constructor(
    private readonly dir: string,
    private readonly located: ReadonlyMap<string, { shard: string; info: SafetensorsTensorInfo }>,
  ) {}

  async read(name: string, start: number, length: number, into: Uint8Array): Promise<Uint8Array> {
    const at = this.located.get(name)!;
    const source = this.open.get(at.shard) ?? openFileByteSource(join(this.dir, ...at.shard.split("/")));
    this.open.set(at.shard, source);
    return (await source).read(at.info.dataOffset + start, length, into);
  }

  async close(): Promise<void> {
    for (const s of this.open.values()) await (await s).close();
  }
}

async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      for (const inner of await readdir(join(dir, entry.name))) out.push(`${entry.name}/${inner}`);
    } else out.push(entry.name);
  }
  return out;
}

/**
 * Verifies a staged output before it is marked: the layout (every shard's header valid and sized,
 * exactly the index's keys, the index's keys and shards those of the base, each tensor's dtype and
 * shape as planned), the written sizes, the tensor count against `expectTensors`/`minTensors`, the
 * copied config and sidecars (byte-identical to the base's, or by rule for unified templates), no
 * stray files; then, unless probing is off, every copied tensor bit for bit against the source and
 * a seeded sample of expert matrices element by element through the layout rules. Throws
 * MATERIALIZE_VERIFY_FAILED naming every problem.
 */
export async function verifyStaged(input: VerifyInput): Promise<VerifyReport> {
  const { dir, base, plan } = input;
  const problems: string[] = [];
  const checks: string[] = [];
  const fail = () => {
    if (problems.length > 0) {
      throw new HfConversionError(
        "MATERIALIZE_VERIFY_FAILED",
        `verify the staged output ${dir}: ${problems.length} problem(s): ${problems.slice(0, 5).join("; ")}${problems.length > 5 ? "; ..." : ""}. Nothing was published.`,
        { kind: "failed", file: dir, problems, stage: "verify" },
      );
    }
  };

  checks.push("layout");
  const layout = await inspectHfDirectory(dir);
  for (const p of layout.problems) problems.push(`${p.file}: ${p.message} [${p.code}]`);
  fail();
  const located = new Map<string, { shard: string; info: SafetensorsTensorInfo }>();
  for (const shard of layout.shardLayouts)
    for (const info of shard.tensors) located.set(info.name, { shard: shard.file, info });
  const baseMap = base.inspection.index!.weightMap;
  const outMap = layout.index!.weightMap;
  if (outMap.size !== baseMap.size)
    problems.push(`the output's index lists ${outMap.size} tensors, the base's ${baseMap.size}`);
  for (const [name, shard] of baseMap) {
    if (outMap.get(name) !== shard)
      problems.push(`index key ${name}: ${outMap.get(name) ?? "missing"}, the base has ${shard}`);
  }
  for (const shard of plan.shards) {
    for (const t of shard.tensors) {
      const found = located.get(t.name)?.info;
      if (!found) continue;
      if (found.dtype !== t.dtype || found.shape.join(",") !== t.shape.join(",")) {
        problems.push(`${t.name} is ${found.dtype} [${found.shape}], planned ${t.dtype} [${t.shape}]`);
      }
    }
  }

  checks.push("inventory");
  const sizes = new Map(layout.shards.map((s) => [s.file, s.size]));
  sizes.set(HF_INDEX_FILE, layout.indexBytes?.length ?? -1);
  for (const entry of input.written) {
    if (sizes.get(entry.path) !== entry.size)
      problems.push(`${entry.path} is ${sizes.get(entry.path)} bytes, written ${entry.size}`);
  }

  checks.push("tensor-count");
  const count = layout.tensorCount;
  if (input.expectTensors > 0 && count !== input.expectTensors)
    problems.push(`${count} tensors, --expect-tensors ${input.expectTensors}`);
  if (count < input.minTensors)
    problems.push(`${count} tensors, fewer than --min-tensors ${input.minTensors}`);

  checks.push("config-and-sidecars");
  problems.push(...(await checkSidecars(dir, base.dir, base.sidecars, { unified: base.unified })));
  const expected = new Set([
    ...input.written.map((w) => w.path),
    ...base.sidecars.map((s) => s.path),
    MATERIALIZED_MARKER.fileName,
    OVERLAY_SOURCE.fileName,
  ]);
  for (const name of await listTree(dir)) {
    if (!expected.has(name) && name !== TEMPLATE_DIR) problems.push(`${name} is not part of the output`);
  }
  fail();

  let probedBytes = 0;
  let probedTensors = 0;
  let sampledExpertParts = 0;
  if (input.source !== undefined) {
    const reader = new OutputReader(dir, located);
    try {
      checks.push("probe-copied-tensors");
      // Shards probed while the next ones were written arrive finished; the others run now.
      const probes = plan.shards.map(
        (shard) => input.probes?.get(shard.file) ?? probeShard(dir, shard, input.source!),
      );
      for (const probe of await Promise.all(probes)) {
        probedBytes += probe.bytes;
        probedTensors += probe.tensors;
        problems.push(...probe.problems);
      }
      checks.push("sample-expert-layouts");
      for (const instance of plan.instances) {
        const random = seededDraws(`${input.seed}:${instance.prefix}`);
        sampledExpertParts += await sampleInstance(instance, input.source, reader, random, problems);
      }
    } catch (error) {
      problems.push(`probing failed: ${messageOf(error)}`);
    } finally {
      await reader.close();
    }
    fail();
  }
  return {
    checks,
    tensorCount: count,
    tensorsVerified: input.source !== undefined,
    probedBytes,
    probedTensors,
    sampledExpertParts,
  };
}

/** What probing one shard's copied tensors found. */
export interface ShardProbe {
  readonly bytes: number;
  readonly tensors: number;
  readonly problems: readonly string[];
}

/**
 * Compares, bit for bit, every tensor of `shard` copied from the checkpoint with the source, the
 * output side read back from the written file through its own header. Can run as soon as the
 * shard is written, while the next ones are. Tensors stored as one range of the source file are
 * compared on a worker thread, file against file; the others (strided views, compressed
 * storages) through the source reader here.
 */
export async function probeShard(dir: string, shard: OutputShard, source: SourceBytes): Promise<ShardProbe> {
  const path = join(dir, ...shard.file.split("/"));
  const file = await openFileByteSource(path);
  const problems: string[] = [];
  let bytes = 0;
  let tensors = 0;
  try {
    const written = await openSafetensors(file);
    const direct: { name: string; pair: RangePair }[] = [];
    const read: { tensor: OutputTensor; source: string; info: SafetensorsTensorInfo }[] = [];
    for (const t of shard.tensors) {
      if (t.recipe.kind !== "copy") continue;
      const info = written.tensor(t.name);
      if (info === undefined) {
        problems.push(`${t.name}: not in ${shard.file}`);
        continue;
      }
      const at = source.file === undefined ? undefined : await source.file.offset(t.recipe.source);
      if (at === undefined) read.push({ tensor: t, source: t.recipe.source, info });
      else direct.push({ name: t.name, pair: { a: at, b: info.dataOffset, length: t.byteLength } });
    }
    if (direct.length > 0) {
      const compared = await compareFileRanges(
        source.file!.path,
        path,
        direct.map((d) => d.pair),
      );
      for (const { index, at } of compared.differing)
        problems.push(`${direct[index]!.name}: byte ${at} differs from the source`);
      bytes += compared.bytes;
      tensors += direct.length;
    }
    const want = new GrowableBuffer();
    const got = new GrowableBuffer();
    for (const { tensor: t, source: name, info } of read) {
      for (let start = 0; start < t.byteLength; start += PROBE_CHUNK_BYTES) {
        const length = Math.min(PROBE_CHUNK_BYTES, t.byteLength - start);
        const [a, b] = await Promise.all([
          source.read(name, start, length, want.view(length)),
          file.read(info.dataOffset + start, length, got.view(length)),
        ]);
        if (Buffer.compare(a, b) !== 0) {
          problems.push(`${t.name}: bytes ${start}..${start + length} differ from the source`);
          break;
        }
        bytes += length;
      }
      tensors++;
    }
  } catch (error) {
    problems.push(`${shard.file}: probing failed: ${messageOf(error)}`);
  } finally {
    await file.close();
  }
  return { bytes, tensors, problems };
}

/** Compares sampled elements of sampled experts of one rule instance; returns the parts checked. */
async function sampleInstance(
  instance: RuleInstance,
  source: SourceBytes,
  output: OutputReader,
  random: () => number,
  problems: string[],
): Promise<number> {
  const experts = new Set([0, instance.experts - 1]);
  while (experts.size < Math.min(SAMPLED_EXPERTS, instance.experts))
    experts.add(Math.floor(random() * instance.experts));
  const elem = dtypeSize(instance.dtype);
  const src = new GrowableBuffer();
  const dst = new GrowableBuffer();
  let parts = 0;
  for (const expert of [...experts].sort((x, y) => x - y)) {
    for (const group of instance.rule.base) {
      const outSize = expertBlockBytes(instance, group);
      const outName = groupKey(group, instance.prefix, expert);
      const outBlock = await output.read(
        outName,
        group.stacked ? expert * outSize : 0,
        outSize,
        dst.view(outSize),
      );
      for (const [dp, part] of group.parts.entries()) {
        const home = partHome(instance.rule.checkpoint, part);
        const inSize = expertBlockBytes(instance, home.group);
        const inName = groupKey(home.group, instance.prefix, expert);
        const inBlock = await source.read(
          inName,
          home.group.stacked ? expert * inSize : 0,
          inSize,
          src.view(inSize),
        );
        const dims = instance.dims.get(part)!;
        const positions: [number, number][] = [
          [0, 0],
          [dims.out - 1, dims.in - 1],
        ];
        for (let k = 0; k < SAMPLED_ELEMENTS; k++)
          positions.push([Math.floor(random() * dims.out), Math.floor(random() * dims.in)]);
        for (const [o, i] of positions) {
          const s = elementIndex(home.group, dims, home.index, o, i) * elem;
          const d = elementIndex(group, dims, dp, o, i) * elem;
          if (Buffer.compare(inBlock.subarray(s, s + elem), outBlock.subarray(d, d + elem)) !== 0) {
            problems.push(
              `${outName} expert ${expert} part ${part} element (${o}, ${i}) differs from ${inName} (rule ${instance.rule.name})`,
            );
            return parts;
          }
        }
        parts++;
      }
    }
  }
  return parts;
}
