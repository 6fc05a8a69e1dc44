import type { Readable } from "node:stream";

/** One framed input: a complete line, or the size of a line that exceeded the cap (its bytes are dropped). */
export type Line = { readonly text: string } | { readonly tooLongBytes: number };

/**
 * Splits a byte stream into newline-terminated UTF-8 lines, holding at most `maxBytes` of one line
 * in memory. A longer line is reported by its size and skipped up to its newline, so one bad
 * request costs one error response rather than the connection. A final line without a newline is
 * still delivered (a client that closes right after writing is not penalised). `\r\n` is accepted.
 */
export async function* readLines(input: Readable, maxBytes: number): AsyncGenerator<Line> {
  let parts: Buffer[] = [];
  let held = 0;
  let skipping = false; // dropping the rest of an over-long line
  let skipped = 0;
  const drop = (bytes: number) => {
    skipping = true;
    skipped = held + bytes;
    parts = [];
    held = 0;
  };
  const finish = (tail: Buffer): Line => {
    if (skipping) {
      const line = { tooLongBytes: skipped + tail.length };
      skipping = false;
      skipped = 0;
      return line;
    }
    const bytes = Buffer.concat([...parts, tail]);
    parts = [];
    held = 0;
    const end = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
    return { text: bytes.subarray(0, end).toString("utf8") };
  };
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    let buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    for (let nl = buf.indexOf(0x0a); nl !== -1; nl = buf.indexOf(0x0a)) {
      const tail = buf.subarray(0, nl);
      buf = buf.subarray(nl + 1);
      if (!skipping && held + tail.length > maxBytes) {
        drop(tail.length);
        yield finish(Buffer.alloc(0));
      } else {
        yield finish(tail);
      }
    }
    if (buf.length === 0) continue;
    if (skipping) skipped += buf.length;
    else if (held + buf.length > maxBytes) drop(buf.length);
    else {
      parts.push(Buffer.from(buf));
      held += buf.length;
    }
  }
  if (skipping || held > 0) yield finish(Buffer.alloc(0));
}
