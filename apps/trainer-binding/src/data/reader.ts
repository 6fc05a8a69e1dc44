import type { Readable } from "node:stream";

/**
 * Buffered reads of lines and exact byte counts from one socket: the data protocol mixes a JSON
 * header line with binary frames. Reads pull from the socket only as they are asked (so a slow
 * upload slows the sender down: bounded memory).
 */
export class ByteReader {
  private readonly source: AsyncIterator<Buffer>;
  private pending: Buffer = Buffer.alloc(0);
  private ended = false;

  constructor(input: Readable) {
    this.source = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.source.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    this.pending = this.pending.byteLength === 0 ? next.value : Buffer.concat([this.pending, next.value]);
    return true;
  }

  /** The next line without its newline; undefined at a clean end of input; "too long" past `max` bytes. */
  async line(max: number): Promise<string | undefined | "too long"> {
    for (;;) {
      const at = this.pending.indexOf(10);
      if (at >= 0) {
        const text = this.pending.subarray(0, at).toString("utf8");
        this.pending = this.pending.subarray(at + 1);
        return text;
      }
      if (this.pending.byteLength > max) return "too long";
      if (!(await this.fill())) return this.pending.byteLength === 0 ? undefined : "too long";
    }
  }

  /** Up to `max` bytes that are already here or arrive next; empty only at the end of input. */
  async some(max: number): Promise<Buffer> {
    if (this.pending.byteLength === 0 && !(await this.fill())) return Buffer.alloc(0);
    const out = this.pending.subarray(0, max);
    this.pending = this.pending.subarray(out.byteLength);
    return out;
  }

  /** Exactly `n` bytes; undefined when the input ends first. */
  async exact(n: number): Promise<Buffer | undefined> {
    while (this.pending.byteLength < n) if (!(await this.fill())) return undefined;
    const out = this.pending.subarray(0, n);
    this.pending = this.pending.subarray(n);
    return out;
  }
}
