// @module-tag torch
// safetensors both ways against the reference library (safetensors 0.8 under torch 2.13): every
// file ckpt writes opens with safe_open (torch and numpy) and load_file, tensors bit-equal and
// metadata strings unchanged; every file the reference writes, ckpt reads bit-equal.
import { createHash } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { type ReferenceReading, type ReferenceTensor, referenceSafetensors, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  DTYPE_BITS,
  type DType,
  isSafetensorsDType,
  openSafetensors,
  type TensorDescription,
  writeSafetensors,
  writeShardedSafetensors,
} from "../../src/index.js";

const PYTHON_TIMEOUT = 120_000;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Every dtype safetensors 0.8 names. */
const SAFETENSORS_DTYPES = (Object.keys(DTYPE_BITS) as DType[]).filter(isSafetensorsDType);
/** Dtypes the reference's numpy framework has a numpy dtype for; the others it refuses by name. */
const NUMPY_DTYPES: readonly string[] = [
  "BOOL",
  "U8",
  "I8",
  "U16",
  "I16",
  "U32",
  "I32",
  "U64",
  "I64",
  "F16",
  "F32",
  "F64",
  "C64",
];
/** Dtypes torch has no dtype for: safe_open(framework="pt") refuses them by name. */
const NOT_TORCH_DTYPES: readonly string[] = ["F6_E2M3", "F6_E3M2"];

const METADATA = { format: "pt", note: 'ünïcode ✓ "quoted" \\ back\nnew line\ttab', "": "empty key" };

interface Written extends TensorDescription {
  bytes: Uint8Array;
}

/** Eight elements of every dtype (whole bytes even for F4 and F6), a zero-size tensor of each, a scalar. */
function everyDtype(): Written[] {
  const out: Written[] = [];
  for (const [i, dtype] of SAFETENSORS_DTYPES.entries()) {
    const bytes = Uint8Array.from({ length: DTYPE_BITS[dtype] }, (_, k) =>
      dtype === "BOOL" ? (i + k) % 2 : (i * 31 + 7 * k) % 251,
    );
    out.push({ name: dtype.toLowerCase(), dtype, shape: [2, 4], bytes });
    out.push({ name: `${dtype.toLowerCase()}.empty`, dtype, shape: [0, 4], bytes: new Uint8Array(0) });
  }
  out.push({
    name: "f32.scalar",
    dtype: "F32",
    shape: [],
    bytes: new Uint8Array(new Float32Array([1.5]).buffer),
  });
  return out;
}

function expectSame(ours: Written, theirs: ReferenceTensor | undefined, way: string): void {
  expect(theirs, `${way}: ${ours.name}`).toEqual({
    dtype: ours.dtype,
    shape: ours.shape,
    sha256: sha256(ours.bytes),
  });
}

/** Checks the reference's four readings of a file ckpt wrote holding `tensors`. */
function checkReading(reading: Record<string, ReferenceReading>, tensors: readonly Written[]): void {
  const names = tensors.map((t) => t.name).sort();
  for (const way of ["deserialize", "safe_open_pt", "safe_open_numpy"]) {
    expect(Object.keys(reading[way]!.tensors!).sort(), way).toEqual(names);
  }
  expect(reading.safe_open_pt!.metadata).toEqual(METADATA);
  expect(reading.safe_open_numpy!.metadata).toEqual(METADATA);
  const torchable = tensors.every((t) => !NOT_TORCH_DTYPES.includes(t.dtype));
  if (torchable) expect(Object.keys(reading.load_file!.tensors!).sort()).toEqual(names);
  else expect(reading.load_file!.error).toMatch(/F6_E[23]M[23]/);
  for (const t of tensors) {
    expectSame(t, reading.deserialize!.tensors![t.name], "deserialize");
    const pt = reading.safe_open_pt!.tensors![t.name]!;
    if (NOT_TORCH_DTYPES.includes(t.dtype)) expect(pt.error).toContain(t.dtype);
    else expectSame(t, pt, "safe_open pt");
    if (torchable) expectSame(t, reading.load_file!.tensors![t.name], "load_file");
    const np = reading.safe_open_numpy!.tensors![t.name]!;
    if (NUMPY_DTYPES.includes(t.dtype)) expect(np).toEqual({ shape: t.shape, sha256: sha256(t.bytes) });
    else expect(np.error, `numpy ${t.name}`).toBeDefined();
  }
}

describe("safetensors interoperability with the reference library", () => {
  it("ckpt's files open with safe_open (torch, numpy) and load_file, bit-equal, metadata intact", {
    timeout: PYTHON_TIMEOUT,
  }, async () => {
    const dir = await testdir();
    const tensors = everyDtype().filter((t) => !NOT_TORCH_DTYPES.includes(t.dtype));
    const path = join(dir, "ckpt.safetensors");
    await writeSafetensors(path, tensors, (_, i) => tensors[i]!.bytes, { metadata: METADATA });
    const readings = await referenceSafetensors<Record<string, Record<string, ReferenceReading>>>(
      "read",
      path,
    );
    checkReading(readings[path]!, tensors);
  });

  it("every dtype safetensors 0.8 names, F6 included, sharded: the reference reads every shard bit-equal", {
    timeout: PYTHON_TIMEOUT,
  }, async () => {
    const dir = await testdir();
    const tensors = everyDtype();
    expect(new Set(tensors.map((t) => t.dtype)).size).toBe(22);
    const result = await writeShardedSafetensors(dir, tensors, (_, i) => tensors[i]!.bytes, {
      maxShardBytes: 64,
      metadata: METADATA,
    });
    expect(result.shards.length).toBeGreaterThan(2);
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const readings = await referenceSafetensors<Record<string, Record<string, ReferenceReading>>>(
      "read",
      ...result.shards.map((s) => s.path),
    );
    let seen = 0;
    for (const shard of result.shards) {
      const reading = readings[shard.path]!;
      const held = Object.keys(reading.deserialize!.tensors!).map((n) => byName.get(n)!);
      seen += held.length;
      checkReading(reading, held);
    }
    expect(seen).toBe(tensors.length);
    expect((await readdir(dir)).filter((f) => f.endsWith(".safetensors")).length).toBe(result.shards.length);
  });

  it("ckpt reads what the reference writes: every torch dtype, zero-size tensors, metadata, bit-equal", {
    timeout: PYTHON_TIMEOUT,
  }, async () => {
    const dir = await testdir();
    const path = join(dir, "reference.safetensors");
    const wrote = await referenceSafetensors<{
      metadata: Record<string, string>;
      tensors: Record<string, ReferenceTensor>;
    }>("write", path);
    expect(new Set(Object.values(wrote.tensors).map((t) => t.dtype)).size).toBe(20);
    const source = await openFileByteSource(path);
    try {
      const st = await openSafetensors(source);
      expect(st.metadata).toEqual(wrote.metadata);
      expect(st.tensors.map((t) => t.name).sort()).toEqual(Object.keys(wrote.tensors).sort());
      for (const t of st.tensors) {
        expect(
          { dtype: t.dtype, shape: t.shape, sha256: sha256(await st.readTensor(t.name)) },
          t.name,
        ).toEqual(wrote.tensors[t.name]);
      }
    } finally {
      await source.close();
    }
  });
});
