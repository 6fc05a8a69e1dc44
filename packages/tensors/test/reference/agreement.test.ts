// @module-tag torch
// ckpt's safetensors reader and the reference library (safetensors 0.8) judge the same files: the
// hostile corpus (test/corpus) and the reference-agreement corpus (test/reference/corpus, made by
// generate.mjs). Every verdict (accept or refuse) must agree, except the cases differences.json
// lists, where ckpt is stricter by design; those must really differ, in that direction.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { referenceSafetensors } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { openSafetensors, TensorsError } from "../../src/index.js";

const here = import.meta.dirname;
const corpora = [join(here, "../corpus"), here].map((dir) => {
  const files = join(dir, dir === here ? "corpus" : "files");
  const expected = JSON.parse(readFileSync(join(dir, "expected.json"), "utf8")) as Record<string, string>;
  return readdirSync(files)
    .sort()
    .map((name) => ({ name, path: join(files, name), expected: expected[name] }));
});
const cases = corpora.flat();
const differences = JSON.parse(readFileSync(join(here, "differences.json"), "utf8")) as Record<
  string,
  string
>;

interface Verdict {
  ok: boolean;
  error?: string;
}
let reference: Record<string, { deserialize: Verdict; safe_open: Verdict }>;

beforeAll(async () => {
  reference = await referenceSafetensors("judge", ...cases.map((c) => c.path));
}, 120_000);

async function ckptVerdict(path: string): Promise<string> {
  const source = await openFileByteSource(path);
  try {
    const st = await openSafetensors(source);
    for (const t of st.tensors) await st.readTensor(t.name);
    return "ok";
  } catch (error) {
    if (error instanceof TensorsError) return error.code;
    throw error;
  } finally {
    await source.close();
  }
}

describe("safetensors verdicts: ckpt against the reference library", () => {
  it("covers both corpora, every case with an expectation, and keeps the allow-list small", () => {
    expect(corpora[0]!.length).toBeGreaterThanOrEqual(97);
    expect(corpora[1]!.length).toBeGreaterThanOrEqual(43);
    for (const c of cases) expect(c.expected, c.name).toBeDefined();
    for (const name of Object.keys(differences)) expect(cases.map((c) => c.name)).toContain(name);
    expect(Object.keys(differences).length).toBeLessThanOrEqual(6);
  });

  it.each(cases)("$name: same verdict (or a documented, stricter ckpt)", async ({ name, path, expected }) => {
    const ours = await ckptVerdict(path);
    expect(ours).toBe(expected);
    const theirs = reference[path]!;
    // The reference's two entry points share one validation; a split would make it no judge.
    expect(theirs.safe_open.ok, theirs.safe_open.error).toBe(theirs.deserialize.ok);
    const reason = differences[name];
    if (reason === undefined) {
      expect(ours === "ok", `reference: ${theirs.deserialize.error ?? "accepted"}`).toBe(
        theirs.deserialize.ok,
      );
    } else {
      expect(ours).not.toBe("ok");
      expect(theirs.deserialize.ok, reason).toBe(true);
    }
  });
});
