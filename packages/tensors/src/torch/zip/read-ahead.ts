import type { ByteSource } from "@ckpt/manifest";

/** Bytes read at once when a small read misses the window: many small members per read. */
const WINDOW_BYTES = 4 * 1024 * 1024;
/** Reads up to this size are served from the window; larger ones go to the source directly. */
const SMALL_READ_BYTES = 64 * 1024;

/**
 * A source serving small reads from a read-ahead window. Walking a zip of many small members in
 * file order (local headers, small storages) then costs one read per window instead of two per
 * member: with tens of thousands of members each read's round trip to the thread pool dominated.
 * `close` closes the underlying source.
 */
export function readAheadSource(source: ByteSource): ByteSource {
  let start = 0;
  let window: Uint8Array = new Uint8Array(0);
  return {
    name: source.name,
    size: source.size,
    async read(offset, length, into) {
      if (length > SMALL_READ_BYTES) return source.read(offset, length, into);
      if (offset < start || offset + length > start + window.length) {
        start = offset;
        window = await source.read(offset, Math.max(length, Math.min(WINDOW_BYTES, source.size - offset)));
      }
      const bytes = window.subarray(offset - start, offset - start + length);
      if (!into) return bytes.slice();
      into.set(bytes);
      return into.subarray(0, length);
    },
    close: () => source.close(),
  };
}
