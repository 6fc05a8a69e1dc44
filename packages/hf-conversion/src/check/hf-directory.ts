import { describeRefusal, messageOf, openRegularFile, readRegularFile } from "@ckpt/errors";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { fileHandleByteSource, parseStrictJson } from "@ckpt/manifest";
import {
  HEADER_LENGTH_BYTES,
  HF_INDEX_FILE,
  HF_SINGLE_FILE,
  MAX_INDEX_BYTES,
  parseSafetensorsHeader,
  parseSafetensorsIndex,
  readHeaderLength,
  type SafetensorsIndex,
  type SafetensorsTensorInfo,
  TensorsError,
} from "@ckpt/tensors";
import { quote } from "../errors.js";

/**
 * The closed set of problems `checkHfDirectory` reports. Stable: callers (`ckpt verify`, the
 * materializer's preflight and verification) branch on them.
 */
export type HfDirectoryProblemCode =
  /** Neither `model.safetensors.index.json` nor `model.safetensors` is there. */
  | "HF_INDEX_MISSING"
  /** The index cannot be read, is too large, is not strict UTF-8 JSON (a BOM included) or not an object. */
  | "HF_INDEX_INVALID"
  /** `weight_map` is missing, empty, not an object of tensor name -> shard, or names an unsafe shard path. */
  | "HF_WEIGHT_MAP_INVALID"
  /** A shard the index lists does not exist. */
  | "HF_SHARD_MISSING"
  /** A shard exists but cannot be opened or is not a regular file. */
  | "HF_SHARD_UNREADABLE"
  /** A shard's safetensors header is invalid, or its size is not 8 + header + data. */
  | "HF_HEADER_INVALID"
  /** A shard's header keys are not exactly the keys the index places in it. */
  | "HF_KEYS_MISMATCH";

export const HF_DIRECTORY_PROBLEM_CODES: readonly HfDirectoryProblemCode[] = [
  "HF_INDEX_MISSING",
  "HF_INDEX_INVALID",
  "HF_WEIGHT_MAP_INVALID",
  "HF_SHARD_MISSING",
  "HF_SHARD_UNREADABLE",
  "HF_HEADER_INVALID",
  "HF_KEYS_MISMATCH",
];

export interface HfDirectoryProblem {
  readonly code: HfDirectoryProblemCode;
  /** The file it is about, relative to the directory. */
  readonly file: string;
  readonly message: string;
}

/** One shard as found on disk. */
export interface HfShardReport {
  readonly file: string;
  readonly size: number;
  readonly tensorCount: number;
}

/** What `checkHfDirectory` found: `ok` when `problems` is empty. */
export interface HfDirectoryReport {
  readonly dir: string;
  readonly ok: boolean;
  /** `sharded`: an index and its shards; `single`: one `model.safetensors`; `none`: neither. */
  readonly layout: "sharded" | "single" | "none";
  /** Tensors the index lists (sharded) or the single file holds. */
  readonly tensorCount: number;
  /** Every shard whose header was read, by file name. */
  readonly shards: readonly HfShardReport[];
  readonly problems: readonly HfDirectoryProblem[];
}

/** A shard with everything the converter needs from its header. */
export interface HfShardLayout extends HfShardReport {
  /** SHA-256 of the 8-byte length and the header bytes: the shard's layout identity. */
  readonly headerSha256: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** The shard's tensors in data order. */
  readonly tensors: readonly SafetensorsTensorInfo[];
}

/** `checkHfDirectory`'s report plus the parsed index and headers (internal). */
export interface HfDirectoryInspection extends HfDirectoryReport {
  readonly index: SafetensorsIndex | undefined;
  readonly indexBytes: Uint8Array | undefined;
  readonly shardLayouts: readonly HfShardLayout[];
}

/** Longest header accepted here is the tensors package's cap; the prefix is 8 bytes. */
async function readShard(
  path: string,
  file: string,
): Promise<{ layout?: HfShardLayout; problem?: HfDirectoryProblem }> {
  // The shared guarded open: a FIFO or device planted under a shard name is refused, never waited on.
  const opened = await openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER });
  if (!opened.ok) {
    const missing = opened.reason === "missing";
    return {
      problem: {
        code: missing ? "HF_SHARD_MISSING" : "HF_SHARD_UNREADABLE",
        file,
        message: missing
          ? `shard ${quote(file)} listed by the index does not exist`
          : `shard ${quote(file)}: ${describeRefusal(opened)}`,
      },
    };
  }
  const { handle, size } = opened;
  try {
    const source = fileHandleByteSource(handle, path, size);
    try {
      const prefix =
        size >= HEADER_LENGTH_BYTES ? await source.read(0, HEADER_LENGTH_BYTES) : new Uint8Array(size);
      const length = readHeaderLength(prefix, size, path);
      const headerBytes = await source.read(HEADER_LENGTH_BYTES, length);
      const header = parseSafetensorsHeader(headerBytes, { file: path, fileSize: size });
      const headerSha256 = createHash("sha256").update(prefix).update(headerBytes).digest("hex");
      return {
        layout: {
          file,
          size,
          tensorCount: header.tensors.length,
          headerSha256,
          metadata: header.metadata,
          tensors: header.tensors,
        },
      };
    } catch (error) {
      if (error instanceof TensorsError || error instanceof RangeError) {
        return { problem: { code: "HF_HEADER_INVALID", file, message: messageOf(error) } };
      }
      return { problem: { code: "HF_SHARD_UNREADABLE", file, message: messageOf(error) } };
    }
  } finally {
    await handle.close();
  }
}

function isNonEmptyNameMap(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length > 0 &&
    Object.values(value).every((v) => typeof v === "string")
  );
}

/** Reads and classifies the index: a parsed index, or the problem that stops the check. */
async function readIndex(
  dir: string,
): Promise<{ index?: SafetensorsIndex; bytes?: Uint8Array; problem?: HfDirectoryProblem; absent?: boolean }> {
  const path = join(dir, HF_INDEX_FILE);
  const file = HF_INDEX_FILE;
  const read = await readRegularFile(path, { maxBytes: MAX_INDEX_BYTES });
  if (!read.ok) {
    if (read.reason === "missing") return { absent: true };
    return { problem: { code: "HF_INDEX_INVALID", file, message: describeRefusal(read) } };
  }
  const { bytes } = read;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { problem: { code: "HF_INDEX_INVALID", file, message: "the index is not valid UTF-8" } };
  }
  try {
    return { index: parseSafetensorsIndex(text, { file: path }), bytes };
  } catch (error) {
    if (!(error instanceof TensorsError)) throw error;
    // Tell a broken document from a document whose weight_map is wrong.
    let code: HfDirectoryProblemCode = "HF_INDEX_INVALID";
    if (error.code === "HF_INDEX_UNSAFE_SHARD_NAME" || error.code === "HF_INDEX_TOO_MANY_SHARDS") {
      code = "HF_WEIGHT_MAP_INVALID";
    } else if (error.code === "HF_INDEX_INVALID") {
      try {
        const root = parseStrictJson(text, { name: path }) as Record<string, unknown>;
        if (typeof root === "object" && root !== null && !isNonEmptyNameMap(root.weight_map))
          code = "HF_WEIGHT_MAP_INVALID";
      } catch {
        // parseSafetensorsIndex already judged the document; keep HF_INDEX_INVALID.
      }
    }
    return { problem: { code, file, message: error.message } };
  }
}

function listNames(names: readonly string[], limit = 5): string {
  const shown = names.slice(0, limit).map((n) => quote(n, 80));
  return names.length > limit ? `${shown.join(", ")} and ${names.length - limit} more` : shown.join(", ");
}

/** Internal form of {@link checkHfDirectory}: the report plus the parsed index and shard headers. */
export async function inspectHfDirectory(dir: string): Promise<HfDirectoryInspection> {
  const problems: HfDirectoryProblem[] = [];
  const shardLayouts: HfShardLayout[] = [];
  const read = await readIndex(dir);
  const finish = (
    layout: HfDirectoryReport["layout"],
    tensorCount: number,
    index?: SafetensorsIndex,
  ): HfDirectoryInspection => ({
    dir,
    ok: problems.length === 0,
    layout,
    tensorCount,
    shards: shardLayouts.map(({ file, size, tensorCount: n }) => ({ file, size, tensorCount: n })),
    problems,
    index,
    indexBytes: read.bytes,
    shardLayouts,
  });
  if (read.problem) {
    problems.push(read.problem);
    return finish("sharded", 0);
  }
  if (read.absent) {
    const single = await readShard(join(dir, HF_SINGLE_FILE), HF_SINGLE_FILE);
    if (single.problem?.code === "HF_SHARD_MISSING") {
      problems.push({
        code: "HF_INDEX_MISSING",
        file: HF_INDEX_FILE,
        message: `neither ${HF_INDEX_FILE} nor ${HF_SINGLE_FILE} is there`,
      });
      return finish("none", 0);
    }
    if (single.problem) problems.push(single.problem);
    if (single.layout) shardLayouts.push(single.layout);
    return finish("single", single.layout?.tensorCount ?? 0);
  }
  const index = read.index!;
  const expected = new Map<string, string[]>();
  for (const [name, shard] of index.weightMap) {
    const list = expected.get(shard);
    if (list) list.push(name);
    else expected.set(shard, [name]);
  }
  // Shard names carry their order (model-0000k-of-0000n); the index lists tensors, not shards.
  for (const shard of [...index.shards].sort()) {
    const result = await readShard(join(dir, ...shard.split("/")), shard);
    if (result.problem) {
      problems.push(result.problem);
      continue;
    }
    const layout = result.layout!;
    shardLayouts.push(layout);
    const want = new Set(expected.get(shard));
    const have = new Set(layout.tensors.map((t) => t.name));
    const extra = [...have].filter((n) => !want.has(n));
    const missing = [...want].filter((n) => !have.has(n));
    if (extra.length > 0 || missing.length > 0) {
      const parts = [
        missing.length > 0 ? `lacks ${listNames(missing)}, which the index places there` : "",
        extra.length > 0 ? `holds ${listNames(extra)}, which the index does not place there` : "",
      ].filter((p) => p !== "");
      problems.push({
        code: "HF_KEYS_MISMATCH",
        file: shard,
        message: `shard ${quote(shard)} ${parts.join(" and ")}`,
      });
    }
  }
  return finish("sharded", index.weightMap.size, index);
}

/**
 * Checks a Hugging Face weights directory without reading tensor data: the index (strict UTF-8
 * JSON object with a non-empty `weight_map` of tensor name -> safe shard name), every shard it
 * lists (present, a regular file, a valid safetensors header whose size is 8 + header + data) and
 * that each shard's header holds exactly the keys the index places in it. A directory without an
 * index is checked as a single `model.safetensors`. Problems are collected, never thrown, with
 * codes from the closed set {@link HfDirectoryProblemCode}.
 */
export async function checkHfDirectory(dir: string): Promise<HfDirectoryReport> {
  const { dir: d, ok, layout, tensorCount, shards, problems } = await inspectHfDirectory(dir);
  return { dir: d, ok, layout, tensorCount, shards, problems };
}
