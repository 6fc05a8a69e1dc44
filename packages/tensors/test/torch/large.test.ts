// @module-tag torch
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { testdir, torch2Python } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { TensorsError } from "../../src/errors.js";
import { inspectPath, openTorchFile, verifyTensorFile } from "../../src/index.js";
import { openFileByteSource } from "@ckpt/manifest";

const run = promisify(execFile);
const FIXTURE = join(import.meta.dirname, "large_fixture.py");
/** 4.5 GiB of float32: past the 4 GiB a typed array can hold. */
const LARGE_NUMEL = (4.5 * 1024 ** 3) / 4;
/** Peak memory of this worker: a reader buffering the 4.5 GiB tensor or a 1 GiB expansion passes it. */
const MAX_RSS_BYTES = 768 * 1024 ** 2;

interface Digest {
  readonly shape: number[];
  readonly sha256?: string;
}

async function fixture(...args: string[]): Promise<Record<string, Digest>> {
  const { stdout } = await run(torch2Python(), [FIXTURE, ...args], { maxBuffer: 1024 * 1024 });
  return JSON.parse(stdout) as Record<string, Digest>;
}

function peakRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}

let root = "";
beforeAll(async () => {
  root = await testdir("ckpt-large-");
});

describe("tensors larger than a buffer", () => {
  it("a 4.5 GiB tensor is hashed and scanned streaming, as torch reads it", async () => {
    const path = join(root, "large.pt");
    const torch = await fixture("sparse", path, String(LARGE_NUMEL));
    const report = await inspectPath(path, { sha256: true });
    expect(report.tensors.map((t) => [t.name, t.shape, t.bytes, t.sha256])).toEqual([
      ["w", torch.w!.shape, LARGE_NUMEL * 4, torch.w!.sha256],
    ]);
    const verified = await verifyTensorFile(path, { crc: true, finite: true });
    expect(verified.problems).toEqual([]);
    expect(verified.scannedBytes).toBe(LARGE_NUMEL * 4);

    const source = await openFileByteSource(path);
    try {
      const file = await openTorchFile(source);
      const error = await file.readTensor(file.tensors[0]!).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TensorsError);
      expect((error as TensorsError).code).toBe("TORCH_TENSOR_TOO_LARGE");
      expect((error as TensorsError).message).toContain("tensorPieces");
    } finally {
      await source.close();
    }
    expect(peakRss()).toBeLessThan(MAX_RSS_BYTES);
  }, 600_000);

  it("stride-0 expansions hash as torch's contiguous bytes; one past the cap is refused by name", async () => {
    const torch = await fixture("expanded", root);
    const views = await inspectPath(join(root, "views.pt"), { sha256: true });
    expect(views.tensors.map((t) => [t.name, t.shape, t.sha256])).toEqual([
      ["row", torch.row!.shape, torch.row!.sha256],
      ["column", torch.column!.shape, torch.column!.sha256],
    ]);
    expect(peakRss()).toBeLessThan(MAX_RSS_BYTES);

    const tib = join(root, "tib.pt");
    expect((await inspectPath(tib)).tensors.map((t) => [t.name, t.bytes])).toEqual([["tib", 2 ** 40]]);
    const error = await inspectPath(tib, { sha256: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TensorsError);
    expect(error).toMatchObject({ code: "TORCH_VIEW_TOO_LARGE", tensor: "tib", file: tib });
    expect((error as Error).message).toContain(String(16 * 1024 ** 3));
    const verified = await verifyTensorFile(tib, { finite: true });
    expect(verified.problems).toEqual([
      expect.objectContaining({ code: "FILE_UNREADABLE", tensor: "tib", cause: "TORCH_VIEW_TOO_LARGE" }),
    ]);
  }, 300_000);
});
