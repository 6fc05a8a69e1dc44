import { execFileSync } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { bufferByteSource, openFileByteSource } from "@ckpt/manifest";
import { TORCH_PYTHON, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  type DType,
  f32ToBf16Bytes,
  openHfDirectory,
  openSafetensors,
  planSafetensors,
  planShards,
  type TensorDescription,
  writeSafetensors,
  writeShardedSafetensors,
} from "../../src/index.js";

interface Fixture extends TensorDescription {
  bytes: Uint8Array;
  /** What numpy should print: numbers for numeric dtypes, raw bit patterns for BF16. */
  values: Array<number | boolean>;
}

function fixture(name: string, dtype: DType, shape: number[], values: number[]): Fixture {
  const make: Partial<Record<DType, () => ArrayBufferView>> = {
    F64: () => Float64Array.from(values),
    F32: () => Float32Array.from(values),
    I64: () => BigInt64Array.from(values.map(BigInt)),
    I32: () => Int32Array.from(values),
    I16: () => Int16Array.from(values),
    I8: () => Int8Array.from(values),
    U8: () => Uint8Array.from(values),
    U16: () => Uint16Array.from(values),
    U32: () => Uint32Array.from(values),
    U64: () => BigUint64Array.from(values.map(BigInt)),
    BOOL: () => Uint8Array.from(values),
    BF16: () => {
      const out = new Uint8Array(values.length * 2);
      f32ToBf16Bytes(Float32Array.from(values), out);
      return out;
    },
    F16: () => Uint16Array.from(values),
  };
  const view = make[dtype]!();
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const expected =
    dtype === "BF16"
      ? Array.from(new Uint16Array(bytes.slice().buffer))
      : dtype === "F16"
        ? [1, -2, 0.5, 65504].slice(0, values.length)
        : dtype === "BOOL"
          ? values.map((v) => v !== 0)
          : Array.from(view as unknown as ArrayLike<number>, Number);
  return { name, dtype, shape, bytes, values: expected };
}

const fixtures: Fixture[] = [
  fixture("model.embed.weight", "F32", [2, 3], [0.1, -2.5, 3e-39, 1e38, -0, 7]),
  fixture("model.norm.weight", "BF16", [4], [1, -0.333, 65504, 1e-30]),
  fixture("half", "F16", [4], [0x3c00, 0xc000, 0x3800, 0x7bff]),
  fixture("double", "F64", [3], [Math.PI, -1e-300, 2 ** 60]),
  fixture("steps", "I64", [2], [-(2 ** 53) + 1, 2 ** 40]),
  fixture("ids", "I32", [3], [-1, 0, 2 ** 31 - 1]),
  fixture("small", "I16", [2], [-32768, 12]),
  fixture("bytes", "U8", [1, 3], [0, 128, 255]),
  fixture("i8", "I8", [2], [-128, 127]),
  fixture("u16", "U16", [1], [65535]),
  fixture("u32", "U32", [1], [2 ** 32 - 1]),
  fixture("u64", "U64", [1], [2 ** 52 + 3]),
  fixture("mask", "BOOL", [2, 2], [1, 0, 0, 1]),
  fixture("empty", "F32", [0, 4], []),
  fixture("scalar", "F32", [], [42]),
];

function numpyRead(path: string): Record<string, { dtype: string; shape: number[]; values: unknown[] }> {
  // python3 with numpy is a declared test dependency: a missing one fails this test.
  const out = execFileSync(TORCH_PYTHON, [join(import.meta.dirname, "numpy_read.py"), path], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out);
}

const provider = (t: { name: string }) => fixtures.find((f) => f.name === t.name)!.bytes;

describe("safetensors writer", () => {
  it("pads the header with spaces to an 8-byte boundary and lays tensors out in the given order", () => {
    const plan = planSafetensors(fixtures, { format: "pt" });
    const headerLength = Number(new DataView(plan.headerBytes.buffer).getBigUint64(0, true));
    expect((8 + headerLength) % 8).toBe(0);
    expect(plan.headerBytes.length).toBe(8 + headerLength);
    const text = new TextDecoder().decode(plan.headerBytes.subarray(8));
    expect(text.startsWith('{"__metadata__":{"format":"pt"},"model.embed.weight":')).toBe(true);
    expect(text).toMatch(/^\{.*\} *$/s);
    expect(plan.tensors.map((t) => t.name)).toEqual(fixtures.map((f) => f.name));
    expect(plan.fileSize).toBe(plan.headerBytes.length + fixtures.reduce((a, f) => a + f.bytes.length, 0));
  });

  it("writes a file numpy reads back with identical values, and ckpt reads back byte for byte", {
    tags: ["torch"],
  }, async () => {
    const dir = await testdir();
    const path = join(dir, "model.safetensors");
    const written = await writeSafetensors(path, fixtures, provider, { metadata: { format: "pt" } });
    expect((await readFile(path)).length).toBe(written.size);
    expect(await readdir(dir)).toEqual(["model.safetensors"]);

    const fromNumpy = numpyRead(path);
    for (const f of fixtures) {
      expect(fromNumpy[f.name], f.name).toEqual({ dtype: f.dtype, shape: f.shape, values: f.values });
    }

    const source = await openFileByteSource(path);
    try {
      const st = await openSafetensors(source);
      expect(st.metadata).toEqual({ format: "pt" });
      expect(st.tensors.map((t) => [t.name, t.dtype, t.shape])).toEqual(
        fixtures.map((f) => [f.name, f.dtype, f.shape]),
      );
      const pool = new Uint8Array(64);
      for (const f of fixtures) {
        const got = await st.readTensor(f.name, pool);
        expect(got.buffer).toBe(pool.buffer);
        expect(Array.from(got)).toEqual(Array.from(f.bytes));
      }
      await expect(st.readTensor("nope")).rejects.toMatchObject({
        code: "SAFETENSORS_TENSOR_NOT_FOUND",
        tensor: "nope",
      });
      await expect(st.readTensor("model.embed.weight", new Uint8Array(3))).rejects.toMatchObject({
        code: "SAFETENSORS_BUFFER_TOO_SMALL",
      });
    } finally {
      await source.close();
    }
  });

  it("refuses bad descriptions and a provider that gives the wrong byte count, leaving no file behind", async () => {
    const dir = await testdir();
    const a = { name: "a", dtype: "F32" as const, shape: [2] };
    expect(() => planSafetensors([a, a])).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_DUPLICATE_NAME" }),
    );
    expect(() => planSafetensors([{ ...a, name: "__metadata__" }])).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_DUPLICATE_NAME" }),
    );
    expect(() => planSafetensors([{ ...a, dtype: "F128" as DType }])).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_INVALID_TENSOR" }),
    );
    expect(() => planSafetensors([{ ...a, shape: [-1] }])).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_INVALID_TENSOR" }),
    );
    // Packed dtypes: 3 F4 elements (12 bits) or 2 F6 elements (12 bits) end mid-byte.
    expect(() => planSafetensors([{ ...a, dtype: "F4", shape: [3] }])).toThrow(
      expect.objectContaining({
        code: "SAFETENSORS_WRITE_INVALID_TENSOR",
        message: expect.stringMatching(/byte boundary/),
      }),
    );
    expect(() => planSafetensors([{ ...a, dtype: "F6_E3M2", shape: [2] }])).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_INVALID_TENSOR" }),
    );
    expect(
      planSafetensors([
        { ...a, dtype: "F4", shape: [3, 2] },
        { name: "b", dtype: "F6_E2M3", shape: [4] },
      ]).tensors.map((t) => t.dataOffsets),
    ).toEqual([
      [0, 3],
      [3, 6],
    ]);
    await expect(
      writeSafetensors(join(dir, "x.safetensors"), [a], () => new Uint8Array(7)),
    ).rejects.toMatchObject({
      code: "SAFETENSORS_WRITE_SIZE_MISMATCH",
      tensor: "a",
    });
    expect(await readdir(dir)).toEqual([]);
  });

  it("plans shards in order, giving an oversized tensor its own shard", () => {
    const t = (name: string, n: number) => ({ name, dtype: "U8" as const, shape: [n] });
    const shards = planShards([t("a", 40), t("b", 50), t("c", 200), t("d", 10), t("e", 95)], 100);
    expect(shards.map((s) => [s.file, s.tensorIndices])).toEqual([
      ["model-00001-of-00004.safetensors", [0, 1]],
      ["model-00002-of-00004.safetensors", [2]],
      ["model-00003-of-00004.safetensors", [3]],
      ["model-00004-of-00004.safetensors", [4]],
    ]);
    expect(() => planShards([t("a", 1)], 0)).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_INVALID_SHARD_SIZE" }),
    );
    expect(() => planShards([t("a", 1), t("a", 2)], 10)).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_DUPLICATE_NAME" }),
    );
  });

  it("writes shards plus an index that ckpt and numpy both read back", { tags: ["torch"] }, async () => {
    const dir = await testdir();
    const result = await writeShardedSafetensors(dir, fixtures, provider, { maxShardBytes: 24 });
    const totalSize = fixtures.reduce((a, f) => a + f.bytes.length, 0);
    expect(result.totalSize).toBe(totalSize);
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8"));
    expect(index.metadata).toEqual({ total_size: totalSize });
    expect(Object.keys(index.weight_map)).toEqual(fixtures.map((f) => f.name));
    const files = (await readdir(dir)).sort();
    const n = result.shards.length;
    expect(n).toBeGreaterThan(2);
    expect(files).toEqual(
      [
        ...Array.from(
          { length: n },
          (_, i) => `model-${String(i + 1).padStart(5, "0")}-of-${String(n).padStart(5, "0")}.safetensors`,
        ),
        "model.safetensors.index.json",
      ].sort(),
    );

    const fromNumpy = numpyRead(dir);
    for (const f of fixtures) expect(fromNumpy[f.name]!.values, f.name).toEqual(f.values);

    const hf = await openHfDirectory(dir);
    try {
      expect(hf.files.map((f) => f.file)).toEqual(result.shards.map((s) => s.path.slice(dir.length + 1)));
      for (const f of fixtures) expect(Array.from(await hf.readTensor(f.name))).toEqual(Array.from(f.bytes));
    } finally {
      await hf.close();
    }
  });

  it("reads from an in-memory source too", async () => {
    const plan = planSafetensors(fixtures.slice(0, 2));
    const bytes = new Uint8Array(plan.fileSize);
    bytes.set(plan.headerBytes);
    let at = plan.headerBytes.length;
    for (const f of fixtures.slice(0, 2)) {
      bytes.set(f.bytes, at);
      at += f.bytes.length;
    }
    const st = await openSafetensors(bufferByteSource("mem.safetensors", bytes));
    expect(Array.from(await st.readTensor("model.norm.weight"))).toEqual(Array.from(fixtures[1]!.bytes));
  });
});
