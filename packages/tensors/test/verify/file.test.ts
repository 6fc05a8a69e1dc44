// @module-tag torch
import { copyFile, mkdir, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { writeSafetensors } from "../../src/safetensors/writer.js";
import { openTorchFile } from "../../src/torch/reader.js";
import { openFileByteSource } from "@ckpt/manifest";
import { verifyDcpDirectory, verifyTensorFile } from "../../src/verify/file.js";
import { PYTHON_TEST_TIMEOUT, python, scratch } from "../torch/python.js";

const fixtureScript = join(import.meta.dirname, "nonfinite_fixture.py");
const dcpScript = join(import.meta.dirname, "..", "dcp", "make_dcp_fixture.py");

let torchDir = "";
let expected: Record<string, [number, number, number]> = {};

beforeAll(async () => {
  torchDir = await testdir("ckpt-verify-torch-");
  expected = await python(fixtureScript, torchDir);
}, PYTHON_TEST_TIMEOUT);

/** Flips one byte of the file at `offset`. */
async function flipByte(path: string, offset: number): Promise<void> {
  const handle = await open(path, "r+");
  try {
    const one = new Uint8Array(1);
    await handle.read(one, 0, 1, offset);
    one[0] = one[0]! ^ 0xff;
    await handle.write(one, 0, 1, offset);
  } finally {
    await handle.close();
  }
}

describe("verifyTensorFile: torch.save files written by PyTorch", () => {
  it("a clean file has no problems, with or without the finite scan and the CRC check", async () => {
    const plain = await verifyTensorFile(join(torchDir, "clean.pt"));
    expect(plain).toMatchObject({ format: "torch", tensors: 3, scannedTensors: 0, problems: [], notes: [] });
    const deep = await verifyTensorFile(join(torchDir, "clean.pt"), { finite: true, crc: true });
    expect(deep).toMatchObject({ tensors: 3, scannedTensors: 2, problems: [] });
    expect(deep.scannedBytes).toBe(4 * 8 * 2 + 5 * 4);
  });

  it("--finite names every tensor holding NaN/Inf with its counts (bf16, f16, f32, a strided view); integers are skipped", async () => {
    const report = await verifyTensorFile(join(torchDir, "dirty.pt"), { finite: true });
    expect(report.scannedTensors).toBe(4);
    const found = Object.fromEntries(
      report.problems.map((p) => {
        expect(p.code).toBe("TENSOR_NOT_FINITE");
        const count = (what: string) => Number(new RegExp(`(\\d+) ${what}`).exec(p.message)?.[1] ?? 0);
        return [p.tensor!.split(".").at(-1), [count("NaN"), count("\\+Inf"), count("-Inf")]];
      }),
    );
    expect(found).toEqual(expected);
    expect(report.problems.find((p) => p.tensor === "strided")!.message).toContain("the first at element 3");
    // Without the scan nothing is read, so nothing is found.
    expect((await verifyTensorFile(join(torchDir, "dirty.pt"))).problems).toEqual([]);
  });

  it("--deep finds a flipped byte in a tensor's storage by its CRC-32 and names the tensor", async () => {
    const dir = await scratch();
    const path = join(dir, "model.pt");
    await copyFile(join(torchDir, "clean.pt"), path);
    const source = await openFileByteSource(path);
    const torch = await openTorchFile(source);
    const w = torch.tensors.find((t) => t.name === "w")!;
    // The first element of `w` sits at its storage member's data offset (found through the reader).
    const bytes = await readFile(path);
    const original = await torch.readTensor(w);
    await source.close();
    const at = bytes.indexOf(Buffer.from(original.subarray(0, 16)));
    expect(at).toBeGreaterThan(0);
    await flipByte(path, at + 1);
    expect((await verifyTensorFile(path)).problems).toEqual([]);
    const report = await verifyTensorFile(path, { crc: true });
    expect(report.problems).toEqual([
      expect.objectContaining({ code: "FILE_CRC_MISMATCH", path: "model.pt", tensor: "w" }),
    ]);
  });

  it("a truncated file is FILE_UNREADABLE with the zip reader's code as its cause", async () => {
    const dir = await scratch();
    const path = join(dir, "model.pt");
    await copyFile(join(torchDir, "clean.pt"), path);
    await truncate(path, 700);
    const report = await verifyTensorFile(path, { finite: true });
    expect(report.tensors).toBeUndefined();
    expect(report.problems).toEqual([
      expect.objectContaining({ code: "FILE_UNREADABLE", path: "model.pt", cause: "ZIP_EOCD_MISSING" }),
    ]);
  });

  it("a pickle holding Python objects ckpt does not unpickle is a note, not a problem; its zip is still CRC-checked", async () => {
    const report = await verifyTensorFile(join(torchDir, "objects.pt"), { finite: true, crc: true });
    expect(report.problems).toEqual([]);
    expect(report.tensors).toBeUndefined();
    expect(report.notes.join("\n")).toMatch(/numpy.*not allowed.*tensors were not listed or scanned/s);
  });
});

describe("verifyTensorFile: safetensors", () => {
  it("scans F32/BF16 tensors chunk by chunk and ignores integer tensors", async () => {
    const dir = await scratch();
    const path = join(dir, "model.safetensors");
    const f32 = new Float32Array(3000).map((_, i) => i / 7);
    f32[2999] = Number.NaN;
    const bf16 = new Uint16Array([0x3f80, 0xff80, 0x3f80]);
    const ints = new Int32Array([0x7f800000, -1]);
    await writeSafetensors(
      path,
      [
        { name: "a", dtype: "F32", shape: [3000] },
        { name: "b", dtype: "BF16", shape: [3] },
        { name: "i", dtype: "I32", shape: [2] },
      ],
      (t) => new Uint8Array((t.name === "a" ? f32 : t.name === "b" ? bf16 : ints).buffer),
    );
    const progress: number[] = [];
    const report = await verifyTensorFile(path, {
      finite: true,
      onProgress: (e) => progress.push(e.doneBytes),
    });
    expect(report).toMatchObject({
      format: "safetensors",
      tensors: 3,
      scannedTensors: 2,
      scannedBytes: 12006,
    });
    expect(report.problems.map((p) => [p.code, p.tensor, p.message])).toEqual([
      [
        "TENSOR_NOT_FINITE",
        "a",
        'model.safetensors: tensor "a" (F32, 3000 elements) holds 1 NaN; the first at element 2999',
      ],
      [
        "TENSOR_NOT_FINITE",
        "b",
        'model.safetensors: tensor "b" (BF16, 3 elements) holds 1 -Inf; the first at element 1',
      ],
    ]);
    expect(progress.at(-1)).toBe(12006);
  });

  it("a header past the end of the file is FILE_UNREADABLE", async () => {
    const dir = await scratch();
    const path = join(dir, "x.safetensors");
    await writeSafetensors(path, [{ name: "a", dtype: "F32", shape: [64] }], () => new Uint8Array(256));
    await truncate(path, 100);
    const report = await verifyTensorFile(path);
    expect(report.problems).toEqual([
      expect.objectContaining({ code: "FILE_UNREADABLE", path: "x.safetensors" }),
    ]);
    expect(report.problems[0]!.cause).toMatch(/^SAFETENSORS_/);
  });
});

describe("verifyTensorFile: unusable input", () => {
  it("a missing path or a file of no tensor format throws an input error instead of reporting", async () => {
    const dir = await scratch();
    await expect(verifyTensorFile(join(dir, "nope.pt"))).rejects.toMatchObject({
      code: "INSPECT_NOT_FOUND",
      kind: "input",
    });
    await writeFile(join(dir, "notes.txt"), "hello");
    await expect(verifyTensorFile(join(dir, "notes.txt"))).rejects.toMatchObject({
      code: "INSPECT_UNKNOWN_FORMAT",
      kind: "input",
    });
    // A .pt name is a claim: garbage under it is a damaged file, not unknown input.
    await writeFile(join(dir, "model.pt"), "hello");
    expect((await verifyTensorFile(join(dir, "model.pt"))).problems[0]).toMatchObject({
      code: "FILE_UNREADABLE",
    });
  });
});

describe("verifyDcpDirectory", () => {
  it(
    "maps the DCP check onto the closed set and prefixes paths with the component",
    async () => {
      const root = await scratch("ckpt-verify-dcp-");
      const { files } = (
        await python<{ valid: Record<string, { files: Record<string, number> }> }>(dcpScript, root)
      ).valid.p4!;
      const dir = join(root, "p4");
      expect(await verifyDcpDirectory(dir, "optim")).toMatchObject({ tensors: 3, problems: [] });
      await truncate(join(dir, "__0_0.distcp"), files["__0_0.distcp"]! - 1);
      await rm(join(dir, "__1_0.distcp"));
      const report = await verifyDcpDirectory(dir, "optim");
      expect(report.problems.map((p) => [p.code, p.path])).toEqual([
        ["DCP_FILE_SHORT", "optim/__0_0.distcp"],
        ["DCP_FILE_MISSING", "optim/__1_0.distcp"],
      ]);
      await mkdir(join(root, "empty"));
      expect((await verifyDcpDirectory(join(root, "empty"), "model/")).problems).toEqual([
        expect.objectContaining({
          code: "DCP_METADATA_UNREADABLE",
          path: "model/.metadata",
          cause: "DCP_METADATA_MISSING",
        }),
      ]);
    },
    PYTHON_TEST_TIMEOUT,
  );
});
