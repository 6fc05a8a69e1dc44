// @module-tag torch
// torch 1.13 kept DCP in torch.distributed._shard.checkpoint (TensorProperties and its memory-format
// enum in ShardedTensor's metadata module): its `.metadata`, written by real DCP on 2 gloo ranks
// with Debian's torch 1.13, reads like torch 2's.
import { join } from "node:path";
import {
  DCP_FIXTURE_TIMEOUT_MS,
  type DcpFixture,
  makeDcpFixtures,
  TORCH_PYTHON,
  testdir,
} from "@ckpt/test-utils";
import { beforeAll, expect, test } from "vitest";
import { checkDcpDirectory } from "../../src/dcp/completeness.js";
import { readDcpMetadata } from "../../src/dcp/metadata.js";

let dir: string;
let fixture: DcpFixture;

beforeAll(async () => {
  const root = await testdir("ckpt-torch1-dcp-");
  fixture = (await makeDcpFixtures(root, TORCH_PYTHON, [2]))["torch1-ranks2"]!;
  dir = join(root, "torch1-ranks2");
}, DCP_FIXTURE_TIMEOUT_MS);

test("the reader agrees with torch 1.13's reading of its .metadata", async () => {
  const metadata = await readDcpMetadata(dir);
  expect(
    metadata.tensors.map(({ fqn, torchDtype, shape, chunks }) => ({ fqn, dtype: torchDtype, shape, chunks })),
  ).toEqual(fixture.tensors);
  expect(metadata.bytes).toEqual(fixture.bytes);
  expect(metadata.tensors.find((t) => t.fqn === "sharded")!.chunks.map((c) => c.offsets)).toEqual([
    [0, 0],
    [4, 0],
  ]);
  expect(metadata.files.map((f) => f.relativePath).sort()).toEqual(Object.keys(fixture.files).sort());
});

test("its directory is complete", async () => {
  expect(await checkDcpDirectory(dir)).toMatchObject({ ok: true, problems: [] });
});
