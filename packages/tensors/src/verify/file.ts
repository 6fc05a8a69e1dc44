import { messageOf } from "@ckpt/errors";
import { basename } from "node:path";
import { type ByteSource, openFileByteSource } from "@ckpt/manifest";
import { checkDcpDirectory, DCP_COMPLETENESS_CODES } from "../dcp/completeness.js";
import { TensorsError } from "../errors.js";
import { readSafetensorsHeader } from "../safetensors/reader.js";
import {
  isLegacyTorchFile,
  LEGACY_HEAD_BYTES,
  looksLikeTorchFile,
  openTorchFile,
  type TorchFile,
} from "../torch/reader.js";
import { truncateForMessage } from "../torch/text.js";
import { readAheadSource } from "../torch/zip/read-ahead.js";
import { openZip, readAt, type ZipArchive } from "../torch/zip/reader.js";
import { type FloatDType, isFloatDType, NonFiniteCounter } from "./finite.js";
import type { TensorProblem } from "./problems.js";

export type TensorFileFormat = "safetensors" | "torch";

export interface VerifyTensorFileOptions {
  /** Read every floating tensor and report NaN/±Inf (`TENSOR_NOT_FINITE`), one tensor at a time. */
  readonly finite?: boolean;
  /** Read every byte of a torch.save zip and check each member's CRC-32 (`FILE_CRC_MISMATCH`). */
  readonly crc?: boolean;
  /** The format when the caller knows it (a component named `model.pt`); default: by name, then by signature. */
  readonly format?: TensorFileFormat;
  /** Name used in problems and messages (default: the file's base name). */
  readonly label?: string;
  readonly onProgress?: (event: { path: string; doneBytes: number; totalBytes: number }) => void;
  readonly signal?: AbortSignal;
}

/** What a tensor file holds and what is wrong with it. */
export interface TensorFileReport {
  readonly path: string;
  readonly format: TensorFileFormat;
  readonly size: number;
  /** Tensors listed; undefined when the file could not be listed (see problems and notes). */
  readonly tensors: number | undefined;
  /** Floating tensors read by the finite scan, and their bytes. */
  readonly scannedTensors: number;
  readonly scannedBytes: number;
  readonly problems: readonly TensorProblem[];
  /** What was not checked, and why (never a problem). */
  readonly notes: readonly string[];
}

/** Positioned reads per step of a scan: large enough to amortise the call, small enough to keep memory flat. */
const SCAN_CHUNK_BYTES = 8 * 1024 * 1024;

function causeOf(error: unknown): string | undefined {
  return error instanceof TensorsError ? error.code : (error as { code?: string } | undefined)?.code;
}

function unreadable(label: string, error: unknown): TensorProblem {
  const cause = causeOf(error);
  return {
    code: "FILE_UNREADABLE",
    path: label,
    message: `${label}: ${messageOf(error)}`,
    ...(cause === undefined ? {} : { cause }),
  };
}

function notFinite(
  label: string,
  tensor: string,
  dtype: FloatDType,
  counter: NonFiniteCounter,
): TensorProblem | undefined {
  const { nan, posInf, negInf, firstIndex, elements } = counter.result();
  if (nan + posInf + negInf === 0) return undefined;
  const parts = [
    nan > 0 ? `${nan} NaN` : "",
    posInf > 0 ? `${posInf} +Inf` : "",
    negInf > 0 ? `${negInf} -Inf` : "",
  ].filter((p) => p !== "");
  return {
    code: "TENSOR_NOT_FINITE",
    path: label,
    tensor,
    message: `${label}: tensor ${truncateForMessage(tensor)} (${dtype}, ${elements} elements) holds ${parts.join(", ")}; the first at element ${firstIndex}`,
  };
}

/** The format a name or the first bytes say: `.safetensors` by name, torch.save by its zip or legacy signature. */
async function detectFormat(path: string, source: ByteSource): Promise<TensorFileFormat | undefined> {
  if (path.endsWith(".safetensors")) return "safetensors";
  if (looksLikeTorchFile(await source.read(0, Math.min(LEGACY_HEAD_BYTES, source.size)))) return "torch";
  if (/\.(pt|pth|bin)$/.test(path)) return "torch";
  return undefined;
}

async function openSource(path: string): Promise<ByteSource> {
  try {
    return await openFileByteSource(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TensorsError(
      code === "ENOENT" ? "INSPECT_NOT_FOUND" : "INSPECT_UNREADABLE",
      `verify ${path}: ${code === "ENOENT" ? "no such file" : messageOf(error)}. Check the path.`,
      { kind: code === "ENOENT" ? "input" : "failed", file: path, cause: error },
    );
  }
}

interface ScanState {
  done: number;
  total: number;
  readonly label: string;
  readonly options: VerifyTensorFileOptions;
}

function advance(state: ScanState, bytes: number): void {
  state.done += bytes;
  state.options.onProgress?.({ path: state.label, doneBytes: state.done, totalBytes: state.total });
  if (state.options.signal?.aborted) {
    throw new TensorsError("FILE_VERIFY_ABORTED", `verify ${state.label}: aborted`, { kind: "failed" });
  }
}

interface ScanTarget {
  readonly name: string;
  readonly dtype: FloatDType;
  readonly byteLength: number;
  /** The tensor's bytes in row-major order, in pieces of at most SCAN_CHUNK_BYTES. */
  pieces(): AsyncIterable<Uint8Array>;
}

interface FileCounts {
  readonly tensors: number | undefined;
  readonly scannedTensors: number;
  readonly scannedBytes: number;
}

const NOT_LISTED: FileCounts = { tensors: undefined, scannedTensors: 0, scannedBytes: 0 };

/** Checks one format's structure (and scans, as asked), pushing what is wrong. */
type FormatVerifier = (
  source: ByteSource,
  state: ScanState,
  problems: TensorProblem[],
  notes: string[],
) => Promise<FileCounts>;

/** Streams each tensor through a NonFiniteCounter in bounded pieces; a read failure ends the scan as FILE_UNREADABLE. */
async function scanTensors(
  targets: readonly ScanTarget[],
  state: ScanState,
  problems: TensorProblem[],
): Promise<{ scannedTensors: number; scannedBytes: number }> {
  const { label } = state;
  state.total += targets.reduce((sum, t) => sum + t.byteLength, 0);
  let scannedTensors = 0;
  let scannedBytes = 0;
  for (const t of targets) {
    const counter = new NonFiniteCounter(t.dtype);
    try {
      for await (const piece of t.pieces()) {
        counter.update(piece);
        scannedBytes += piece.length;
        advance(state, piece.length);
      }
    } catch (error) {
      if (error instanceof TensorsError && error.code === "FILE_VERIFY_ABORTED") throw error;
      problems.push({ ...unreadable(label, error), tensor: t.name });
      return { scannedTensors, scannedBytes };
    }
    scannedTensors++;
    const problem = notFinite(label, t.name, t.dtype, counter);
    if (problem) problems.push(problem);
  }
  return { scannedTensors, scannedBytes };
}

const verifySafetensors: FormatVerifier = async (source, state, problems, notes) => {
  const { label, options } = state;
  let header: Awaited<ReturnType<typeof readSafetensorsHeader>>;
  try {
    header = await readSafetensorsHeader(source);
  } catch (error) {
    problems.push(unreadable(label, error));
    return NOT_LISTED;
  }
  if (options.crc)
    notes.push(`${label}: safetensors carries no checksum; only its header and offsets were checked`);
  if (!options.finite) return { tensors: header.tensors.length, scannedTensors: 0, scannedBytes: 0 };
  const floats = header.tensors.filter((t) => isFloatDType(t.dtype));
  const scanned = await scanTensors(
    floats.map((t) => ({
      name: t.name,
      dtype: t.dtype as FloatDType,
      byteLength: t.byteLength,
      pieces: () => rangePieces(source, t.dataOffset, t.byteLength),
    })),
    state,
    problems,
  );
  return { tensors: header.tensors.length, ...scanned };
};

async function* rangePieces(source: ByteSource, offset: number, length: number): AsyncGenerator<Uint8Array> {
  const buffer = new Uint8Array(Math.max(1, Math.min(SCAN_CHUNK_BYTES, length)));
  for (let at = 0; at < length; ) {
    const n = Math.min(buffer.length, length - at);
    yield await readAt(source, offset + at, n, buffer);
    at += n;
  }
}

/** Streams every member through CRC-32 (a deflated one through the inflater), in bounded pieces. */
async function checkZipCrcs(
  zip: ZipArchive,
  torch: TorchFile | undefined,
  state: ScanState,
  problems: TensorProblem[],
): Promise<void> {
  const { label } = state;
  state.total += zip.members.reduce((sum, m) => sum + m.size, 0);
  // Tensors by member, built once: looking them up per member grew with members × tensors.
  const users = new Map<string, string[]>();
  for (const t of torch?.tensors ?? []) {
    const name = `${torch!.prefix}/data/${t.storageKey}`;
    const list = users.get(name);
    if (list) list.push(t.name);
    else users.set(name, [t.name]);
  }
  for (const member of zip.members) {
    const tensors = users.get(member.name) ?? [];
    try {
      for await (const piece of zip.memberPieces(member, SCAN_CHUNK_BYTES)) advance(state, piece.length);
    } catch (error) {
      if (error instanceof TensorsError && error.code === "FILE_VERIFY_ABORTED") throw error;
      if (causeOf(error) !== "ZIP_CRC_MISMATCH") {
        problems.push(unreadable(label, error));
        continue;
      }
      const more = tensors.length > 1 ? ` and ${tensors.length - 1} more` : "";
      problems.push({
        code: "FILE_CRC_MISMATCH",
        path: label,
        message: `${label}: member ${truncateForMessage(member.name)}${tensors[0] === undefined ? "" : ` (tensor ${truncateForMessage(tensors[0])}${more})`} fails its CRC-32: its bytes changed after it was written`,
        ...(tensors[0] === undefined ? {} : { tensor: tensors[0] }),
      });
    }
  }
}

const verifyTorch: FormatVerifier = async (source, state, problems, notes) => {
  const { label, options } = state;
  let zip: ZipArchive;
  try {
    zip = await openZip(source);
  } catch (error) {
    // A legacy (non-zip) torch file has no zip to open: openTorchFile names its format.
    const head = await readAt(source, 0, Math.min(LEGACY_HEAD_BYTES, source.size));
    const named = isLegacyTorchFile(head) ? await openTorchFile(source).catch((e: unknown) => e) : error;
    problems.push(unreadable(label, named));
    return NOT_LISTED;
  }
  let torch: TorchFile | undefined;
  try {
    torch = await openTorchFile(source);
  } catch (error) {
    // A pickle naming Python objects outside the allow-list (numpy RNG state, custom classes) is
    // a sound file ckpt does not unpickle: its zip structure was checked, its tensors are not listed.
    if (error instanceof TensorsError && error.kind === "refused") {
      notes.push(`${label}: ${messageOf(error)}; its tensors were not listed or scanned`);
    } else {
      problems.push(unreadable(label, error));
      return NOT_LISTED;
    }
  }
  if (options.crc) await checkZipCrcs(zip, torch, state, problems);
  if (!options.finite || torch === undefined) {
    return { tensors: torch?.tensors.length, scannedTensors: 0, scannedBytes: 0 };
  }
  const opened = torch;
  const floats = opened.tensors.filter((t) => isFloatDType(t.dtype));
  const scanned = await scanTensors(
    floats.map((t) => ({
      name: t.name,
      dtype: t.dtype as FloatDType,
      byteLength: t.byteLength,
      pieces: () => opened.tensorPieces(t, SCAN_CHUNK_BYTES),
    })),
    state,
    problems,
  );
  return { tensors: torch.tensors.length, ...scanned };
};

/**
 * Judges one `.safetensors` or torch.save file: its header (safetensors) or zip directory and
 * pickle (torch) must read; with `crc` every zip member's CRC-32 is checked, with `finite` every
 * floating tensor is scanned for NaN/±Inf, streaming (bounded chunks, one tensor at a time). What
 * is wrong is returned as problems, never thrown; a missing path or a file of no tensor format is
 * unusable input (`INSPECT_NOT_FOUND`, `INSPECT_UNKNOWN_FORMAT`, kind `input`).
 */
export async function verifyTensorFile(
  path: string,
  options: VerifyTensorFileOptions = {},
): Promise<TensorFileReport> {
  const label = options.label ?? basename(path);
  const source = await openSource(path);
  try {
    const format = options.format ?? (await detectFormat(path, source));
    if (format === undefined) {
      throw new TensorsError(
        "INSPECT_UNKNOWN_FORMAT",
        `verify ${path}: not a .safetensors file or a torch.save file. Point at a checkpoint file or directory.`,
        { kind: "input", file: path },
      );
    }
    const problems: TensorProblem[] = [];
    const notes: string[] = [];
    const state: ScanState = { done: 0, total: 0, label, options };
    const counts =
      format === "safetensors"
        ? await verifySafetensors(source, state, problems, notes)
        : await verifyTorch(readAheadSource(source), state, problems, notes);
    return { path, format, size: source.size, ...counts, problems, notes };
  } finally {
    await source.close();
  }
}

/** What a DCP directory check found, in the verifiers' closed vocabulary. */
export interface DcpDirectoryReport {
  readonly path: string;
  /** Tensors and storage files the `.metadata` lists (0 when it cannot be read). */
  readonly tensors: number;
  readonly files: number;
  readonly problems: readonly TensorProblem[];
}

/**
 * `checkDcpDirectory` with its problems mapped onto the closed set: an unreadable or missing
 * `.metadata` is `DCP_METADATA_UNREADABLE` (its own code in `cause`). Paths are prefixed with
 * `label` (e.g. `optim/`), so a caller can report them relative to a checkpoint.
 */
export async function verifyDcpDirectory(dir: string, label = ""): Promise<DcpDirectoryReport> {
  const result = await checkDcpDirectory(dir);
  const known = new Set<string>(DCP_COMPLETENESS_CODES);
  const name = label.replace(/\/$/, "");
  const prefix = name === "" ? "" : `${name}/`;
  return {
    path: dir,
    tensors: result.metadata?.tensors.length ?? 0,
    files: result.metadata?.files.length ?? 0,
    problems: result.problems.map(({ code, file, message, tensor, chunk }): TensorProblem => {
      const path = `${prefix}${file}`;
      if (!known.has(code)) return { code: "DCP_METADATA_UNREADABLE", path, message, cause: code };
      return {
        code: code as TensorProblem["code"],
        path,
        message: name === "" ? message : `${name}: ${message}`,
        ...(tensor === undefined ? {} : { tensor }),
        ...(chunk === undefined ? {} : { chunk }),
      };
    }),
  };
}
