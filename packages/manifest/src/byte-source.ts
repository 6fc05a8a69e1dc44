import { describeRefusal, openRegularFile } from "@ckpt/errors";
import type { FileHandle } from "node:fs/promises";
import { ManifestError } from "./errors.js";

/**
 * Random-access bytes: a local file, an object-store object, a buffer. Readers (safetensors,
 * torch zip, records) take this instead of a path so local and remote share one code path.
 */
export interface ByteSource {
  /** A name for messages (a path or URI; never a secret). */
  readonly name: string;
  readonly size: number;
  /** Reads exactly `length` bytes at `offset` into `into` (or a new buffer); short reads are errors. */
  read(offset: number, length: number, into?: Uint8Array): Promise<Uint8Array>;
  close(): Promise<void>;
}

/**
 * A ByteSource over a local regular file, using positioned reads on one open handle. Opened through
 * the guarded open (@ckpt/errors): a FIFO, device, socket or directory planted where a tensor file
 * is expected is refused with FILE_NOT_REGULAR instead of hanging or reading without end; a
 * missing or unreadable path throws its errno error, as before, for the caller's own code.
 */
export async function openFileByteSource(path: string): Promise<ByteSource> {
  const opened = await openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER });
  if (opened.ok) return fileHandleByteSource(opened.handle, path, opened.size);
  if (opened.reason === "missing" || opened.reason === "unreadable") throw opened.cause;
  throw new ManifestError(
    "FILE_NOT_REGULAR",
    `open ${describeRefusal(opened)}. Tensor and model files are regular files; replace it with the file itself.`,
    { kind: "input", file: path },
  );
}

/**
 * A ByteSource over a file the caller already opened, so that what is hashed, checked and read
 * all comes from one open file even if its path is replaced meanwhile. `size` is the length the
 * caller observed on that handle; `close()` closes the handle.
 */
export function fileHandleByteSource(handle: FileHandle, name: string, size: number): ByteSource {
  return {
    name,
    size,
    async read(offset, length, into) {
      if (offset < 0 || length < 0 || offset + length > size) {
        throw new RangeError(`read of ${length} bytes at ${offset} is outside ${name} (${size} bytes)`);
      }
      const target = into ? into.subarray(0, length) : new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await handle.read(target, done, length - done, offset + done);
        if (bytesRead === 0) throw new RangeError(`${name} ended at ${offset + done} while reading`);
        done += bytesRead;
      }
      return target;
    },
    close: () => handle.close(),
  };
}

/** A ByteSource over bytes already in memory (tests, small records). */
export function bufferByteSource(name: string, bytes: Uint8Array): ByteSource {
  return {
    name,
    size: bytes.length,
    async read(offset, length, into) {
      if (offset < 0 || length < 0 || offset + length > bytes.length) {
        throw new RangeError(
          `read of ${length} bytes at ${offset} is outside ${name} (${bytes.length} bytes)`,
        );
      }
      const view = bytes.subarray(offset, offset + length);
      if (!into) return view;
      into.set(view);
      return into.subarray(0, length);
    },
    close: async () => {},
  };
}
