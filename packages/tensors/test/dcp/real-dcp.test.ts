// @module-tag torch
// DCP directories written by real torch 2.13 (tools/fixtures/make_dcp_fixtures.py on 1, 2 and 4 gloo
// ranks): the reader must agree with torch's own reading of every `.metadata`, and the completeness
// check must name what a damaged copy lacks.
import { cp, rm, truncate } from "node:fs/promises";
import { join } from "node:path";
import { realDcpFixtures } from "@ckpt/test-utils";
import { describe, expect, test } from "vitest";
import { checkDcpDirectory } from "../../src/dcp/completeness.js";
import { readDcpMetadata } from "../../src/dcp/metadata.js";
import { inspectPath } from "../../src/inspect.js";

const dcp = realDcpFixtures([1, 2, 4], "ckpt-real-dcp-");

describe.each(["ranks1", "ranks2", "ranks4"])("torch 2.13 DCP on %s", (name) => {
  test("the reader agrees with torch's reading of .metadata", async () => {
    const want = dcp.fixtures[name]!;
    const metadata = await readDcpMetadata(join(dcp.root, name));
    expect(
      metadata.tensors.map(({ fqn, torchDtype, shape, chunks }) => ({
        fqn,
        dtype: torchDtype,
        shape,
        chunks,
      })),
    ).toEqual(want.tensors);
    expect(metadata.bytes).toEqual(want.bytes);
    expect(metadata.version).toBe(want.version);
    expect(
      Object.fromEntries(Object.entries(metadata.plannerData).map(([k, v]) => [k, v.map(String)])),
    ).toEqual(want.planner_data);
    // Every file torch wrote is referenced, and each holds the pieces the metadata places in it.
    expect(metadata.files.map((f) => f.relativePath).sort()).toEqual(Object.keys(want.files).sort());
    for (const f of metadata.files) expect(f.requiredLength).toBeLessThanOrEqual(want.files[f.relativePath]!);
  });

  test("the directory is complete and inspect lists every tensor with its global shape", async () => {
    expect(await checkDcpDirectory(join(dcp.root, name))).toMatchObject({ ok: true, problems: [] });
    const report = await inspectPath(join(dcp.root, name));
    const want = dcp.fixtures[name]!;
    expect(report).toMatchObject({ kind: "dcp", problems: [] });
    expect(report.tensors.map((t) => [t.name, t.shape])).toEqual(want.tensors.map((t) => [t.fqn, t.shape]));
    expect(
      Object.fromEntries(report.files.filter((f) => f.file !== ".metadata").map((f) => [f.file, f.size])),
    ).toEqual(want.files);
  });
});

test("what each run wrote: nested state, bytes entries, uneven DTensor shards, FSDP2 + AdamW state", () => {
  const fqns = (name: string) => dcp.fixtures[name]!.tensors.map((t) => t.fqn);
  expect(fqns("ranks1")).toContain("model.blocks.1.w");
  expect(dcp.fixtures.ranks1!.tensors.map((t) => t.dtype)).toEqual(
    expect.arrayContaining(["bfloat16", "float16", "int64", "bool", "complex64"]),
  );
  expect(dcp.fixtures.ranks1!.bytes.map((b) => b.fqn)).toEqual(["config.lr", "config.name", "blob"]);
  expect(dcp.fixtures.ranks2!.tensors.find((t) => t.fqn === "rows")!.chunks.map((c) => c.sizes)).toEqual([
    [3, 3],
    [2, 3],
  ]);
  expect(dcp.fixtures.ranks2!.tensors.find((t) => t.fqn === "cols")!.chunks.map((c) => c.offsets)).toEqual([
    [0, 0],
    [0, 3],
  ]);
  expect(Object.keys(dcp.fixtures.ranks4!.files)).toHaveLength(4);
  expect(fqns("ranks4")).toEqual(
    expect.arrayContaining(["model.0.weight", "optim.state.0.weight.exp_avg_sq"]),
  );
  expect(dcp.fixtures.ranks4!.tensors.find((t) => t.fqn === "model.0.weight")!.chunks).toHaveLength(4);
});

describe("a damaged copy of real torch 2.13 output is reported by name", () => {
  test("a missing shard names the first chunk it held", async () => {
    const dir = await dcp.copy("ranks4");
    await rm(join(dir, "__2_0.distcp"));
    const { ok, problems } = await checkDcpDirectory(dir);
    expect(ok).toBe(false);
    expect(problems).toEqual([
      expect.objectContaining({
        code: "DCP_FILE_MISSING",
        file: "__2_0.distcp",
        tensor: "model.0.weight",
        chunk: [6, 0],
      }),
    ]);
    expect(problems[0]!.message).toContain(`chunk [6,0] of "model.0.weight"`);
    const report = await inspectPath(dir);
    expect(report.problems).toEqual(problems);
    expect(report.files.map((f) => f.file)).not.toContain("__2_0.distcp");
  });

  test("a truncated shard names the first piece past its end", async () => {
    const dir = await dcp.copy("ranks2");
    const rows = dcp.fixtures.ranks2!.tensors.find((t) => t.fqn === "rows")!;
    const second = rows.chunks[1]!.storage!;
    await truncate(join(dir, second.relativePath), second.offset + 10);
    const { problems } = await checkDcpDirectory(dir);
    expect(problems).toEqual([
      expect.objectContaining({
        code: "DCP_FILE_SHORT",
        file: second.relativePath,
        tensor: "rows",
        chunk: [3, 0],
      }),
    ]);
  });

  test("an extra shard left beside the metadata is named", async () => {
    const dir = await dcp.copy("ranks2");
    await cp(join(dir, "__1_0.distcp"), join(dir, "__7_0.distcp"));
    const { problems } = await checkDcpDirectory(dir);
    expect(problems.map(({ code, file }) => ({ code, file }))).toEqual([
      { code: "DCP_FILE_UNEXPECTED", file: "__7_0.distcp" },
    ]);
  });
});
