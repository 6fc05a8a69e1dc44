import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import { openSafetensors, TensorsError } from "../../src/index.js";

const corpusDir = join(import.meta.dirname, "../corpus");
const expected = JSON.parse(readFileSync(join(corpusDir, "expected.json"), "utf8")) as Record<string, string>;
const files = readdirSync(join(corpusDir, "files")).sort();

/** Bounds per file: a hostile header must be refused quickly and without buffering much. */
const MAX_MILLISECONDS = 2000;
const MAX_HEAP_GROWTH_BYTES = 64 * 1024 * 1024;

async function openAndReadAll(path: string): Promise<number> {
  const source = await openFileByteSource(path);
  try {
    const st = await openSafetensors(source);
    let total = 0;
    for (const t of st.tensors) total += (await st.readTensor(t.name)).length;
    return total;
  } finally {
    await source.close();
  }
}

describe("malformed safetensors corpus", () => {
  it("has a generated file for every expectation and at least 89 hostile cases", () => {
    expect(files).toEqual(Object.keys(expected).sort());
    expect(Object.values(expected).filter((code) => code !== "ok").length).toBeGreaterThanOrEqual(89);
  });

  it.each(files)("%s yields its named outcome within bounds", async (name) => {
    const heapBefore = process.memoryUsage().heapUsed;
    const started = performance.now();
    const outcome = await openAndReadAll(join(corpusDir, "files", name)).then(
      () => "ok",
      (error: unknown) => error,
    );
    expect(performance.now() - started).toBeLessThan(MAX_MILLISECONDS);
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(MAX_HEAP_GROWTH_BYTES);
    if (expected[name] === "ok") {
      expect(outcome).toBe("ok");
      return;
    }
    expect(outcome).toBeInstanceOf(TensorsError);
    const error = outcome as TensorsError;
    expect(error.code).toBe(expected[name]);
    expect(error.file).toContain(name);
    expect(error.kind).toBe("input");
    expect(error.message).toMatch(/^read safetensors header of /);
  });
});
