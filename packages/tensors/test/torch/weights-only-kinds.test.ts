// @module-tag torch
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { testdir, torch2Python } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { inspectPath, TensorsError, verifyTensorFile } from "../../src/index.js";

const run = promisify(execFile);
const FIXTURE = join(import.meta.dirname, "weights_only_fixture.py");

type Digests = Record<string, Record<string, { shape: number[]; sha256: string }>>;

let root = "";
let torch: Digests = {};
beforeAll(async () => {
  root = await testdir("ckpt-weights-only-");
  const { stdout } = await run(torch2Python(), [FIXTURE, root], { maxBuffer: 1024 * 1024 });
  torch = JSON.parse(stdout) as Digests;
}, 120_000);

async function hashed(file: string) {
  const report = await inspectPath(join(root, file), { sha256: true });
  return Object.fromEntries(report.tensors.map((t) => [t.name, { shape: t.shape, sha256: t.sha256 }]));
}

describe("files torch.load(weights_only=True) reads", () => {
  it("complex64 and complex128 tensors, a transposed view included, hash as torch's bytes", async () => {
    expect(await hashed("complex.pt")).toEqual(torch["complex.pt"]);
    const report = await inspectPath(join(root, "complex.pt"));
    expect(report.tensors.map((t) => [t.name, t.dtype, t.bytes])).toEqual([
      ["c64", "C64", 48],
      ["c128", "C128", 32],
      ["c64_t", "C64", 48],
    ]);
  });

  it("a dotted key beside the nested path it spells is named unambiguously, not refused", async () => {
    expect(await hashed("dotted.pt")).toEqual(torch["dotted.pt"]);
  });

  it("sparse COO and CSR tensors read as their component tensors; a meta tensor, holding no data, is not listed", async () => {
    expect(await hashed("sparse.pt")).toEqual(torch["sparse.pt"]);
  });

  it("the legacy non-zip format is recognised by name at every pickle protocol", async () => {
    for (let protocol = 0; protocol <= 5; protocol++) {
      const path = join(root, `legacy_${protocol}.pt`);
      const error = await inspectPath(path).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TensorsError);
      expect({ protocol, code: (error as TensorsError).code }).toEqual({
        protocol,
        code: "TORCH_LEGACY_FORMAT",
      });
      const report = await verifyTensorFile(path);
      expect(report.format).toBe("torch");
      expect(report.problems).toEqual([
        expect.objectContaining({ code: "FILE_UNREADABLE", cause: "TORCH_LEGACY_FORMAT" }),
      ]);
    }
  });
});
