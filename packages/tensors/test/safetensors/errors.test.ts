import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ByteSource } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  inspectPath,
  MAX_HEADER_BYTES,
  MAX_SHARD_COUNT,
  MAX_SHARDS,
  openHfDirectory,
  openSafetensors,
  parseSafetensorsIndex,
  planSafetensors,
  planShards,
} from "../../src/index.js";

describe("less common refusals", () => {
  it("turns a failing byte source into SAFETENSORS_READ_FAILED (kind failed)", async () => {
    const plan = planSafetensors([{ name: "w", dtype: "U8", shape: [4] }]);
    const bytes = new Uint8Array(plan.fileSize);
    bytes.set(plan.headerBytes);
    const source: ByteSource = {
      name: "flaky.safetensors",
      size: bytes.length,
      async read(offset, length) {
        if (offset >= plan.headerBytes.length) throw new Error("connection reset");
        return bytes.subarray(offset, offset + length);
      },
      close: async () => {},
    };
    const st = await openSafetensors(source);
    await expect(st.readTensor("w")).rejects.toMatchObject({
      code: "SAFETENSORS_READ_FAILED",
      kind: "failed",
      file: "flaky.safetensors",
    });
  });

  it("refuses non-string metadata and too many shards when writing", () => {
    expect(() => planSafetensors([], { a: 1 as unknown as string })).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_INVALID_METADATA" }),
    );
    const many = Array.from({ length: MAX_SHARDS + 1 }, (_, i) => ({
      name: `t${i}`,
      dtype: "U8" as const,
      shape: [1],
    }));
    expect(() => planShards(many, 1)).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_TOO_MANY_SHARDS" }),
    );
  });

  it("refuses an index naming too many shards, and an oversized index file", async () => {
    const weightMap = Object.fromEntries(
      Array.from({ length: MAX_SHARD_COUNT + 1 }, (_, i) => [`t${i}`, `s${i}.safetensors`]),
    );
    expect(() =>
      parseSafetensorsIndex(JSON.stringify({ weight_map: weightMap }), { file: "index.json" }),
    ).toThrow(expect.objectContaining({ code: "HF_INDEX_TOO_MANY_SHARDS" }));
    const dir = await testdir();
    const index = join(dir, "model.safetensors.index.json");
    await writeFile(index, "");
    await truncate(index, 64 * 1024 * 1024 + 1); // sparse: costs no disk
    await expect(openHfDirectory(dir)).rejects.toMatchObject({ code: "HF_INDEX_TOO_LARGE" });
  });

  it("refuses to plan a header readers would refuse", () => {
    expect(() => planSafetensors([], { big: "x".repeat(MAX_HEADER_BYTES) })).toThrow(
      expect.objectContaining({ code: "SAFETENSORS_WRITE_HEADER_TOO_LARGE" }),
    );
  });

  it("reports paths that exist but cannot be opened as unreadable (kind failed)", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "plain.txt"), "x");
    await expect(inspectPath(join(dir, "plain.txt", "model.safetensors"))).rejects.toMatchObject({
      code: "INSPECT_UNREADABLE",
      kind: "failed",
    });
    await writeFile(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ weight_map: { w: "plain.txt/x.safetensors" } }),
    );
    await expect(openHfDirectory(dir)).rejects.toMatchObject({ code: "HF_SHARD_UNREADABLE", kind: "failed" });
  });
});
