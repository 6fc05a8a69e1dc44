// Issue 16: a FIFO or a device planted where a tensor file or DCP .metadata is expected is refused
// with a code naming the path; it is never waited on (each test's short timeout fails a hang) nor
// read without end (/dev/zero).
import { execFileSync } from "node:child_process";
import { mkdir, readdir, rm, symlink } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  inspectPath,
  openHfDirectory,
  readDcpMetadata,
  type TensorDescription,
  verifyTensorFile,
  writeShardedSafetensors,
} from "../../src/index.js";

const HANG = { timeout: 5000 };
const tensors: TensorDescription[] = [
  { name: "a", dtype: "F32", shape: [4] },
  { name: "b", dtype: "F32", shape: [4] },
];

/** Puts a FIFO (`fifo`) or a link to /dev/zero (`zero`) at `path`. */
async function plant(path: string, what: "fifo" | "zero"): Promise<void> {
  if (what === "fifo") execFileSync("mkfifo", [path]);
  else await symlink("/dev/zero", path);
}

async function refusal(
  run: () => Promise<unknown>,
): Promise<{ code?: string; message?: string; cause?: unknown }> {
  try {
    await run();
  } catch (error) {
    return error as { code?: string; message?: string };
  }
  throw new Error("accepted");
}

/** The message of an error and of its causes, joined: the path may be named by the cause. */
function messages(error: unknown): string {
  const parts: string[] = [];
  for (let e = error as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
    parts.push(String(e.message));
  return parts.join(" | ");
}

describe.each(["fifo", "zero"] as const)("a %s in place of", (what) => {
  it("a safetensors file: inspect and verify refuse it", HANG, async () => {
    const dir = await testdir();
    const path = join(dir, "model.safetensors");
    await plant(path, what);
    const inspected = await refusal(() => inspectPath(path));
    expect(inspected.code).toBe("FILE_NOT_REGULAR");
    expect(messages(inspected)).toContain(path);
    const verified = await verifyTensorFile(path).catch((error: unknown) => error);
    expect(messages(verified) + JSON.stringify(verified)).toContain(path);
  });

  it("a DCP .metadata: refused without reading it", HANG, async () => {
    const dir = await testdir();
    await plant(join(dir, ".metadata"), what);
    const error = await refusal(() => readDcpMetadata(dir));
    expect(error.code).toBe("DCP_METADATA_INVALID");
    expect(error.message).toContain(join(dir, ".metadata"));
  });

  it("an HF shard: opening the directory refuses it", HANG, async () => {
    const dir = await testdir();
    await writeShardedSafetensors(dir, tensors, (t) => new Uint8Array(t.byteLength), { maxShardBytes: 16 });
    const shard = (await readdir(dir)).find((n) => n.endsWith(".safetensors"))!;
    await rm(join(dir, shard));
    await plant(join(dir, shard), what);
    const error = await refusal(() => openHfDirectory(dir));
    expect(error.code).toBe("HF_SHARD_UNREADABLE");
    expect(messages(error)).toContain(join(dir, shard));
  });
});

it("a directory in place of a safetensors file is refused, not opened as one", HANG, async () => {
  const dir = await testdir();
  await mkdir(join(dir, "model.safetensors"));
  await expect(inspectPath(join(dir, "model.safetensors"))).rejects.toBeDefined();
});
