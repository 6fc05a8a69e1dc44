import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { createFileStore } from "../src/file/store.js";
import { createMemoryStore } from "../src/memory/store.js";
import { isQualified, qualify } from "../src/qualify.js";
import type { ObjectInfo, ObjectStore } from "../src/types.js";

/** Small parts keep the probes fast; the backends under test accept any part size. */
const partSize = 4096;

async function keys(store: ObjectStore): Promise<string[]> {
  const out: ObjectInfo[] = [];
  for await (const info of store.list("")) out.push(info);
  return out.map((i) => i.key);
}

function check(report: Awaited<ReturnType<typeof qualify>>, name: string) {
  return report.checks.find((c) => c.name === name);
}

describe("qualify", () => {
  it("qualifies a memory store, runs every check in order and removes its probes", async () => {
    const store = createMemoryStore();
    const report = await qualify(store, { partSize, probeId: "p1" });
    expect(report).toMatchObject({ uri: store.uri, identity: store.identity, qualified: true });
    expect(report.checks.map((c) => [c.name, c.ok, c.required])).toEqual([
      ["conditional-create", true, true],
      ["sha256-metadata", true, true],
      ["ranged-get", true, true],
      ["multipart-put", true, true],
      ["multipart-conditional-create", true, false],
      ["list", true, true],
      ["delete", true, true],
    ]);
    for (const c of report.checks) expect(c.durationMs).toBeGreaterThanOrEqual(0);
    expect(await keys(store)).toEqual([]);
    const creates = store.calls.filter((c) => c.op === "createIfAbsent").map((c) => c.key);
    expect(creates.slice(0, 2)).toEqual([".ckpt-qualify/p1/create", ".ckpt-qualify/p1/create"]);
    expect(store.calls.find((c) => c.key === ".ckpt-qualify/p1/multipart" && c.op === "put")?.parts).toBe(2);
  });

  it("fails closed on a store that ignores the conditional header", async () => {
    const store = createMemoryStore({ faults: [{ type: "ignoreConditional" }] });
    const report = await qualify(store, { partSize });
    expect(report.qualified).toBe(false);
    expect(check(report, "conditional-create")).toMatchObject({
      ok: false,
      required: true,
      detail: expect.stringContaining("does not enforce the condition"),
    });
    expect(check(report, "multipart-conditional-create")).toMatchObject({
      ok: false,
      required: false,
      detail: expect.stringContaining("single PUTs"),
    });
    expect(check(report, "sha256-metadata")?.ok).toBe(true);
    expect(await keys(store)).toEqual([]);
  });

  it("stays qualified when only multipart conditional create is unenforced (informational)", async () => {
    const store = createMemoryStore({
      faults: [{ type: "ignoreConditional", key: ".ckpt-qualify/mp/multipart-create" }],
    });
    const report = await qualify(store, { partSize, probeId: "mp" });
    expect(check(report, "conditional-create")?.ok).toBe(true);
    expect(check(report, "multipart-conditional-create")?.ok).toBe(false);
    expect(report.qualified).toBe(true);
  });

  it("fails a store whose HEAD lies about the digest", async () => {
    const store = createMemoryStore({ faults: [{ type: "lieOnHead", sha256: "0".repeat(64) }] });
    const report = await qualify(store, { partSize });
    expect(check(report, "sha256-metadata")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("0000"),
    });
    expect(report.qualified).toBe(false);
  });

  it("fails a store that truncates multipart reads, and one whose deletes fail", async () => {
    const truncating = createMemoryStore({
      faults: [{ type: "truncateGet", key: ".ckpt-qualify/t/multipart", bytes: 100 }],
    });
    const truncated = await qualify(truncating, { partSize, probeId: "t" });
    expect(check(truncated, "multipart-put")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("100"),
    });
    expect(truncated.qualified).toBe(false);

    const stuck = createMemoryStore({ faults: [{ type: "fail", op: "delete", nth: 1 }] });
    const report = await qualify(stuck, { partSize });
    expect(check(report, "delete")).toMatchObject({
      ok: false,
      detail: expect.stringContaining("STORE_REQUEST_FAILED"),
    });
    expect(report.qualified).toBe(false);
    expect(await keys(stuck)).toEqual([]);
  });

  it("qualifies the file store and leaves its root empty", async () => {
    const dir = await testdir();
    const store = createFileStore({ root: join(dir, "archive") });
    const report = await qualify(store, { partSize });
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.qualified).toBe(true);
    expect(await readdir(join(dir, "archive"))).toEqual([]);
  });

  it("rejects with STORE_ABORTED when aborted, still removing its probes", async () => {
    const store = createMemoryStore({ faults: [{ type: "delay", op: "put", ms: 200 }] });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    await expect(qualify(store, { partSize, signal: controller.signal })).rejects.toMatchObject({
      code: "STORE_ABORTED",
    });
    expect(await keys(store)).toEqual([]);
  });

  it("is qualified only when every required check passed", () => {
    expect(isQualified([])).toBe(false);
    expect(
      isQualified([
        { ok: true, required: true },
        { ok: false, required: false },
      ]),
    ).toBe(true);
    expect(
      isQualified([
        { ok: true, required: true },
        { ok: false, required: true },
      ]),
    ).toBe(false);
  });
});
