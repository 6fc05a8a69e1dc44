// @module-tag torch
import { rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, test } from "vitest";
import { checkDcpDirectory, readDcpMetadata } from "../../src/dcp/metadata.js";
import { PYTHON, python } from "../torch/python.js";

interface Expected {
  tensors: { fqn: string; torchDtype: string; shape: number[]; chunks: unknown[] }[];
  bytes: unknown[];
  files: Record<string, number>;
}

let root: string;
let expected: Record<string, Expected>;

beforeAll(async () => {
  root = await testdir("ckpt-dcp-");
  expect(PYTHON).toBe("/usr/bin/python3");
  expected = await python(join(import.meta.dirname, "make_dcp_fixture.py"), root);
});

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
