import { bufferByteSource } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import {
  checkShardName,
  parseSafetensorsIndex,
  readSafetensorsHeader,
  TensorsError,
  toFloat32,
} from "../src/index.js";

const kindOf = async (run: () => unknown) => {
  const error = await Promise.resolve()
    .then(run)
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(error).toBeInstanceOf(TensorsError);
  return (error as TensorsError).kind;
};

// Before @ckpt/errors, TensorsError defaulted a missing kind to `input`; these sites relied on it.
describe("TensorsError kinds", () => {
  it("malformed headers, indexes, shard names and conversion buffers stay input errors (exit 2)", async () => {
    const garbage = new Uint8Array([3, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7b, 0x7b]);
    expect(await kindOf(() => readSafetensorsHeader(bufferByteSource("bad.safetensors", garbage)))).toBe(
      "input",
    );
    expect(await kindOf(() => parseSafetensorsIndex("not json", { file: "index.json" }))).toBe("input");
    expect(await kindOf(() => checkShardName("../up.safetensors", "index.json"))).toBe("input");
    expect(await kindOf(() => toFloat32(new Uint8Array(3), "BF16", new Float32Array(1)))).toBe("input");
  });
});
