import { createHash, type Hash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";

/** A pass-through that hashes and counts what flows through it. */
export class DigestingStream extends Transform {
  private readonly hash: Hash = createHash("sha256");
  bytes = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.byteLength;
    callback(null, chunk);
  }

  /** Hex SHA-256 of everything seen; call once, after the stream ended. */
  digest(): string {
    return this.hash.digest("hex");
  }
}
