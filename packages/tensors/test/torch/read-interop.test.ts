// @module-tag torch
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { openFileByteSource } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, test } from "vitest";
import { PickleDict } from "../../src/torch/pickle/values.js";
import { openTorchFile, type TorchFile } from "../../src/torch/reader.js";
import { TorchTensor } from "../../src/torch/torch-tensor.js";
import { type Digest, HELPER, PYTHON_TEST_TIMEOUT, python, sha256 } from "./python.js";

let dir: string;
let saved: Record<string, Record<string, Digest>>;

async function digests(file: TorchFile): Promise<Record<string, Digest>> {
  const out: Record<string, Digest> = {};
  for (const entry of file.tensors) {
    const bytes = await file.readTensor(entry);
    expect(bytes.length).toBe(entry.byteLength);
    out[entry.name] = { dtype: entry.dtype, shape: [...entry.shape], sha256: sha256(bytes) };
  }
  return out;
}

async function open(path: string): Promise<TorchFile> {
  return openTorchFile(await openFileByteSource(path));
}

beforeAll(async () => {
  dir = await testdir("ckpt-torch-read-");
  saved = await python(HELPER, "save", dir);
});

describe("files written by torch.save are read bit-identical", () => {
  test.each(["dtypes.pt", "layouts.pt", "state_dict.pt", "many.pt", "params.pt"])("%s", async (name) => {
    const file = await open(join(dir, name));
    try {
      expect(await digests(file)).toEqual(saved[name]);
      expect(file.prefix).toBe(name.replace(/\.pt$/, ""));
    } finally {
      await file.close();
    }
  });

  test("every dtype is listed with its ckpt name", async () => {
    const file = await open(join(dir, "dtypes.pt"));
    expect(file.tensors.map((t) => t.dtype).sort()).toEqual(
      ["BF16", "BOOL", "F16", "F32", "F64", "I16", "I32", "I64", "I8", "U8"].sort(),
    );
    await file.close();
  });

  test("layouts keep offsets, strides and shared storages", async () => {
    const file = await open(join(dir, "layouts.pt"));
    const byName = new Map(file.tensors.map((t) => [t.name, t]));
    expect(byName.get("net.transposed")).toMatchObject({ shape: [3, 2], stride: [1, 3], contiguous: false });
    expect(byName.get("net.offset")).toMatchObject({ storageOffset: 3, contiguous: true });
    expect(byName.get("net.view2d")).toMatchObject({ storageOffset: 4, shape: [2, 3], stride: [3, 1] });
    expect(byName.get("net.offset")!.storageKey).toBe(byName.get("net.view2d")!.storageKey);
    expect(byName.get("net.zero_d")).toMatchObject({ shape: [], stride: [], byteLength: 8 });
    expect(byName.get("net.empty")).toMatchObject({ shape: [0, 4], byteLength: 0 });
    expect(byName.has("ema.inner.w")).toBe(true);
    const root = file.root as PickleDict;
    expect(root.map.get("step")).toBe(10);
    expect(root.map.get("name")).toBe("run-1");
    const net = root.map.get("net") as PickleDict;
    expect(net.ordered).toBe(true);
    expect(net.map.get("a.weight")).toBeInstanceOf(TorchTensor);
    await file.close();
  });

  test("a state dict keeps its _metadata attribute (BUILD on an OrderedDict)", async () => {
    const file = await open(join(dir, "state_dict.pt"));
    const root = file.root as PickleDict;
    const metadata = root.attributes.get("_metadata") as PickleDict;
    expect(metadata).toBeInstanceOf(PickleDict);
    expect([...metadata.map.keys()]).toEqual(["", "0", "1"]);
    expect(file.tensors.find((t) => t.name === "1.num_batches_tracked")).toMatchObject({
      dtype: "I64",
      shape: [],
    });
    await file.close();
  });

  test("parameters rebuild through _rebuild_parameter", async () => {
    const file = await open(join(dir, "params.pt"));
    const p = file.tensors.find((t) => t.name === "p")!;
    expect(p.tensor).toMatchObject({ isParameter: true, requiresGrad: true });
    expect(file.tensors.find((t) => t.name === "frozen")!.tensor.requiresGrad).toBe(false);
    await file.close();
  });

  test("readTensor fills a caller buffer", async () => {
    const file = await open(join(dir, "layouts.pt"));
    for (const entry of file.tensors) {
      const into = new Uint8Array(entry.byteLength + 16);
      const out = await file.readTensor(entry, into);
      expect(out.buffer).toBe(into.buffer);
      expect(sha256(out)).toBe(saved["layouts.pt"]![entry.name]!.sha256);
    }
    const first = file.tensors.find((t) => t.byteLength > 0)!;
    await expect(file.readTensor(first, new Uint8Array(first.byteLength - 1))).rejects.toMatchObject({
      code: "TORCH_BUFFER_TOO_SMALL",
      tensor: first.name,
    });
    await file.close();
  });

  test("readTensorRange streams a contiguous tensor in pieces and refuses strided views", async () => {
    const file = await open(join(dir, "layouts.pt"));
    let pieces = 0;
    for (const entry of file.tensors.filter((t) => t.contiguous && t.byteLength > 0)) {
      const whole = await file.readTensor(entry);
      const step = Math.max(1, Math.ceil(entry.byteLength / 3));
      const parts: Uint8Array[] = [];
      for (let start = 0; start < entry.byteLength; start += step) {
        const length = Math.min(step, entry.byteLength - start);
        parts.push((await file.readTensorRange(entry, start, length)).slice());
        pieces++;
      }
      expect(Buffer.concat(parts)).toEqual(Buffer.from(whole));
    }
    expect(pieces).toBeGreaterThan(3);
    const offset = file.tensors.find((t) => t.name === "net.offset")!;
    const into = new Uint8Array(64);
    const tail = await file.readTensorRange(offset, 2, offset.byteLength - 2, into);
    expect(tail.buffer).toBe(into.buffer);
    expect(Buffer.from(tail)).toEqual(Buffer.from((await file.readTensor(offset)).subarray(2)));
    const strided = file.tensors.find((t) => t.name === "net.transposed")!;
    await expect(file.readTensorRange(strided, 0, 2)).rejects.toMatchObject({
      code: "TORCH_RANGE_NOT_CONTIGUOUS",
      tensor: "net.transposed",
    });
    await expect(file.readTensorRange(offset, 1, offset.byteLength)).rejects.toMatchObject({
      code: "TORCH_RANGE_OUTSIDE_TENSOR",
    });
    await expect(file.readTensorRange(offset, 0, 4, new Uint8Array(3))).rejects.toMatchObject({
      code: "TORCH_BUFFER_TOO_SMALL",
    });
    await file.close();
  });

  test("tensorFileOffset points at a contiguous tensor's bytes in the file; none for strided views", async () => {
    const path = join(dir, "layouts.pt");
    const file = await open(path);
    const bytes = await readFile(path);
    let located = 0;
    for (const entry of file.tensors) {
      const at = await file.tensorFileOffset(entry);
      if (!entry.contiguous && entry.byteLength > 0) {
        expect(at).toBeUndefined();
        continue;
      }
      expect(Buffer.from(bytes.subarray(at!, at! + entry.byteLength))).toEqual(
        Buffer.from(await file.readTensor(entry)),
      );
      located++;
    }
    // net.offset starts inside its storage: the offset must include the storage offset.
    expect((await file.tensorFileOffset(file.tensors.find((t) => t.name === "net.offset")!))! % 64).not.toBe(
      0,
    );
    expect(located).toBeGreaterThan(3);
    await file.close();
  });
});

describe("zip variants torch.load accepts", () => {
  test(
    "deflate-compressed, renamed prefix, unaligned and zip64 directory records read the same",
    async () => {
      const out = join(dir, "variants");
      await mkdir(out);
      const names = await python<string[]>(HELPER, "variants", join(dir, "layouts.pt"), out);
      expect(names).toEqual(["deflate.pt", "renamed.pt", "unaligned.pt", "zip64_directory.pt"]);
      const loaded = await python<Record<string, { tensors: Record<string, Digest> }>>(
        HELPER,
        "load",
        ...names.map((n) => join(out, n)),
      );
      for (const name of names) {
        expect(loaded[name]!.tensors).toEqual(saved["layouts.pt"]);
        const file = await open(join(out, name));
        expect(await digests(file)).toEqual(saved["layouts.pt"]);
        expect(file.prefix).toBe(name === "renamed.pt" ? "foo" : "layouts");
        // A compressed storage has no place in the file to read its elements from.
        const first = file.tensors.find((t) => t.contiguous && t.byteLength > 0)!;
        expect((await file.tensorFileOffset(first)) === undefined).toBe(name === "deflate.pt");
        await file.close();
      }
    },
    PYTHON_TEST_TIMEOUT,
  );
});

test(
  "listing reads only the end records, central directory, version and data.pkl",
  async () => {
    const source = await openFileByteSource(join(dir, "many.pt"));
    const reads: [number, number][] = [];
    const counting = {
      ...source,
      name: source.name,
      size: source.size,
      read: (o: number, l: number, i?: Uint8Array) => {
        reads.push([o, l]);
        return source.read(o, l, i);
      },
    };
    const file = await openTorchFile(counting);
    expect(file.tensors.length).toBe(302);
    // No listing read may touch a storage member's data (the 70 KB "wide" tensor included).
    const wide = file.tensors.find((t) => t.name === "wide")!;
    const wideEntry = (
      await python<Record<string, { dataOffsets: Record<string, number> }>>(HELPER, "load", source.name)
    )["many.pt"]!.dataOffsets;
    const storageStarts = Object.entries(wideEntry)
      .filter(([name]) => name.includes("/data/"))
      .map(([, offset]) => offset);
    for (const [offset, length] of reads) {
      for (const start of storageStarts) expect(offset <= start && start < offset + length).toBe(false);
    }
    reads.length = 0;
    await file.readTensor(wide);
    expect(reads.at(-1)).toEqual([expect.any(Number), 70_000]);
    await file.close();
  },
  PYTHON_TEST_TIMEOUT,
);
