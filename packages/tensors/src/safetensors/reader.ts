import type { ByteSource } from "@ckpt/manifest";
import { TensorsError } from "../errors.js";
import {
  HEADER_LENGTH_BYTES,
  parseSafetensorsHeader,
  quote,
  readHeaderLength,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from "./header.js";

/** An opened safetensors file: the validated header, and tensors read one at a time on demand. */
export interface SafetensorsFile {
  /** The source's name (a path or URI). */
  readonly file: string;
  readonly header: SafetensorsHeader;
  /** Every tensor in data order. */
  readonly tensors: readonly SafetensorsTensorInfo[];
  readonly metadata: Readonly<Record<string, string>>;
  /** The tensor called `name`, or undefined. */
  tensor(name: string): SafetensorsTensorInfo | undefined;
  /**
   * Reads one tensor's raw little-endian bytes with a positioned read, into `into` when given
   * (it must hold at least `byteLength` bytes; the returned view is `into` cut to the tensor).
   */
  readTensor(name: string, into?: Uint8Array): Promise<Uint8Array>;
}

/** Reads `length` bytes at `offset`, turning a source failure into a typed error. */
export async function readExactly(
  source: ByteSource,
  offset: number,
  length: number,
  what: string,
  into?: Uint8Array,
): Promise<Uint8Array> {
  try {
    return await source.read(offset, length, into);
  } catch (error) {
    if (error instanceof TensorsError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new TensorsError(
      "SAFETENSORS_READ_FAILED",
      `read ${what} of ${source.name}: ${reason}. Check that the file is readable and was not changed while open.`,
      { kind: "failed", file: source.name, cause: error },
    );
  }
}

/** Reads and validates the header of a safetensors source: two positioned reads, never the data. */
export async function readSafetensorsHeader(source: ByteSource): Promise<SafetensorsHeader> {
  const file = source.name;
  const prefix =
    source.size >= HEADER_LENGTH_BYTES
      ? await readExactly(source, 0, HEADER_LENGTH_BYTES, "safetensors header length")
      : new Uint8Array(0);
  const length = readHeaderLength(prefix, source.size, file);
  const headerBytes = await readExactly(source, HEADER_LENGTH_BYTES, length, "safetensors header");
  return parseSafetensorsHeader(headerBytes, { file, fileSize: source.size });
}

/** Opens a safetensors file over a random-access source. The caller keeps ownership of `source`. */
export async function openSafetensors(source: ByteSource): Promise<SafetensorsFile> {
  const header = await readSafetensorsHeader(source);
  const byName = new Map(header.tensors.map((t) => [t.name, t]));
  const file = source.name;
  return {
    file,
    header,
    tensors: header.tensors,
    metadata: header.metadata,
    tensor: (name) => byName.get(name),
    async readTensor(name, into) {
      const info = byName.get(name);
      if (!info) {
        throw new TensorsError(
          "SAFETENSORS_TENSOR_NOT_FOUND",
          `read tensor ${quote(name)} of ${file}: no such tensor. The file lists ${header.tensors.length} tensors.`,
          { kind: "input", file, tensor: name },
        );
      }
      if (into && into.length < info.byteLength) {
        throw new TensorsError(
          "SAFETENSORS_BUFFER_TOO_SMALL",
          `read tensor ${quote(name)} of ${file}: buffer holds ${into.length} bytes but the tensor has ${info.byteLength}. Pass a buffer of at least byteLength bytes.`,
          { kind: "input", file, tensor: name },
        );
      }
      return readExactly(source, info.dataOffset, info.byteLength, `tensor ${quote(name)}`, into);
    },
  };
}
