// @module-tag torch
// verifyPath on DCP directories written by real torch 2.13 on 2 gloo ranks: it judges them with
// @ckpt/tensors' completeness check, so `ckpt verify` and `ckpt inspect` report the same problems.
import { cp, rm, truncate } from "node:fs/promises";
import { join } from "node:path";
import { inspectPath } from "@ckpt/tensors";
import { realDcpFixtures } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { verifyPath } from "../src/index.js";

const dcp = realDcpFixtures([2], "ckpt-verify-dcp-");
const copyOfRanks2 = () => dcp.copy("ranks2");

describe("verifyPath on real torch 2.13 DCP output", () => {
  it("a complete directory is sound and counts its tensors", async () => {
    expect(await verifyPath(join(dcp.root, "ranks2"))).toMatchObject({
      kind: "dcp",
      ok: true,
      problems: [],
      tensors: dcp.fixtures.ranks2!.tensors.length,
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
    const plain = dcp.fixtures.ranks2!.tensors.find((t) => t.fqn === "plain")!.chunks[0]!.storage!;
    await truncate(join(dir, plain.relativePath), plain.offset + 1);
    await cp(join(dir, "__0_0.distcp"), join(dir, "__2_0.distcp"));
    const report = await verifyPath(dir);
    expect(report.problems.map((p) => [p.code, p.path, p.tensor ?? null])).toEqual([
      ["DCP_FILE_SHORT", plain.relativePath, "plain"],
      ["DCP_FILE_UNEXPECTED", "__2_0.distcp", null],
    ]);
  });
});
