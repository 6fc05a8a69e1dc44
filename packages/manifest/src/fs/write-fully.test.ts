import { randomBytes } from "node:crypto";
import { type FileHandle, open, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { WRITE_SLICE_BYTES, writeFully } from "./write-fully.js";

async function tempFile(name: string): Promise<string> {
  return join(await testdir("ckpt-write-fully-"), name);
}

interface WriteCall {
  length: number;
  position: number | null;
}

/**
 * A handle that records each write and lets `shorten` cut a call short (as a signal or a full
 * disk may), delegating the bytes it does accept to a real file.
 */
function recording(
  handle: FileHandle,
  shorten: (call: number) => number | undefined = () => undefined,
): { handle: FileHandle; calls: WriteCall[] } {
  const calls: WriteCall[] = [];
  const write = (buffer: Uint8Array, offset: number, length: number, position: number | null) => {
    calls.push({ length, position });
    const accepted = Math.min(length, shorten(calls.length - 1) ?? length);
    return handle.write(buffer, offset, accepted, position);
  };
  return { handle: { write } as unknown as FileHandle, calls };
}

describe("writeFully", () => {
  it("writes at a position in slices of at most WRITE_SLICE_BYTES, continuing short writes", async () => {
    const path = await tempFile("positional.bin");
    await writeFile(path, Buffer.alloc(100, 0x11));
    const bytes = randomBytes(5 * WRITE_SLICE_BYTES + 17);
    const real = await open(path, "r+");
    // Every third call accepts only 1000 bytes; the slice must go on from there.
    const { handle, calls } = recording(real, (call) => (call % 3 === 0 ? 1000 : undefined));
    await writeFully(handle, bytes, 100);
    await real.close();

    const content = await readFile(path);
    expect(content.subarray(0, 100).equals(Buffer.alloc(100, 0x11))).toBe(true);
    expect(content.subarray(100).equals(bytes)).toBe(true);
    expect(Math.max(...calls.map((c) => c.length))).toBeLessThanOrEqual(WRITE_SLICE_BYTES);
    expect(calls.every((c) => c.position !== null)).toBe(true);
    expect(calls.length).toBeGreaterThan(6);
  });

  it("without a position appends slice after slice at the file's offset", async () => {
    const path = await tempFile("append.bin");
    await writeFile(path, "head");
    const bytes = randomBytes(3 * WRITE_SLICE_BYTES + 5);
    const real = await open(path, "a");
    const { handle, calls } = recording(real);
    await writeFully(handle, bytes);
    await writeFully(handle, Buffer.from("tail"));
    await real.close();

    expect(
      (await readFile(path)).equals(Buffer.concat([Buffer.from("head"), bytes, Buffer.from("tail")])),
    ).toBe(true);
    expect(calls.map((c) => c.length)).toEqual([
      WRITE_SLICE_BYTES,
      WRITE_SLICE_BYTES,
      WRITE_SLICE_BYTES,
      5,
      4,
    ]);
    expect(calls.every((c) => c.position === null)).toBe(true);
  });

  it("rejects with the failure only once no other slice is still writing from the buffer", async () => {
    const failure = new Error("EIO: the disk went away");
    let inFlight = 0;
    let inFlightAtRejection = -1;
    const handle = {
      async write(_buffer: Uint8Array, _offset: number, length: number, position: number) {
        inFlight++;
        try {
          // The first slice fails at once; the others take a while to finish.
          if (position === 0) throw failure;
          await new Promise((resolve) => setTimeout(resolve, 20));
          return { bytesWritten: length };
        } finally {
          inFlight--;
        }
      },
    } as unknown as FileHandle;

    await expect(
      writeFully(handle, new Uint8Array(4 * WRITE_SLICE_BYTES), 0).catch((error: unknown) => {
        inFlightAtRejection = inFlight;
        throw error;
      }),
    ).rejects.toBe(failure);
    expect(inFlightAtRejection).toBe(0);
  });

  it("writes nothing for an empty buffer", async () => {
    const calls: number[] = [];
    const handle = {
      write: async (_b: Uint8Array, _o: number, length: number) => {
        calls.push(length);
        return { bytesWritten: length };
      },
    } as unknown as FileHandle;
    await writeFully(handle, new Uint8Array(0), 0);
    await writeFully(handle, new Uint8Array(0));
    expect(calls).toEqual([]);
  });
});
