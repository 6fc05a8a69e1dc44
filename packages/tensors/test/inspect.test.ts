import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TORCH_PYTHON, testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  inspectPath,
  type TensorDescription,
  writeSafetensors,
  writeShardedSafetensors,
} from "../src/index.js";

let root = "";
beforeAll(async () => {
  root = await testdir("ckpt-inspect-");
});

const tensors: TensorDescription[] = [
  { name: "w", dtype: "BF16", shape: [2, 3] },
  { name: "b", dtype: "F32", shape: [3] },
  { name: "n", dtype: "I64", shape: [] },
];
const bytesOf = (t: { byteLength: number; name: string }) =>
  Uint8Array.from({ length: t.byteLength }, (_, i) => (i * 7 + t.name.charCodeAt(0)) & 0xff);
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const expectedRows = (withHash: boolean) =>
  tensors.map((t) => {
    const byteLength =
      t.shape.reduce((a, d) => a * d, 1) * (t.dtype === "BF16" ? 2 : t.dtype === "F32" ? 4 : 8);
    return {
      name: t.name,
      dtype: t.dtype,
      shape: t.shape,
      bytes: byteLength,
      ...(withHash ? { sha256: sha(bytesOf({ name: t.name, byteLength })) } : {}),
    };
  });

describe("inspectPath", () => {
  it("lists a .safetensors file, with per-tensor SHA-256 on request", async () => {
    const path = join(root, "one.safetensors");
    await writeSafetensors(path, tensors, bytesOf, { metadata: { format: "pt" } });
    const plain = await inspectPath(path);
    expect(plain.kind).toBe("safetensors");
    expect(plain.metadata).toEqual({ format: "pt" });
    expect(plain.tensors.map(({ file: _f, ...rest }) => rest)).toEqual(expectedRows(false));
    const hashed = await inspectPath(path, { sha256: true });
    expect(hashed.tensors.map(({ file: _f, ...rest }) => rest)).toEqual(expectedRows(true));
  });

  it("reports hashing progress tensor by tensor, ending at the bytes of all tensors", async () => {
    const dir = join(root, "hf-progress");
    await writeShardedSafetensors(dir, tensors, bytesOf, { maxShardBytes: 12 });
    const events: Array<{ path: string; doneBytes: number; totalBytes: number }> = [];
    await inspectPath(dir, { sha256: true, onProgress: (e) => events.push(e) });
    expect(events.map((e) => [e.path, e.doneBytes, e.totalBytes])).toEqual([
      ["w", 12, 32],
      ["b", 24, 32],
      ["n", 32, 32],
    ]);
    await inspectPath(dir, { onProgress: (e) => events.push(e) });
    expect(events).toHaveLength(3); // nothing is hashed without sha256
  });

  it("lists a sharded Hugging Face directory, index first in the files", async () => {
    const dir = join(root, "hf");
    await writeShardedSafetensors(dir, tensors, bytesOf, { maxShardBytes: 12 });
    const report = await inspectPath(dir, { sha256: true });
    expect(report.kind).toBe("hf-directory");
    expect(report.files[0]!.file).toBe("model.safetensors.index.json");
    expect(report.files.length).toBe(4);
    expect(report.tensors.map(({ file: _f, ...rest }) => rest)).toEqual(expectedRows(true));
    expect(report.tensors.map((t) => t.file)).toEqual([
      "model-00001-of-00003.safetensors",
      "model-00002-of-00003.safetensors",
      "model-00003-of-00003.safetensors",
    ]);
  });

  it("lists a torch.save file whatever its extension, hashes matching torch's bytes", {
    tags: ["torch"],
  }, async () => {
    const path = join(root, "state.bin");
    const script = `
import hashlib, json, sys, torch
sd = {"model": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3).t(), "e": torch.ones(3, dtype=torch.bfloat16)}, "step": torch.tensor(5)}
torch.save(sd, sys.argv[1])
def raw(t):
    t = t.contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
rows = [("model.w", sd["model"]["w"], "F32"), ("model.e", sd["model"]["e"], "BF16"), ("step", sd["step"], "I64")]
print(json.dumps([{"name": n, "dtype": d, "shape": list(t.shape), "bytes": t.numel() * t.element_size(), "sha256": hashlib.sha256(raw(t)).hexdigest()} for n, t, d in rows]))
`;
    const expected = JSON.parse(execFileSync(TORCH_PYTHON, ["-c", script, path], { encoding: "utf8" }));
    const report = await inspectPath(path, { sha256: true });
    expect(report.kind).toBe("torch");
    expect(report.tensors.map(({ file: _f, ...rest }) => rest)).toEqual(expected);
  });

  it("lists a torch.distributed.checkpoint directory from its .metadata", { tags: ["torch"] }, async () => {
    const fixtures = join(root, "dcp");
    await mkdir(fixtures, { recursive: true });
    execFileSync(TORCH_PYTHON, [join(import.meta.dirname, "dcp/make_dcp_fixture.py"), fixtures]);
    const report = await inspectPath(join(fixtures, "p2"));
    expect(report.kind).toBe("dcp");
    expect(report.files.map((f) => f.file)).toEqual([".metadata", "__0_0.distcp", "__1_0.distcp"]);
    expect(report.tensors).toEqual([
      { name: "model.w", dtype: "BF16", shape: [8, 4], bytes: 64, file: "__0_0.distcp,__1_0.distcp" },
      { name: "model.b", dtype: "F32", shape: [4], bytes: 16, file: "__0_0.distcp" },
      { name: "optim.step", dtype: "I64", shape: [], bytes: 8, file: "__1_0.distcp" },
    ]);
  });

  it("refuses what it cannot recognise with named errors", async () => {
    await expect(inspectPath(join(root, "missing"))).rejects.toMatchObject({
      code: "INSPECT_NOT_FOUND",
      kind: "input",
    });
    await writeFile(join(root, "notes.txt"), "hello");
    await expect(inspectPath(join(root, "notes.txt"))).rejects.toMatchObject({
      code: "INSPECT_UNKNOWN_FORMAT",
    });
    const empty = join(root, "empty-dir");
    await mkdir(empty, { recursive: true });
    await expect(inspectPath(empty)).rejects.toMatchObject({ code: "INSPECT_UNKNOWN_FORMAT" });
    await writeFile(join(root, "bad.safetensors"), new Uint8Array(4));
    await expect(inspectPath(join(root, "bad.safetensors"))).rejects.toMatchObject({
      code: "SAFETENSORS_FILE_TOO_SMALL",
    });
  });
});
