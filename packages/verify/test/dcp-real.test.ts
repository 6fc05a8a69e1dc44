// @module-tag torch
// verifyPath on DCP directories written by real torch 2.13 on 2 gloo ranks: it judges them with
// @ckpt/tensors' completeness check, so `ckpt verify` and `ckpt inspect` report the same problems.
import { cp, rm, truncate } from "node:fs/promises";
import { join } from "node:path";
import { inspectPath } from "@ckpt/tensors";
import {
  DCP_FIXTURE_TIMEOUT_MS,
  type DcpFixture,
  makeDcpFixtures,
  testdir,
  torch2Python,
} from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { verifyPath } from "../src/index.js";

let root: string;
let fixture: DcpFixture;

beforeAll(async () => {
  root = await testdir("ckpt-verify-dcp-");
  fixture = (await makeDcpFixtures(root, torch2Python(), [2])).ranks2!;
}, DCP_FIXTURE_TIMEOUT_MS);

async function copyOfRanks2(): Promise<string> {
  const dir = join(await testdir("ckpt-verify-dcp-copy-"), "ranks2");
  await cp(join(root, "ranks2"), dir, { recursive: true });
  return dir;
}

describe("verifyPath on real torch 2.13 DCP output", () => {
  it("a complete directory is sound and counts its tensors", async () => {
    expect(await verifyPath(join(root, "ranks2"))).toMatchObject({
      kind: "dcp",
      ok: true,
      problems: [],
      tensors: fixture.tensors.length,
    });
  });

  it("names the first chunk a missing shard held, and agrees with inspect", async () => {
    const dir = await copyOfRanks2();
    await rm(join(dir, "__0_0.distcp"));
    const report = await verifyPath(dir);
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual([
      expect.objectContaining({
        code: "DCP_FILE_MISSING",
        path: "__0_0.distcp",
        tensor: "rows",
        chunk: [0, 0],
      }),
    ]);
    const inspected = await inspectPath(dir);
    expect(inspected.problems!.map((p) => [p.code, p.file, p.tensor, p.chunk])).toEqual(
      report.problems.map((p) => [p.code, p.path, p.tensor, p.chunk]),
    );
  });

  it("a truncated shard and an extra shard are each named", async () => {
    const dir = await copyOfRanks2();
    const plain = fixture.tensors.find((t) => t.fqn === "plain")!.chunks[0]!.storage!;
    await truncate(join(dir, plain.relativePath), plain.offset + 1);
    await cp(join(dir, "__0_0.distcp"), join(dir, "__2_0.distcp"));
    const report = await verifyPath(dir);
    expect(report.problems.map((p) => [p.code, p.path, p.tensor ?? null])).toEqual([
      ["DCP_FILE_SHORT", plain.relativePath, "plain"],
      ["DCP_FILE_UNEXPECTED", "__2_0.distcp", null],
    ]);
  });
});
