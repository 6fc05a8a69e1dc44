// @module-tag torch
import { rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, test } from "vitest";
import { checkDcpDirectory } from "../../src/dcp/completeness.js";
import { readDcpMetadata } from "../../src/dcp/metadata.js";
import { PYTHON, python } from "../torch/python.js";

interface Expected {
  tensors: { fqn: string; torchDtype: string; shape: number[]; chunks: unknown[] }[];
  bytes: unknown[];
  files: Record<string, number>;
}

// Generated at collection (no torch import: a moment), so the hostile cases can be listed as tests.
expect(PYTHON).toBe("/usr/bin/python3");
const root = await testdir("ckpt-dcp-");
const { valid: expected, hostile } = await python<{
  valid: Record<string, Expected>;
  /** The hostile corpus: case -> the code it is refused with and the tensor the problem names. */
  hostile: Record<string, { code: string; tensor?: string }>;
}>(join(import.meta.dirname, "make_dcp_fixture.py"), root);

describe("DCP .metadata written by pickle (protocols 2, 4, 5)", () => {
  test.each(["p2", "p4", "p5"])("%s lists tensors, chunks, bytes entries and storage files", async (name) => {
    const metadata = await readDcpMetadata(join(root, name));
    const want = expected[name]!;
    expect(
      metadata.tensors.map(({ fqn, torchDtype, shape, chunks }) => ({ fqn, torchDtype, shape, chunks })),
    ).toEqual(want.tensors);
    expect(metadata.tensors.map((t) => t.dtype)).toEqual(["BF16", "F32", "I64"]);
    expect(metadata.bytes).toEqual(want.bytes);
    expect(Object.fromEntries(metadata.files.map((f) => [f.relativePath, f.requiredLength]))).toEqual(
      want.files,
    );
    expect(metadata.version).toBe("1.0.0");
    expect(await checkDcpDirectory(join(root, name))).toMatchObject({ ok: true, problems: [] });
  });
});

describe("checkDcpDirectory finds what a restore would miss", () => {
  test("a missing shard and a short shard are named", async () => {
    const dir = join(root, "p4");
    const short = expected.p4!.files["__0_0.distcp"]! - 1;
    await truncate(join(dir, "__0_0.distcp"), short);
    await rm(join(dir, "__1_0.distcp"));
    const result = await checkDcpDirectory(dir);
    expect(result.ok).toBe(false);
    expect(result.problems.map(({ code, file }) => ({ code, file }))).toEqual([
      { code: "DCP_FILE_SHORT", file: "__0_0.distcp" },
      { code: "DCP_FILE_MISSING", file: "__1_0.distcp" },
    ]);
  });

  test("a metadata naming os.system is refused by name, never called", async () => {
    await expect(readDcpMetadata(join(root, "evil"))).rejects.toMatchObject({
      code: "PICKLE_GLOBAL_REFUSED",
    });
    const result = await checkDcpDirectory(join(root, "evil"));
    expect(result).toMatchObject({
      ok: false,
      problems: [{ code: "PICKLE_GLOBAL_REFUSED", file: ".metadata" }],
    });
    expect(result.problems[0]!.message).toMatch(/posix\.system|os\.system/);
  });

  test("storage paths that leave the directory are refused", async () => {
    await expect(readDcpMetadata(join(root, "unsafe"))).rejects.toMatchObject({ code: "DCP_PATH_UNSAFE" });
  });

  test("a directory without .metadata, or with a torch file in its place, is a problem", async () => {
    const dir = join(root, "p5");
    await writeFile(join(dir, ".metadata"), Uint8Array.from([0x80, 0x02, 0x4e, 0x2e]));
    await expect(readDcpMetadata(dir)).rejects.toMatchObject({ code: "DCP_METADATA_INVALID" });
    await rm(join(dir, ".metadata"));
    expect(await checkDcpDirectory(dir)).toMatchObject({
      ok: false,
      problems: [{ code: "DCP_METADATA_MISSING" }],
    });
  });
});

describe("the hostile DCP corpus (make_dcp_fixture.py HOSTILE)", () => {
  test("holds every class of damage", () => {
    expect(Object.keys(hostile).length).toBeGreaterThanOrEqual(29);
  });

  // Each case is refused with its stable code, quickly, naming the tensor when there is one; the
  // first problem is the one the case plants (checkDcpDirectory never throws on bad input).
  test.each(Object.entries(hostile))("%s is refused with its code", async (name, want) => {
    const started = performance.now();
    const { ok, problems } = await checkDcpDirectory(join(root, "hostile", name));
    expect(performance.now() - started).toBeLessThan(5000);
    expect({ name, ok, code: problems[0]?.code }).toEqual({ name, ok: false, code: want.code });
    if (want.tensor) expect(problems[0]!.message).toContain(want.tensor);
    if (problems[0]!.tensor !== undefined) expect(problems[0]!.tensor).toBe(want.tensor);
  });

  test("an unsafe storage path is refused before any file is touched", async () => {
    const dir = join(root, "hostile", "path-dotdot");
    await writeFile(join(root, "hostile", "outside.distcp"), "x");
    const { problems } = await checkDcpDirectory(dir);
    expect(problems).toEqual([expect.objectContaining({ code: "DCP_PATH_UNSAFE", file: ".metadata" })]);
  });
});
