import { createHash, randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { ManifestError } from "../errors.js";
import { StreamHasher } from "./stream-hasher.js";

const sha = (...parts: Uint8Array[]) => {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
};

let hashers: StreamHasher[] = [];
afterEach(async () => {
  for (const hasher of hashers) await hasher.close();
  hashers = [];
});

function open(): StreamHasher {
  const hasher = new StreamHasher("test streams");
  hashers.push(hasher);
  return hasher;
}

describe("StreamHasher", () => {
  it("hashes interleaved streams in order, from shared and from ordinary buffers", async () => {
    const hasher = open();
    const a = hasher.stream();
    const b = hasher.stream();
    const shared = new Uint8Array(new SharedArrayBuffer(1 << 20));
    const partsA: Uint8Array[] = [];
    const partsB: Uint8Array[] = [];
    for (let k = 0; k < 6; k++) {
      // The shared buffer is refilled for every part, so each update must be hashed before it resolves.
      shared.set(randomBytes(shared.length));
      const view = shared.subarray(k * 1000, shared.length - k);
      partsA.push(Uint8Array.from(view));
      await a.update(view);
      const ordinary = randomBytes(1000 + k);
      partsB.push(ordinary);
      await b.update(ordinary);
    }
    expect(await a.digest()).toBe(sha(...partsA));
    expect(await b.digest()).toBe(sha(...partsB));
    expect(await hasher.stream().digest()).toBe(sha());
  });

  it("keeps the order of updates made without waiting", async () => {
    const hasher = open();
    const stream = hasher.stream();
    const parts = Array.from({ length: 20 }, (_, k) => randomBytes(5000 + k));
    await Promise.all(parts.map((p) => stream.update(p)));
    expect(await stream.digest()).toBe(sha(...parts));
  });

  it("rejects with a coded error once closed", async () => {
    const hasher = open();
    const stream = hasher.stream();
    await hasher.close();
    const error = await stream.update(new Uint8Array(4)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ManifestError);
    expect((error as ManifestError).code).toBe("HASH_WORKER_FAILED");
  });
});
