import { constants as bufferConstants } from "node:buffer";
import type { ByteSource } from "@ckpt/manifest";
import { dtypeSize, type TensorInfo } from "../dtypes.js";
import { TensorsError, type TensorsErrorCode } from "../errors.js";
import { MAX_PICKLE_BYTES, unpickle } from "./pickle/unpickler.js";
import { PickleDict, PickleFloat, PickleTuple } from "./pickle/values.js";
import { torchPolicy } from "./tensor-policy.js";
import { type TorchStorageRef, TorchTensor } from "./torch-tensor.js";
import { spanBytes, stridedPieces } from "./strided.js";
import { truncateForMessage } from "./text.js";
import { openZip, readAt, type ZipArchive, type ZipMember } from "./zip/reader.js";

/** Depth of nested containers walked when naming tensors; real checkpoints nest < 10. */
const MAX_TREE_DEPTH = 256;
/** Containers visited when naming tensors (real files: about one per module); a shared sub-list referenced twice per level would explode. */
const MAX_TREE_NODES = 2_000_000;
/** `version` and `byteorder` records are a few bytes. */
const MAX_SMALL_RECORD_BYTES = 64;
/** torch writes format version 3; versions 1..MAX_TORCH_FORMAT_VERSION use the same layout. */
const MAX_TORCH_FORMAT_VERSION = 10;

/** Bytes per piece a tensor streams in: large enough to amortise a read, small enough to keep memory flat. */
const TENSOR_PIECE_BYTES = 8 * 1024 * 1024;
/** Storage bytes a strided view reads at once (a view spanning less is read once; a larger one in windows). */
const STRIDED_WINDOW_BYTES = 64 * 1024 * 1024;
/**
 * Logical bytes a view repeating its elements (a stride-0 expansion) may expand to: a few bytes of
 * storage can claim a tebibyte, and hashing or scanning it would run for hours.
 */
const MAX_EXPANDED_VIEW_BYTES = 16 * 1024 ** 3;
/** Largest tensor read whole into one buffer (V8's typed-array limit); larger ones stream with tensorPieces. */
const MAX_WHOLE_TENSOR_BYTES = bufferConstants.MAX_LENGTH;

/** torch's legacy-format magic number, the first value the legacy (pre-1.6, non-zip) format pickles. */
const LEGACY_MAGIC_DECIMAL = "119547037146038801333356";
/** The magic as LONG1 (protocol 2 and later): 10 little-endian bytes. */
const LEGACY_MAGIC_LONG1 = Uint8Array.from([
  0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
]);
/** Bytes of a file's start that `isLegacyTorchFile` looks at. */
export const LEGACY_HEAD_BYTES = 32;

/**
 * True when `head` starts the legacy non-zip torch format (`_use_new_zipfile_serialization=False` or
 * torch < 1.6) at any pickle protocol: PROTO and FRAME, then the magic as LONG1, or (protocols 0
 * and 1) as decimal text after LONG or INT.
 */
export function isLegacyTorchFile(head: Uint8Array): boolean {
  let at = 0;
  if (head[0] === 0x80) {
    at = 2;
    if (head[at] === 0x95) at += 9;
    return LEGACY_MAGIC_LONG1.every((b, i) => head[at + i] === b);
  }
  if (head[0] !== 0x4c && head[0] !== 0x49) return false;
  const text = Buffer.from(head.subarray(1, 1 + LEGACY_MAGIC_DECIMAL.length)).toString("latin1");
  return text === LEGACY_MAGIC_DECIMAL;
}

/** The first bytes of a torch.save file: a zip local header, or the legacy format's pickled magic number. */
export function looksLikeTorchFile(head: Uint8Array): boolean {
  const zip = head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04;
  return zip || isLegacyTorchFile(head);
}

/** One tensor of a torch file: what it is and where its elements are. */
export interface TorchTensorEntry extends TensorInfo {
  readonly storageKey: string;
  /** In elements. */
  readonly storageOffset: number;
  /** In elements. */
  readonly stride: readonly number[];
  readonly contiguous: boolean;
  readonly tensor: TorchTensor;
}

export interface TorchFile {
  /** The archive's single top-level folder (`archive`, or the file name torch saved to). */
  readonly prefix: string;
  /** The unpickled structure, tensors as TorchTensor references. */
  readonly root: unknown;
  readonly tensors: readonly TorchTensorEntry[];
  /**
   * The tensor's elements, contiguous row-major little-endian (a copy for strided views), in one
   * buffer; a tensor larger than a buffer can hold is refused (`TORCH_TENSOR_TOO_LARGE`): stream it
   * with `tensorPieces`.
   */
  readTensor(entry: TorchTensorEntry, into?: Uint8Array): Promise<Uint8Array>;
  /**
   * The same bytes as `readTensor`, in pieces of at most `pieceBytes` (one buffer reused: use each
   * piece before asking for the next), in bounded memory whatever the tensor's size. A view that
   * repeats its elements past MAX_EXPANDED_VIEW_BYTES is refused (`TORCH_VIEW_TOO_LARGE`).
   */
  tensorPieces(entry: TorchTensorEntry, pieceBytes?: number): AsyncGenerator<Uint8Array>;
  /**
   * `length` bytes of a contiguous tensor's elements starting `start` bytes in, with one positioned
   * read, so a large tensor can be streamed in pieces. A strided tensor is refused
   * (`TORCH_RANGE_NOT_CONTIGUOUS`): read it whole with `readTensor`.
   */
  readTensorRange(
    entry: TorchTensorEntry,
    start: number,
    length: number,
    into?: Uint8Array,
  ): Promise<Uint8Array>;
  /**
   * Where a contiguous tensor's bytes start in the file, for a reader that goes to the file
   * itself (on another thread); undefined for a strided view or a compressed storage.
   */
  tensorFileOffset(entry: TorchTensorEntry): Promise<number | undefined>;
  close(): Promise<void>;
}

function fileError(code: TensorsErrorCode, file: string, message: string, tensor?: string): TensorsError {
  return new TensorsError(code, `read torch file ${file}: ${message}`, { kind: "input", file, tensor });
}

/** One step of a tensor's path: a dict key or a list index. */
interface PathSegment {
  readonly key: unknown;
  /** Position in its container (names a key of a type with no text form). */
  readonly index: number;
  readonly isIndex: boolean;
}

function keyText(segment: PathSegment): string {
  const { key } = segment;
  if (segment.isIndex) return String(segment.index);
  if (typeof key === "string") return key;
  if (
    typeof key === "number" ||
    typeof key === "bigint" ||
    typeof key === "boolean" ||
    key instanceof PickleFloat
  )
    return String(key);
  return `#${segment.index}`;
}

/** Segments joined with ".", as torch's state_dict names them. */
function plainName(path: readonly PathSegment[]): string {
  return path.map(keyText).join(".");
}

/**
 * A name no other path renders to: a string key holding a "." or "[", or reading like a number
 * or a list index, is written `["a.b"]`, so `{"a.b": t}` and `{"a": {"b": u}}` become `["a.b"]`
 * and `a.b`.
 */
function quotedName(path: readonly PathSegment[]): string {
  let out = "";
  for (const segment of path) {
    const text = keyText(segment);
    if (typeof segment.key === "string" && !segment.isIndex && /[.[]|^-?\d+$|^#\d+$/.test(text)) {
      out += `[${JSON.stringify(text)}]`;
    } else {
      out += out === "" ? text : `.${text}`;
    }
  }
  return out;
}

/**
 * Lists the tensors of a tree, nested keys joined with "." (where two paths would join to one
 * name, both are written with their dotted keys quoted: see quotedName); bounded in depth and visits.
 */
export function collectTensors(root: unknown, file: string): { name: string; tensor: TorchTensor }[] {
  const found: { path: PathSegment[]; tensor: TorchTensor }[] = [];
  const path: PathSegment[] = [];
  let visits = 0;
  const walk = (value: unknown): void => {
    if (value instanceof TorchTensor) {
      found.push({ path: [...path], tensor: value });
      return;
    }
    const isDict = value instanceof PickleDict;
    const isSequence = Array.isArray(value) || value instanceof PickleTuple;
    if (!isDict && !isSequence) return;
    if (++visits > MAX_TREE_NODES) {
      throw fileError(
        "PICKLE_TOO_LARGE",
        file,
        `more than ${MAX_TREE_NODES} containers (shared sub-containers?)`,
      );
    }
    if (path.length >= MAX_TREE_DEPTH) {
      throw fileError("PICKLE_TOO_DEEP", file, `containers nest deeper than ${MAX_TREE_DEPTH}`);
    }
    if (isDict) {
      let i = 0;
      for (const [key, child] of (value as PickleDict).map) {
        path.push({ key, index: i++, isIndex: false });
        walk(child);
        path.pop();
      }
      return;
    }
    const items = Array.isArray(value) ? value : (value as PickleTuple).items;
    for (let i = 0; i < items.length; i++) {
      path.push({ key: i, index: i, isIndex: true });
      walk(items[i]);
      path.pop();
    }
  };
  walk(root);
  const plain = found.map((f) => plainName(f.path));
  const seen = new Map<string, number>();
  for (const name of plain) seen.set(name, (seen.get(name) ?? 0) + 1);
  return found.map((f, i) => ({
    name: seen.get(plain[i]!)! > 1 ? quotedName(f.path) : plain[i]!,
    tensor: f.tensor,
  }));
}

async function readSmallRecord(zip: ZipArchive, member: ZipMember): Promise<string> {
  return Buffer.from(await zip.readMember(member, MAX_SMALL_RECORD_BYTES)).toString("latin1");
}

/**
 * Opens a torch.save zip file. Reads the central directory, `version` and `data.pkl` only; tensor
 * bytes are read by `readTensor` with positioned reads on their member.
 */
export async function openTorchFile(source: ByteSource): Promise<TorchFile> {
  const file = source.name;
  const head = await readAt(source, 0, Math.min(source.size, LEGACY_HEAD_BYTES));
  if (isLegacyTorchFile(head)) {
    throw fileError(
      "TORCH_LEGACY_FORMAT",
      file,
      "this is the legacy non-zip torch format (saved with _use_new_zipfile_serialization=False or torch < 1.6)." +
        " Re-save it with a current torch.save",
    );
  }
  const zip = await openZip(source);
  const first = zip.members[0];
  const slash = first ? first.name.indexOf("/") : -1;
  if (!first || slash <= 0)
    throw fileError("TORCH_RECORD_MISSING", file, "the archive has no top-level folder");
  const prefix = first.name.slice(0, slash);
  for (const member of zip.members) {
    if (!member.name.startsWith(`${prefix}/`)) {
      throw fileError(
        "TORCH_MIXED_PREFIXES",
        file,
        `member ${truncateForMessage(member.name)} is outside the archive folder ${truncateForMessage(prefix)} (torch refuses mixed prefixes)`,
      );
    }
  }
  const record = (name: string): ZipMember => {
    const member = zip.member(`${prefix}/${name}`);
    if (!member)
      throw fileError("TORCH_RECORD_MISSING", file, `no ${truncateForMessage(`${prefix}/${name}`)} record`);
    return member;
  };
  const pickleMember = record("data.pkl");
  const versionText = (await readSmallRecord(zip, record("version"))).trim();
  const version = Number(versionText);
  if (!/^\d+$/.test(versionText) || version < 1 || version > MAX_TORCH_FORMAT_VERSION) {
    throw fileError(
      "TORCH_VERSION_UNSUPPORTED",
      file,
      `format version ${truncateForMessage(versionText)}; supported 1..${MAX_TORCH_FORMAT_VERSION}`,
    );
  }
  const byteorderMember = zip.member(`${prefix}/byteorder`);
  if (byteorderMember) {
    const order = (await readSmallRecord(zip, byteorderMember)).trim();
    if (order !== "little") {
      throw fileError(
        "TORCH_BYTEORDER_UNSUPPORTED",
        file,
        `byteorder ${truncateForMessage(order)}; only little-endian files are read`,
      );
    }
  }
  const pickle = await zip.readMember(pickleMember, MAX_PICKLE_BYTES);
  const root = unpickle(pickle, torchPolicy(file), file, "data.pkl");

  const storageMembers = new Map<string, ZipMember>();
  const tensors: TorchTensorEntry[] = [];
  const names = new Set<string>();
  for (const { name, tensor } of collectTensors(root, file)) {
    if (names.has(name))
      throw fileError(
        "TORCH_DUPLICATE_TENSOR_NAME",
        file,
        `two tensors are named ${truncateForMessage(name)}`,
        name,
      );
    names.add(name);
    const storage: TorchStorageRef = tensor.storage;
    let member = storageMembers.get(storage.key);
    if (!member) {
      member = zip.member(`${prefix}/data/${storage.key}`);
      if (!member) {
        throw fileError(
          "TORCH_STORAGE_MISSING",
          file,
          `tensor ${truncateForMessage(name)} uses storage ${truncateForMessage(storage.key)}, which has no member`,
          name,
        );
      }
      storageMembers.set(storage.key, member);
    }
    const needed = storage.numel * dtypeSize(storage.dtype);
    if (member.size < needed) {
      throw fileError(
        "TORCH_STORAGE_TOO_SHORT",
        file,
        `storage ${truncateForMessage(storage.key)} of tensor ${truncateForMessage(name)} holds ${member.size} bytes; ${storage.numel} ${storage.dtype} elements need ${needed}`,
        name,
      );
    }
    tensors.push({
      name,
      dtype: tensor.dtype,
      shape: tensor.shape,
      byteLength: tensor.numel * dtypeSize(tensor.dtype),
      storageKey: storage.key,
      storageOffset: tensor.storageOffset,
      stride: tensor.stride,
      contiguous: tensor.contiguous,
      tensor,
    });
  }

  const known = new Set<TorchTensorEntry>(tensors);
  let inflated: { member: ZipMember; bytes: Uint8Array } | undefined;
  const storageBytes = async (
    member: ZipMember,
    start: number,
    length: number,
    into?: Uint8Array,
  ): Promise<Uint8Array> => {
    if (member.method === 0) return readAt(source, (await zip.dataOffset(member)) + start, length, into);
    if (inflated?.member !== member)
      inflated = { member, bytes: await zip.readMember(member, Number.MAX_SAFE_INTEGER) };
    const view = inflated.bytes.subarray(start, start + length);
    if (!into) return view.slice();
    into.set(view);
    return into.subarray(0, length);
  };

  const memberOf = (entry: TorchTensorEntry): ZipMember => {
    const member = storageMembers.get(entry.storageKey);
    if (!member || !known.has(entry)) {
      throw fileError(
        "TORCH_UNKNOWN_TENSOR",
        file,
        `tensor ${truncateForMessage(entry.name)} is not from this file`,
        entry.name,
      );
    }
    return member;
  };

  async function* contiguousPieces(
    member: ZipMember,
    start: number,
    length: number,
    pieceBytes: number,
  ): AsyncGenerator<Uint8Array> {
    if (member.method === 0) {
      const buffer = new Uint8Array(Math.max(1, Math.min(pieceBytes, length)));
      const at = (await zip.dataOffset(member)) + start;
      for (let done = 0; done < length; ) {
        const n = Math.min(buffer.length, length - done);
        yield await readAt(source, at + done, n, buffer);
        done += n;
      }
      return;
    }
    // A deflated member streams from its start: skip to the tensor, stop after it.
    let position = 0;
    for await (const piece of zip.memberPieces(member, pieceBytes)) {
      const from = Math.max(start - position, 0);
      const to = Math.min(start + length - position, piece.length);
      position += piece.length;
      if (from < to) yield piece.subarray(from, to);
      if (position >= start + length) return;
    }
  }

  async function* tensorPieces(
    entry: TorchTensorEntry,
    pieceBytes = TENSOR_PIECE_BYTES,
  ): AsyncGenerator<Uint8Array> {
    const member = memberOf(entry);
    const item = dtypeSize(entry.dtype);
    const base = entry.storageOffset * item;
    if (entry.contiguous || entry.byteLength === 0) {
      yield* contiguousPieces(member, base, entry.byteLength, pieceBytes);
      return;
    }
    const view = { shape: entry.shape, stride: entry.stride, item };
    const span = spanBytes(view);
    if (entry.byteLength > span && entry.byteLength > MAX_EXPANDED_VIEW_BYTES) {
      throw new TensorsError(
        "TORCH_VIEW_TOO_LARGE",
        `read tensor ${truncateForMessage(entry.name)} of ${file}: a view of ${span} stored bytes expands to ${entry.byteLength} (shape [${entry.shape}], stride [${entry.stride}]); ckpt expands views up to ${MAX_EXPANDED_VIEW_BYTES} bytes. Save the tensor contiguous (.contiguous() or .clone()) if it is meant to be that large`,
        { file, tensor: entry.name, kind: "refused" },
      );
    }
    yield* stridedPieces(
      view,
      (offset, length) => storageBytes(member, base + offset, length),
      pieceBytes,
      STRIDED_WINDOW_BYTES,
    );
  }

  return {
    prefix,
    root,
    tensors,
    async readTensorRange(entry, start, length, into) {
      const member = memberOf(entry);
      if (!entry.contiguous && entry.byteLength > 0) {
        throw fileError(
          "TORCH_RANGE_NOT_CONTIGUOUS",
          file,
          `tensor ${truncateForMessage(entry.name)} is a strided view; read it whole with readTensor`,
          entry.name,
        );
      }
      if (
        !Number.isSafeInteger(start) ||
        !Number.isSafeInteger(length) ||
        start < 0 ||
        length < 0 ||
        start + length > entry.byteLength
      ) {
        throw new TensorsError(
          "TORCH_RANGE_OUTSIDE_TENSOR",
          `read tensor ${truncateForMessage(entry.name)} of ${file}: ${length} bytes at ${start} are outside its ${entry.byteLength} bytes`,
          { file, tensor: entry.name, kind: "failed" },
        );
      }
      if (into && into.length < length) {
        throw new TensorsError(
          "TORCH_BUFFER_TOO_SMALL",
          `read tensor ${truncateForMessage(entry.name)} of ${file}: buffer of ${into.length} bytes; needs ${length}`,
          { file, tensor: entry.name, kind: "failed" },
        );
      }
      return storageBytes(member, entry.storageOffset * dtypeSize(entry.dtype) + start, length, into);
    },
    async tensorFileOffset(entry) {
      const member = memberOf(entry);
      if ((!entry.contiguous && entry.byteLength > 0) || member.method !== 0) return undefined;
      return (await zip.dataOffset(member)) + entry.storageOffset * dtypeSize(entry.dtype);
    },
    tensorPieces,
    async readTensor(entry, into) {
      if (entry.byteLength > MAX_WHOLE_TENSOR_BYTES) {
        throw new TensorsError(
          "TORCH_TENSOR_TOO_LARGE",
          `read tensor ${truncateForMessage(entry.name)} of ${file}: ${entry.byteLength} bytes do not fit one buffer (max ${MAX_WHOLE_TENSOR_BYTES}); stream it with tensorPieces`,
          { file, tensor: entry.name, kind: "failed" },
        );
      }
      if (into && into.length < entry.byteLength) {
        throw new TensorsError(
          "TORCH_BUFFER_TOO_SMALL",
          `read tensor ${truncateForMessage(entry.name)} of ${file}: buffer of ${into.length} bytes; needs ${entry.byteLength}`,
          {
            file,
            tensor: entry.name,
            kind: "failed",
          },
        );
      }
      if (entry.contiguous || entry.byteLength === 0) {
        const member = memberOf(entry);
        return storageBytes(member, entry.storageOffset * dtypeSize(entry.dtype), entry.byteLength, into);
      }
      const out = into ? into.subarray(0, entry.byteLength) : new Uint8Array(entry.byteLength);
      let written = 0;
      for await (const piece of tensorPieces(entry)) {
        out.set(piece, written);
        written += piece.length;
      }
      return out;
    },
    close: () => source.close(),
  };
}
