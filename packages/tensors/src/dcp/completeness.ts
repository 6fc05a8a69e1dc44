import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { truncateForMessage } from "../torch/text.js";
import { DCP_METADATA_FILE, type DcpMetadata, type DcpTensor, readDcpMetadata } from "./metadata.js";

/** What `dcpCompleteness` finds wrong with a DCP directory, one code per kind of damage. */
export const DCP_COMPLETENESS_CODES = [
  /** Two chunks of a tensor (or two storage entries) have the same offsets. */
  "DCP_CHUNK_DUPLICATE",
  /** Two chunks of a tensor share elements. */
  "DCP_CHUNK_OVERLAP",
  /** Elements of a tensor's global shape lie in no chunk. */
  "DCP_CHUNK_GAP",
  /** A chunk has no storage entry. */
  "DCP_CHUNK_UNSTORED",
  /** A tensor's chunks form more grid cells than ckpt checks (an irregular layout no sharding writes). */
  "DCP_CHUNKS_TOO_MANY",
  /** A file the metadata stores pieces in is absent (or not a regular file). */
  "DCP_FILE_MISSING",
  /** A file is shorter than a piece the metadata places in it. */
  "DCP_FILE_SHORT",
  /** A shard file (`*.distcp`) in the directory that the metadata does not reference. */
  "DCP_FILE_UNEXPECTED",
] as const;
export type DcpCompletenessCode = (typeof DCP_COMPLETENESS_CODES)[number];
/** A completeness code, or the reader's code when `.metadata` itself cannot be read. */
export type DcpProblemCode = DcpCompletenessCode | TensorsErrorCode;

export interface DcpProblem {
  readonly code: DcpProblemCode;
  /** Relative to the checkpoint directory (`.metadata` for a problem of the metadata itself). */
  readonly file: string;
  readonly message: string;
  /** The tensor (or bytes entry) concerned: for a file problem, the first piece it loses. */
  readonly tensor?: string;
  /** That piece's chunk offsets (a bytes entry has none). */
  readonly chunk?: readonly number[];
}

export interface DcpCheckResult {
  readonly ok: boolean;
  readonly problems: readonly DcpProblem[];
  readonly metadata: DcpMetadata | undefined;
}

/** Grid cells one tensor's tiling check may mark (4 bytes each): real layouts have about one per chunk. */
const MAX_TILING_CELLS = 4_194_304;

const shapeText = (dims: readonly number[]) => `[${dims.join(",")}]`;
const volume = (dims: readonly number[]) => dims.reduce((a, d) => a * d, 1);

/** The first of `count` problems of one kind for a tensor; the message says how many there are. */
function counted(count: number): string {
  return count > 1 ? ` (${count} in all)` : "";
}

/** Duplicate, unstored, overlapping and missing chunks of one tensor: at most one problem of each. */
function tensorProblems(tensor: DcpTensor): DcpProblem[] {
  const problems: DcpProblem[] = [];
  const name = truncateForMessage(tensor.fqn);
  const at = (code: DcpCompletenessCode, message: string, chunk?: readonly number[]) =>
    problems.push({
      code,
      file: DCP_METADATA_FILE,
      tensor: tensor.fqn,
      message,
      ...(chunk ? { chunk } : {}),
    });
  const seen = new Set<string>();
  const distinct: DcpTensor["chunks"][number][] = [];
  let duplicates = 0;
  let firstDuplicate: readonly number[] | undefined;
  let unstored = 0;
  let firstUnstored: readonly number[] | undefined;
  for (const chunk of tensor.chunks) {
    const key = chunk.offsets.join(",");
    if (seen.has(key)) {
      duplicates++;
      firstDuplicate ??= chunk.offsets;
      continue;
    }
    seen.add(key);
    distinct.push(chunk);
    if (!chunk.storage) {
      unstored++;
      firstUnstored ??= chunk.offsets;
    }
  }
  if (firstDuplicate) {
    at(
      "DCP_CHUNK_DUPLICATE",
      `chunk ${shapeText(firstDuplicate)} of ${name} is described more than once${counted(duplicates)}`,
      firstDuplicate,
    );
  }
  if (firstUnstored) {
    at(
      "DCP_CHUNK_UNSTORED",
      `chunk ${shapeText(firstUnstored)} of ${name} has no storage entry${counted(unstored)}`,
      firstUnstored,
    );
  }
  const tiling = tilingProblem(tensor, distinct);
  if (tiling) at(tiling.code, tiling.message, tiling.chunk);
  return problems;
}

/**
 * Whether the chunks tile the global shape exactly. The distinct chunk boundaries of each dimension
 * cut the shape into a grid; every chunk covers a box of whole cells, so marking each cell with its
 * chunk finds an overlap (a cell marked twice) and a gap (a cell never marked) exactly, in work
 * bounded by the number of cells.
 */
function tilingProblem(
  tensor: DcpTensor,
  chunks: readonly DcpTensor["chunks"][number][],
): { code: DcpCompletenessCode; message: string; chunk?: readonly number[] } | undefined {
  const { shape } = tensor;
  const name = truncateForMessage(tensor.fqn);
  if (volume(shape) === 0) return undefined;
  const filled = chunks.filter((c) => volume(c.sizes) > 0);
  const cuts = shape.map((extent, d) => {
    const points = new Set([0, extent]);
    for (const c of filled) points.add(c.offsets[d]!).add(c.offsets[d]! + c.sizes[d]!);
    return [...points].sort((a, b) => a - b);
  });
  const cells = cuts.reduce((a, c) => a * (c.length - 1), 1);
  if (cells > MAX_TILING_CELLS) {
    return {
      code: "DCP_CHUNKS_TOO_MANY",
      message: `the ${filled.length} chunks of ${name} cut its shape ${shapeText(shape)} into ${cells} cells; ckpt checks at most ${MAX_TILING_CELLS}`,
    };
  }
  const index = cuts.map((c) => new Map(c.map((point, i) => [point, i])));
  const strides = cuts.map((_, d) => cuts.slice(d + 1).reduce((a, c) => a * (c.length - 1), 1));
  const owner = new Uint32Array(cells);
  for (let n = 0; n < filled.length; n++) {
    const { offsets, sizes } = filled[n]!;
    const lo = offsets.map((o, d) => index[d]!.get(o)!);
    const hi = offsets.map((o, d) => index[d]!.get(o + sizes[d]!)!);
    const at = [...lo];
    for (;;) {
      const cell = at.reduce((a, i, d) => a + i * strides[d]!, 0);
      const other = owner[cell]!;
      if (other !== 0) {
        const first = filled[other - 1]!;
        return {
          code: "DCP_CHUNK_OVERLAP",
          message: `chunks ${shapeText(first.offsets)} (size ${shapeText(first.sizes)}) and ${shapeText(offsets)} (size ${shapeText(sizes)}) of ${name} overlap at element ${shapeText(at.map((i, d) => cuts[d]![i]!))}`,
          chunk: offsets,
        };
      }
      owner[cell] = n + 1;
      // Odometer over the box [lo, hi): the last dimension turns fastest.
      let d = at.length - 1;
      while (d >= 0 && ++at[d]! === hi[d]!) at[d] = lo[d--]!;
      if (d < 0) break;
    }
  }
  const gap = owner.indexOf(0);
  if (gap < 0) return undefined;
  let missing = 0;
  for (let cell = 0; cell < cells; cell++) {
    if (owner[cell] !== 0) continue;
    missing += cuts.reduce((a, c, d) => {
      const i = Math.floor(cell / strides[d]!) % (c.length - 1);
      return a * (c[i + 1]! - c[i]!);
    }, 1);
  }
  const corner = cuts.map((c, d) => c[Math.floor(gap / strides[d]!) % (c.length - 1)]!);
  const extent = cuts.map((c, d) => {
    const i = Math.floor(gap / strides[d]!) % (c.length - 1);
    return c[i + 1]! - c[i]!;
  });
  return {
    code: "DCP_CHUNK_GAP",
    message: `${missing} of the ${volume(shape)} elements of ${name} ${shapeText(shape)} are in no chunk; the first gap starts at ${shapeText(corner)} (size ${shapeText(extent)})`,
  };
}

/** How a stored piece is named in a problem: a tensor chunk by its offsets, else a bytes entry. */
function pieceName(piece: DcpMetadata["storage"][number]): string {
  const name = truncateForMessage(piece.fqn);
  return piece.chunkOffsets ? `chunk ${shapeText(piece.chunkOffsets)} of ${name}` : `bytes entry ${name}`;
}

function pieceFields(piece: DcpMetadata["storage"][number] | undefined) {
  if (!piece) return {};
  return { tensor: piece.fqn, ...(piece.chunkOffsets ? { chunk: piece.chunkOffsets } : {}) };
}

/**
 * Proves, from parsed `.metadata` and the observed sizes of the directory's regular files (relative
 * path -> bytes; a referenced path absent from `sizes` is missing), that a DCP load finds every
 * piece: each tensor's chunks are distinct, stored, and tile its global shape exactly (no gap, no
 * overlap); each storage entry is described once; each file exists and holds `offset + length`
 * bytes of every piece in it; no `*.distcp` shard lies there unreferenced. Pure: decides, reads
 * nothing. Problems come in metadata order, at most one of each kind per tensor, each file problem
 * naming the first piece the file loses.
 */
export function dcpCompleteness(metadata: DcpMetadata, sizes: ReadonlyMap<string, number>): DcpProblem[] {
  const problems = metadata.tensors.flatMap(tensorProblems);
  const described = new Set<string>();
  for (const piece of metadata.storage) {
    const key = `${piece.fqn}\u0000${piece.chunkOffsets?.join(",") ?? ""}`;
    if (!described.has(key)) {
      described.add(key);
      continue;
    }
    problems.push({
      code: "DCP_CHUNK_DUPLICATE",
      file: DCP_METADATA_FILE,
      message: `storage_data describes ${pieceName(piece)} more than once`,
      ...pieceFields(piece),
    });
    break;
  }
  // Pieces in metadata order (tensors and their chunks, then bytes entries), so a file problem names
  // the first chunk a load would miss; storage entries of no listed entry come last.
  const ordered: DcpMetadata["storage"][number][] = [
    ...metadata.tensors.flatMap((t) =>
      t.chunks.flatMap((c) => (c.storage ? [{ ...c.storage, fqn: t.fqn, chunkOffsets: c.offsets }] : [])),
    ),
    ...metadata.bytes.flatMap((b) =>
      b.storage ? [{ ...b.storage, fqn: b.fqn, chunkOffsets: undefined }] : [],
    ),
    ...metadata.storage,
  ];
  const piecesByFile = new Map<string, DcpMetadata["storage"][number][]>();
  for (const piece of ordered) {
    const list = piecesByFile.get(piece.relativePath);
    if (list) list.push(piece);
    else piecesByFile.set(piece.relativePath, [piece]);
  }
  for (const { relativePath, requiredLength } of metadata.files) {
    const size = sizes.get(relativePath);
    const pieces = piecesByFile.get(relativePath)!;
    if (size === undefined) {
      problems.push({
        code: "DCP_FILE_MISSING",
        file: relativePath,
        message: `${relativePath} is missing; a load needs it first for ${pieceName(pieces[0]!)}`,
        ...pieceFields(pieces[0]),
      });
    } else if (size < requiredLength) {
      const first = pieces.find((p) => p.offset + p.length > size)!;
      problems.push({
        code: "DCP_FILE_SHORT",
        file: relativePath,
        message: `${relativePath} is ${size} bytes; the metadata needs ${requiredLength}: the first piece past its end is ${pieceName(first)} at bytes ${first.offset}..${first.offset + first.length}`,
        ...pieceFields(first),
      });
    }
  }
  const referenced = new Set(metadata.files.map((f) => f.relativePath));
  for (const path of [...sizes.keys()].sort()) {
    if (referenced.has(path) || !path.endsWith(".distcp")) continue;
    problems.push({
      code: "DCP_FILE_UNEXPECTED",
      file: path,
      message: `${path} is a shard file the metadata does not reference (left by another save?)`,
    });
  }
  return problems;
}

/** Regular-file sizes of the files the metadata references and of any other `*.distcp` beside it. */
export async function observeDcpSizes(dir: string, metadata: DcpMetadata): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  const names = new Set(metadata.files.map((f) => f.relativePath));
  for (const entry of await readdir(dir, { withFileTypes: true }))
    if (entry.isFile() && entry.name.endsWith(".distcp")) names.add(entry.name);
  for (const name of names) {
    const info = await stat(join(dir, name)).catch(() => undefined);
    if (info?.isFile()) sizes.set(name, info.size);
  }
  return sizes;
}

/**
 * Proves a DCP directory complete (`dcpCompleteness` over its `.metadata` and the sizes of its
 * files). Unreadable metadata is a problem too (its TensorsError code), not a throw. Storage paths
 * are checked safe while the metadata is parsed, before any file is touched.
 */
export async function checkDcpDirectory(dir: string): Promise<DcpCheckResult> {
  let metadata: DcpMetadata;
  try {
    metadata = await readDcpMetadata(dir);
  } catch (error) {
    if (!(error instanceof TensorsError)) throw error;
    return {
      ok: false,
      problems: [{ code: error.code, file: DCP_METADATA_FILE, message: error.message }],
      metadata: undefined,
    };
  }
  const problems = dcpCompleteness(metadata, await observeDcpSizes(dir, metadata));
  return { ok: problems.length === 0, problems, metadata };
}
