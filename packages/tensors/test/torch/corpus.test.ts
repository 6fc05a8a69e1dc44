import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { bufferByteSource } from "@ckpt/manifest";
import { expect, test } from "vitest";
import { TensorsError } from "../../src/errors.js";
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
