import { Readable } from "node:stream";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Line, readLines } from "../src/protocol/lines.js";

async function collect(chunks: Array<string | Buffer>, max = 64): Promise<Line[]> {
  const out: Line[] = [];
  for await (const line of readLines(Readable.from(chunks.map((c) => Buffer.from(c))), max)) out.push(line);
  return out;
}

describe("readLines", () => {
  it("splits on newlines across chunk boundaries and accepts CRLF", async () => {
    expect(await collect(['{"a"', ':1}\n{"b":2}\r', "\n"])).toEqual([
      { text: '{"a":1}' },
      { text: '{"b":2}' },
    ]);
  });

  it("delivers a last line that has no newline", async () => {
    expect(await collect(["one\ntwo"])).toEqual([{ text: "one" }, { text: "two" }]);
  });

  it("reports an over-long line by its size, skips it, and keeps the lines after it", async () => {
    const long = "x".repeat(100);
    expect(await collect([`ok\n${long.slice(0, 40)}`, `${long.slice(40)}\nnext\n`], 64)).toEqual([
      { text: "ok" },
      { tooLongBytes: 100 },
      { text: "next" },
    ]);
  });

  it("reports an over-long line that ends the stream without a newline", async () => {
    expect(await collect(["y".repeat(70)], 64)).toEqual([{ tooLongBytes: 70 }]);
  });

  it("keeps multi-byte UTF-8 characters that a chunk boundary splits", async () => {
    const bytes = Buffer.from("é€😀\n");
    const out: Line[] = [];
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    for await (const line of readLines(Readable.from(chunks), 64)) out.push(line);
    expect(out).toEqual([{ text: "é€😀" }]);
  });

  it("gives the same lines however the bytes are chunked (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.string({ unit: "grapheme", maxLength: 20 }).filter((s) => !/[\r\n]/.test(s)),
          {
            maxLength: 8,
          },
        ),
        fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 10 }),
        async (lines, cuts) => {
          const bytes = Buffer.from(lines.map((l) => `${l}\n`).join(""));
          const chunks: Buffer[] = [];
          let at = 0;
          for (let i = 0; at < bytes.length; i++) {
            const size = cuts[i % cuts.length]!;
            chunks.push(bytes.subarray(at, at + size));
            at += size;
          }
          const out: Line[] = [];
          for await (const line of readLines(Readable.from(chunks), 1024)) out.push(line);
          expect(out).toEqual(lines.map((text) => ({ text })));
        },
      ),
      { numRuns: 200 },
    );
  });
});
