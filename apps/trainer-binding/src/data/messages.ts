import { z } from "zod";

/**
 * The data protocol between one rank's storage writer/reader (ckpt_dcp.py) and its local
 * `ckpt-trainer data` process: per request one JSON header line, then binary frames (a 4-byte
 * big-endian length, that many bytes; length 0 ends the body), then one JSON result line.
 * `put` sends its body as frames and gets `{size, sha256}` of the bytes stored; `get` receives a
 * byte range as frames, then `{size}`; `digest` streams an object through SHA-256 in the data
 * process and gets `{size, sha256}`; `head` gets `{size}`. A failure is `{ok: false, error: {code, kind, message}}`.
 */

/** The longest frame either side sends: bounds what one read holds. */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** The longest header line: a URI and a few numbers. */
export const MAX_HEADER_BYTES = 64 * 1024;

const uri = z
  .string()
  .min(1)
  .max(4096)
  .regex(
    /^(s3|gs|file|memory):\/\/[^/]*\/.*[^/]$/,
    "a store URI naming one object (scheme://bucket/.../name)",
  );
const offset = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const DATA_REQUEST = z.discriminatedUnion("op", [
  z.strictObject({ op: z.literal("put"), uri }),
  z.strictObject({ op: z.literal("get"), uri, start: offset, end: offset.optional() }),
  z.strictObject({ op: z.literal("digest"), uri }),
  z.strictObject({ op: z.literal("head"), uri }),
]);
export type DataRequest = z.infer<typeof DATA_REQUEST>;

/** One frame's length prefix. */
export function frameHeader(length: number): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(length);
  return header;
}
