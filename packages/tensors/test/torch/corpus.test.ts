import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { bufferByteSource } from "@ckpt/manifest";
import { expect, test } from "vitest";
import { TensorsError } from "../../src/errors.js";
import { inspectPath } from "../../src/inspect.js";
import { openTorchFile } from "../../src/torch/reader.js";

const CORPUS = join(import.meta.dirname, "corpus");
const expected = JSON.parse(await readFile(join(CORPUS, "expected.json"), "utf8")) as Record<string, string>;

/** Opens a file and reads every tensor; a hostile file must fail somewhere on that path. */
async function openAndReadAll(name: string): Promise<unknown> {
  const bytes = new Uint8Array(await readFile(join(CORPUS, name)));
  const file = await openTorchFile(bufferByteSource(name, bytes));
  for (const entry of file.tensors) await file.readTensor(entry);
  return file;
}

/** What `ckpt inspect --sha256` answers where it differs from a whole read (which refuses earlier). */
const INSPECT_SHA256_CODE: Record<string, string> = {
  "zip64_tensor_claims_10gib_deflated.pt": "ZIP_BOMB",
};
const CLAIMS_10_GIB = Object.keys(expected).filter((name) => name.includes("claims_10gib"));
/** Peak memory of this worker: allocating any claimed 10 GiB (or 1 GiB of it) passes it. */
const MAX_RSS_BYTES = 768 * 1024 ** 2;

test("the corpus holds at least 105 hostile files, each with an expected code", () => {
  expect(Object.keys(expected).length).toBeGreaterThanOrEqual(105);
});

test.each(Object.entries(expected))("%s is refused with %s", async (name, code) => {
  const started = performance.now();
  const error = await openAndReadAll(name).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TensorsError);
  expect({ code: (error as TensorsError).code, file: (error as TensorsError).file }).toEqual({
    code,
    file: name,
  });
  expect((error as Error).message).toContain(name);
  // Bounded work: no file in the corpus may take long, whatever it claims.
  expect(performance.now() - started).toBeLessThan(5000);
});

test("the corpus holds zip members claiming 10 GiB", () => {
  expect(CLAIMS_10_GIB.length).toBeGreaterThanOrEqual(6);
});

test.each(CLAIMS_10_GIB)(
  "%s: inspect --sha256 refuses a 10 GiB claim by code, in bounded time and memory",
  async (name) => {
    const started = performance.now();
    const error = await inspectPath(join(CORPUS, name), { sha256: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TensorsError);
    expect((error as TensorsError).code).toBe(INSPECT_SHA256_CODE[name] ?? expected[name]);
    expect((error as Error).message).toContain(name);
    expect(performance.now() - started).toBeLessThan(5000);
    expect(process.resourceUsage().maxRSS * 1024).toBeLessThan(MAX_RSS_BYTES);
  },
);
