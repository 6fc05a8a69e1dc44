// @module-tag torch
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { mulberry32, randomInt } from "@ckpt/test-utils";
import { describe, expect, test } from "vitest";
import { type DType, dtypeSize } from "../../src/dtypes.js";
import { PickleFloat } from "../../src/torch/pickle/values.js";
import { openTorchFile } from "../../src/torch/reader.js";
import { type TorchTensorDesc, type TorchTree, writeTorchFile } from "../../src/torch/writer/write.js";
import { type Digest, HELPER, PYTHON_TEST_TIMEOUT, python, scratch, sha256 } from "./python.js";

interface Loaded {
  tensors: Record<string, Digest>;
  weightsOnly: Record<string, Digest>;
  tree: unknown;
  dataOffsets: Record<string, number>;
}

/** Deterministic bytes for a tensor, valid for its dtype (bool bytes are 0/1). */
function bytesFor(name: string, desc: TorchTensorDesc): Uint8Array {
  const n = desc.shape.reduce((a, b) => a * b, 1) * dtypeSize(desc.dtype);
  const out = new Uint8Array(n);
  const random = mulberry32([...name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7));
  for (let i = 0; i < n; i++) out[i] = randomInt(random, 0, desc.dtype === "BOOL" ? 1 : 255);
  // Keep floats finite so NaN payloads cannot differ between writers.
  if (desc.dtype === "F16" || desc.dtype === "BF16") for (let i = 1; i < n; i += 2) out[i]! &= 0x3f;
  if (desc.dtype === "F32") for (let i = 3; i < n; i += 4) out[i]! &= 0x3f;
  if (desc.dtype === "F64") for (let i = 7; i < n; i += 8) out[i]! &= 0x3f;
  return out;
}

const DTYPES: DType[] = ["BF16", "F16", "F32", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"];

describe("files written by ckpt load in torch", () => {
  test(
    "every dtype, nested dicts, 0-d, empty, many tensors; torch.load and weights_only agree",
    async () => {
      const dir = await scratch();
      const many: Record<string, TorchTensorDesc> = {};
      for (let i = 0; i < 300; i++) many[`layer${i}.w`] = { dtype: "F32", shape: [2] };
      many.wide = { dtype: "I8", shape: [70_000] };
      const tree: TorchTree = {
        model: Object.fromEntries(DTYPES.map((dtype, i) => [`t_${dtype}`, { dtype, shape: [i + 1, 3] }])),
        ema: { inner: { scalar: { dtype: "F64", shape: [] }, empty: { dtype: "F32", shape: [0, 4] } } },
        many,
        step: 1234,
        big_step: 2 ** 40,
        name: "run-ß",
        done: false,
        nothing: null,
      };
      const provided: Record<string, Digest> = {};
      const path = join(dir, "written.pt");
      const result = await writeTorchFile(path, {
        tree,
        provideTensor(name, desc) {
          const bytes = bytesFor(name, desc);
          provided[name] = { dtype: desc.dtype, shape: [...desc.shape], sha256: sha256(bytes) };
          // Stream the larger tensors in chunks to exercise the chunked path.
          if (bytes.length > 1000) {
            return (async function* () {
              for (let at = 0; at < bytes.length; at += 4096) yield bytes.subarray(at, at + 4096);
            })();
          }
          return bytes;
        },
      });
      expect(result.tensors).toBe(Object.keys(provided).length);
      expect((await stat(path)).size).toBe(result.bytes);
      expect(await readdir(dir)).toEqual(["written.pt"]);

      // Float scalars load with torch.load; torch 1.13's weights_only unpickler has no BINFLOAT, so they get a file of their own.
      const floats = join(dir, "floats.pt");
      await writeTorchFile(floats, {
        tree: {
          lr: 0.5,
          tiny: 1e-300,
          one: new PickleFloat(1),
          negative_zero: -0,
          count: 1,
          w: { dtype: "F32", shape: [1] },
        },
        provideTensor: () => new Uint8Array([0, 0, 128, 63]),
      });
      const both = await python<Record<string, Loaded>>(HELPER, "load", path, floats);
      expect(both["floats.pt"]!.tree).toMatchObject({
        items: {
          lr: { type: "float", value: 0.5 },
          tiny: { type: "float", value: 1e-300 },
          one: { type: "float", value: 1 },
          negative_zero: { type: "float", value: -0 },
          count: { type: "int", value: 1 },
        },
      });
      const loaded = both["written.pt"]!;
      expect(loaded.tensors).toEqual(provided);
      expect(loaded.weightsOnly).toEqual(provided);
      expect(loaded.tree).toMatchObject({
        type: "dict",
        items: {
          model: { type: "OrderedDict" },
          ema: { type: "dict", items: { inner: { type: "OrderedDict" } } },
          step: { type: "int", value: 1234 },
          big_step: { type: "int", value: 2 ** 40 },
          name: { type: "str", value: "run-ß" },
          done: { type: "bool", value: false },
          nothing: { type: "NoneType", value: null },
        },
      });
      for (const [member, offset] of Object.entries(loaded.dataOffsets)) {
        expect([member, offset % 64]).toEqual([member, 0]);
      }
      expect(Object.keys(loaded.dataOffsets)).toEqual(
        expect.arrayContaining(["written/version", "written/byteorder"]),
      );

      const file = await openTorchFile(await openFileByteSource(path));
      for (const entry of file.tensors)
        expect(sha256(await file.readTensor(entry))).toBe(provided[entry.name]!.sha256);
      await file.close();
      const floatFile = await openTorchFile(await openFileByteSource(floats));
      expect((floatFile.root as { map: Map<string, unknown> }).map.get("tiny")).toEqual(
        new PickleFloat(1e-300),
      );
      await floatFile.close();
    },
    PYTHON_TEST_TIMEOUT,
  );

  test("a provider giving the wrong byte count fails with a named error and leaves no file", async () => {
    const dir = await scratch();
    const path = join(dir, "bad.pt");
    await expect(
      writeTorchFile(path, {
        tree: { a: { dtype: "F32", shape: [4] } },
        provideTensor: () => new Uint8Array(15),
      }),
    ).rejects.toMatchObject({ code: "TORCH_WRITE_SIZE_MISMATCH", tensor: "a" });
    await expect(
      writeTorchFile(path, {
        tree: { a: { dtype: "F32", shape: [1] } },
        provideTensor: () => new Uint8Array(5),
      }),
    ).rejects.toMatchObject({ code: "TORCH_WRITE_SIZE_MISMATCH" });
    expect(await readdir(dir)).toEqual([]);
  });

  test("dtypes torch has no storage class for are refused before anything is written", async () => {
    const dir = await scratch();
    await expect(
      writeTorchFile(join(dir, "x.pt"), {
        tree: { a: { dtype: "U16", shape: [1] } },
        provideTensor: () => new Uint8Array(2),
      }),
    ).rejects.toMatchObject({ code: "TORCH_WRITE_DTYPE_UNSUPPORTED", tensor: "a" });
    expect(await readdir(dir)).toEqual([]);
  });
});
