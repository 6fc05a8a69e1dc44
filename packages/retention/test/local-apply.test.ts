import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { UPLOADED_MARKER } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import {
  applyRetentionPlan,
  planModelRetention,
  planOptimizerRetention,
  type RetentionApplyEvent,
  scanCheckpointRoot,
} from "../src/index.js";

interface IterSpec {
  readonly name: string;
  readonly optim?: "file" | "dir";
  readonly uploaded?: "legacy" | "receipt" | "broken";
}

/** A run attempt with `checkpoints/` holding the given iteration directories and, optionally, a latest pointer. */
async function checkpointsRoot(
  iters: readonly IterSpec[],
  latest?: string,
): Promise<{ root: string; attempt: string }> {
  const dir = await testdir("ckpt-retention-local-");
  const root = join(dir, "run", "20260901120000", "checkpoints");
  for (const spec of iters) {
    const d = join(root, spec.name);
    await mkdir(d, { recursive: true });
    await writeFile(join(d, "model.pt"), "m".repeat(100));
    await writeFile(join(d, "trainer.pt"), "t".repeat(10));
    if (spec.optim === "file") await writeFile(join(d, "optim.pt"), "o".repeat(1000));
    if (spec.optim === "dir") {
      await mkdir(join(d, "optim"));
      await writeFile(join(d, "optim", "__0_0.distcp"), "o".repeat(600));
      await writeFile(join(d, "optim", ".metadata"), "o".repeat(40));
    }
    if (spec.uploaded === "legacy") await writeFile(join(d, ".uploaded"), "s3://bucket/prefix\n");
    if (spec.uploaded === "broken") await writeFile(join(d, ".uploaded"), "{ not json");
    if (spec.uploaded === "receipt") {
      await writeFile(
        join(d, ".uploaded"),
        UPLOADED_MARKER.serialize({
          schema: "posttrain.archive-marker.v1",
          kind: "full_checkpoint",
          iteration: Number(spec.name.slice(5)),
          destination: { scheme: "s3", endpoint: "s3.example.com", bucket: "b", prefix: `p/${spec.name}` },
          files: [{ path: "model.pt", size: 100 }],
        }),
      );
    }
  }
  if (latest !== undefined) await writeFile(join(root, "latest_checkpoint.txt"), latest);
  return { root, attempt: join(dir, "run", "20260901120000") };
}

describe("scanCheckpointRoot", () => {
  it("lists iter_* directories of any digit count with optimizer, upload and latest state", async () => {
    const { root } = await checkpointsRoot(
      [
        { name: "iter_000000100", optim: "file", uploaded: "receipt" },
        { name: "iter_150", optim: "dir", uploaded: "legacy" },
        { name: "iter_000000200", uploaded: "broken" },
      ],
      "iter_000000200",
    );
    await mkdir(join(root, "not_an_iter"));
    await writeFile(join(root, "iter_000000999"), "a file, not a directory");
    const infos = await scanCheckpointRoot(root, {
      readMetrics: async (_dir, iteration) => ({ loss: iteration / 100 }),
    });
    // Each directory's own listing comes along (names and kinds), so readers need not list it again.
    const listed = infos.map((info) =>
      [...(info.entries ?? [])].sort((a, b) => a.name.localeCompare(b.name)),
    );
    expect(listed).toEqual([
      [
        { name: ".uploaded", kind: "file" },
        { name: "model.pt", kind: "file" },
        { name: "optim.pt", kind: "file" },
        { name: "trainer.pt", kind: "file" },
      ],
      [
        { name: ".uploaded", kind: "file" },
        { name: "model.pt", kind: "file" },
        { name: "optim", kind: "dir" },
        { name: "trainer.pt", kind: "file" },
      ],
      [
        { name: ".uploaded", kind: "file" },
        { name: "model.pt", kind: "file" },
        { name: "trainer.pt", kind: "file" },
      ],
    ]);
    expect(infos.map(({ entries: _, ...info }) => info)).toEqual([
      {
        iteration: 100,
        dir: join(root, "iter_000000100"),
        hasOptimizer: true,
        uploaded: "receipt",
        metrics: { loss: 1 },
      },
      {
        iteration: 150,
        dir: join(root, "iter_150"),
        hasOptimizer: true,
        uploaded: "legacy",
        metrics: { loss: 1.5 },
      },
      {
        iteration: 200,
        dir: join(root, "iter_000000200"),
        hasOptimizer: false,
        uploaded: "none",
        metrics: { loss: 2 },
        isLatest: true,
      },
    ]);
  });

  it("finds no checkpoints in a root that does not exist yet", async () => {
    const { root } = await checkpointsRoot([]);
    expect(await scanCheckpointRoot(root)).toEqual([]);
  });

  it("refuses checkpoint_artifacts/ and any other directory name", async () => {
    const { attempt } = await checkpointsRoot([]);
    await expect(scanCheckpointRoot(join(attempt, "checkpoint_artifacts"))).rejects.toMatchObject({
      code: "RETENTION_NOT_A_CHECKPOINT_ROOT",
      message: expect.stringContaining("prune-verified"),
    });
    await expect(scanCheckpointRoot(attempt)).rejects.toMatchObject({
      code: "RETENTION_NOT_A_CHECKPOINT_ROOT",
    });
  });

  it("refuses to scan past a damaged latest pointer", async () => {
    const { root } = await checkpointsRoot([{ name: "iter_000000100" }], "iter_1\niter_2");
    await expect(scanCheckpointRoot(root)).rejects.toMatchObject({
      code: "RETENTION_SCAN_FAILED",
      kind: "refused",
    });
  });

  it("reports an unreadable root as a failure", async () => {
    const { root } = await checkpointsRoot([]);
    await mkdir(join(root, ".."), { recursive: true });
    await writeFile(root, "a file where the directory should be");
    await expect(scanCheckpointRoot(root)).rejects.toMatchObject({
      code: "RETENTION_SCAN_FAILED",
      kind: "failed",
    });
  });
});

describe("applyRetentionPlan", () => {
  it("optimizer retention removes optim.pt and optim/ beyond the newest N, keeping weights and trainer state", async () => {
    const { root } = await checkpointsRoot(
      [
        { name: "iter_000000100", optim: "file", uploaded: "receipt" },
        { name: "iter_000000200", optim: "dir", uploaded: "legacy" },
        { name: "iter_000000300", optim: "file" },
      ],
      "iter_000000300",
    );
    const plan = planOptimizerRetention(await scanCheckpointRoot(root), {
      keepLast: 1,
      requireUploaded: true,
    });
    const events: RetentionApplyEvent[] = [];
    const report = await applyRetentionPlan(plan, { root, onEvent: (e) => events.push(e) });
    expect(report.errors).toEqual([]);
    expect(report.removed.map((r) => r.paths)).toEqual([
      ["iter_000000100/optim.pt"],
      ["iter_000000200/optim"],
    ]);
    expect(report.freed_bytes).toBe(1000 + 640);
    expect(events.map((e) => e.type)).toEqual(["removing", "removed", "removing", "removed"]);
    expect((await readdir(join(root, "iter_000000100"))).sort()).toEqual([
      ".uploaded",
      "model.pt",
      "trainer.pt",
    ]);
    expect((await readdir(join(root, "iter_000000200"))).sort()).toEqual([
      ".uploaded",
      "model.pt",
      "trainer.pt",
    ]);
    expect((await readdir(join(root, "iter_000000300"))).sort()).toEqual([
      "model.pt",
      "optim.pt",
      "trainer.pt",
    ]);
  });

  it("model retention removes whole directories, upload-gated per candidate, and leaves nothing aside", async () => {
    const { root } = await checkpointsRoot(
      [
        { name: "iter_000000100" },
        { name: "iter_000000200", uploaded: "receipt", optim: "dir" },
        { name: "iter_000000300", uploaded: "receipt" },
      ],
      "iter_000000300",
    );
    const plan = planModelRetention(await scanCheckpointRoot(root), { keepLast: 1, requireUploaded: true });
    const report = await applyRetentionPlan(plan, { root });
    expect(report.removed).toMatchObject([
      { target: "iteration", iteration: 200, paths: ["iter_000000200"] },
    ]);
    expect((await readdir(root)).sort()).toEqual([
      "iter_000000100",
      "iter_000000300",
      "latest_checkpoint.txt",
    ]);
  });

  it("never removes the iteration the latest pointer names when applied, even if a stale plan says so", async () => {
    const { root } = await checkpointsRoot(
      [{ name: "iter_000000100" }, { name: "iter_000000200" }],
      "iter_000000100",
    );
    const plan = planModelRetention(await scanCheckpointRoot(root), { keepLast: 1, requireUploaded: false });
    expect(plan.remove).toEqual([]);
    const stale = {
      target: "iteration" as const,
      remove: [{ target: "iteration" as const, iteration: 100, dir: join(root, "iter_000000100") }],
      keep: [],
    };
    const report = await applyRetentionPlan(stale, { root });
    expect(report.errors).toMatchObject([{ code: "latest_pointer" }]);
    expect(await readdir(root)).toContain("iter_000000100");
  });

  it("refuses a plan naming anything outside the root before removing anything", async () => {
    const { root, attempt } = await checkpointsRoot([{ name: "iter_000000100" }, { name: "iter_000000200" }]);
    const outside = join(attempt, "checkpoint_artifacts", "iter_000000100");
    await mkdir(outside, { recursive: true });
    const plan = {
      target: "iteration" as const,
      remove: [
        { target: "iteration" as const, iteration: 200, dir: join(root, "iter_000000200") },
        { target: "iteration" as const, iteration: 100, dir: outside },
      ],
      keep: [],
    };
    await expect(applyRetentionPlan(plan, { root })).rejects.toMatchObject({
      code: "RETENTION_TARGET_OUTSIDE_ROOT",
    });
    expect((await readdir(root)).sort()).toEqual(["iter_000000100", "iter_000000200"]);
    expect(await readdir(join(attempt, "checkpoint_artifacts"))).toEqual(["iter_000000100"]);
  });

  it("reports a removal the filesystem refuses and goes on", async () => {
    const { root } = await checkpointsRoot([
      { name: "iter_000000100", optim: "file" },
      { name: "iter_000000200" },
    ]);
    const plan = {
      target: "optimizer" as const,
      remove: [
        { target: "optimizer" as const, iteration: 100, dir: join(root, "iter_000000100") },
        { target: "optimizer" as const, iteration: 200, dir: join(root, "iter_000000200") },
      ],
      keep: [],
    };
    // A directory named optim.pt cannot be unlinked.
    await mkdir(join(root, "iter_000000200", "optim.pt"));
    const report = await applyRetentionPlan(plan, { root });
    expect(report.removed).toMatchObject([{ iteration: 100, paths: ["iter_000000100/optim.pt"] }]);
    expect(report.errors).toMatchObject([{ code: "remove_failed", dir: join(root, "iter_000000200") }]);
  });

  it("stops with RETENTION_ABORTED when aborted", async () => {
    const { root } = await checkpointsRoot([
      { name: "iter_000000100", optim: "file" },
      { name: "iter_000000200", optim: "file" },
    ]);
    const plan = planOptimizerRetention(await scanCheckpointRoot(root), {
      keepLast: 1,
      requireUploaded: false,
    });
    const controller = new AbortController();
    controller.abort();
    await expect(applyRetentionPlan(plan, { root, signal: controller.signal })).rejects.toMatchObject({
      code: "RETENTION_ABORTED",
    });
    expect(await readdir(join(root, "iter_000000100"))).toContain("optim.pt");
  });
});
