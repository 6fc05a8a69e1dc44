import { execFileSync } from "node:child_process";
import {
  lstat,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import {
  hashFile,
  lockDirectory,
  openFileByteSource,
  ARTIFACT_MANIFEST,
  MERGE_COMPLETE,
} from "@ckpt/manifest";
import { drain } from "@ckpt/progress";
import { openTorchFile, toFloat32 } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import {
  MERGE_TOOL_VERSION,
  type MergeEvent,
  type MergeOptions,
  mergeExperts,
  mergeExpertsIter,
} from "../src/index.js";
import {
  artifactFiles,
  randomModel,
  type TestModel,
  writeHfBase,
  writeSafetensorsExpert,
  writeTorchExpert,
} from "./helpers.js";

let tmp = "";
beforeEach(async () => {
  tmp = await testdir("ckpt-merge-");
});

const constant = (shape: number[], value: number) => ({
  shape,
  values: new Array(shape.reduce((a, b) => a * b, 1)).fill(value),
});

async function readModel(
  path: string,
): Promise<Record<string, { dtype: string; shape: number[]; values: number[] }>> {
  const file = await openTorchFile(await openFileByteSource(path));
  try {
    const out: Record<string, { dtype: string; shape: number[]; values: number[] }> = {};
    for (const t of file.tensors) {
      const values = new Float32Array(t.shape.reduce((a, b) => a * b, 1));
      toFloat32(await file.readTensor(t), t.dtype, values);
      out[t.name] = { dtype: t.dtype, shape: [...t.shape], values: [...values] };
    }
    return out;
  } finally {
    await file.close();
  }
}

/** Every file under a directory with its bytes, to prove a refused request changed nothing. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, prefix: string) => {
    for (const entry of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) await walk(path, `${prefix}${entry.name}/`);
      else out[`${prefix}${entry.name}`] = (await readFile(path)).toString("base64");
    }
  };
  await walk(dir, "");
  return out;
}

const shapes = {
  "model.embed_tokens.weight": [6, 4],
  "model.layers.0.mlp.up_proj.weight": [5, 4],
  "model.norm.weight": [4],
};

async function fixture(): Promise<{
  experts: string[];
  base: string;
  out: string;
  iterDir: string;
  root: string;
}> {
  const root = tmp;
  const experts = [
    await writeTorchExpert(join(root, "a/model.pt"), randomModel(1, shapes)),
    await writeTorchExpert(join(root, "b/model.pt"), randomModel(2, shapes)),
    await writeTorchExpert(join(root, "c/model.pt"), randomModel(3, shapes)),
  ];
  const base = await writeHfBase(join(root, "base"), randomModel(9, shapes));
  const iterDir = join(root, "run/checkpoint_artifacts/iter_000000300");
  return { experts, base, out: join(iterDir, "model.pt"), iterDir, root };
}

describe("mergeExperts: output", () => {
  it("averages torch experts: F32 sum, one rounding, as torch.save({net}) with manifest, diagnostics and completion record", async () => {
    const e = (v: number): TestModel => ({ w: constant([2, 3], v), n: constant([3], -v) });
    const experts = [
      await writeTorchExpert(join(tmp, "a.pt"), e(1)),
      await writeTorchExpert(join(tmp, "b.pt"), e(2)),
      await writeTorchExpert(join(tmp, "c.pt"), e(4)),
    ];
    const out = join(tmp, "iter_000000007/model.pt");
    const report = await mergeExperts({ mode: "avg", experts, out });
    expect(report).toMatchObject({
      status: "merged",
      iteration: 7,
      tensors: 2,
      mode: "avg",
      lam: null,
      base: null,
    });
    // 7/3 = 2.33333325 in F32 rounds to 2.328125 in BF16 (8 bits of mantissa).
    expect(await readModel(out)).toEqual({
      "net.w": { dtype: "BF16", shape: [2, 3], values: new Array(6).fill(2.328125) },
      "net.n": { dtype: "BF16", shape: [3], values: new Array(3).fill(-2.328125) },
    });
    const files = artifactFiles(join(tmp, "iter_000000007"));
    const model = await hashFile(files.model);
    expect(report.model).toEqual(model);
    const manifest = await ARTIFACT_MANIFEST.read(files.manifest);
    expect(manifest).toMatchObject({
      iteration: 7,
      format: "consolidated",
      logical_components: ["model"],
      producer: MERGE_TOOL_VERSION,
      physical_components: [{ name: "model", kind: "file", path: "model.pt", ...model }],
    });
    const record = await MERGE_COMPLETE.read(files.completion);
    expect(record.tool_version).toBe(MERGE_TOOL_VERSION);
    expect(record.request).toEqual({
      mode: "avg",
      experts: await Promise.all(experts.map(async (p) => ({ source: p, ...(await hashFile(p)) }))),
      base: null,
      lam: null,
      iteration: 7,
    });
    expect(record.files).toEqual([
      { path: ".posttrain-checkpoint-artifact.json", ...(await hashFile(files.manifest)) },
      { path: "model.pt", ...model },
    ]);
    expect(record.diagnostics).toEqual({
      location: "artifact",
      path: "merge-diagnostics.json",
      ...(await hashFile(files.diagnostics)),
    });
    const diag = JSON.parse(await readFile(files.diagnostics, "utf8"));
    expect(diag).toMatchObject({
      schema: "ckpt.merge-diagnostics.v1",
      mode: "avg",
      reference: "merged",
      base: null,
    });
    // Distance of each expert from the written average (2.328125): |1 - m|, |2 - m|, |4 - m| over 6 elements.
    const m = 2.328125;
    expect(diag.tensors[0].expert_delta_norm).toEqual([1, 2, 4].map((v) => Math.sqrt(6 * (v - m) ** 2)));
    expect(diag.tensors[0].cosine).toBeNull();
    expect(await readdir(tmp)).not.toContain(".iter_000000007.merge-staging");
  });

  it("adds scaled task vectors onto a sharded HF base (safetensors experts accepted) and records the base fingerprint", async () => {
    const base: TestModel = { w: constant([4], 1), v: constant([2], -2) };
    await writeHfBase(join(tmp, "base"), base, 8);
    expect((await readdir(join(tmp, "base"))).filter((n) => n.endsWith(".safetensors")).length).toBe(2);
    const experts = [
      await writeTorchExpert(join(tmp, "a.pt"), { w: constant([4], 1.5), v: constant([2], -1) }),
      await writeSafetensorsExpert(join(tmp, "b.safetensors"), {
        v: constant([2], -3),
        w: constant([4], 1.25),
      }),
    ];
    const out = join(tmp, "iter_000000001/model.pt");
    const report = await mergeExperts({ mode: "tv", experts, base: join(tmp, "base"), lam: 0.5, out });
    // w: 1 + 0.5 × (0.5 + 0.25) = 1.375; v: -2 + 0.5 × (1 + -1) = -2
    expect(await readModel(out)).toEqual({
      "net.w": { dtype: "BF16", shape: [4], values: [1.375, 1.375, 1.375, 1.375] },
      "net.v": { dtype: "BF16", shape: [2], values: [-2, -2] },
    });
    expect(report.base).toEqual({
      source: join(tmp, "base"),
      fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const diag = JSON.parse(await readFile(artifactFiles(join(tmp, "iter_000000001")).diagnostics, "utf8"));
    expect(diag.reference).toBe("base");
    expect(diag.tensors[0].name).toBe("w");
    expect(diag.tensors[0].expert_delta_norm).toEqual([1, 0.5]); // ‖0.5 × 4‖, ‖0.25 × 4‖
    expect(diag.tensors[0].merged_delta_norm).toBe(0.75);
    expect(diag.tensors[1].cosine).toEqual([
      [1, -1],
      [-1, 1],
    ]);
    expect(diag.totals.expert_delta_norm).toEqual([Math.sqrt(1 + 2), Math.sqrt(0.25 + 2)]);
  });

  it("gives the same bytes whatever the chunk size (chunks cross tensors and split them)", async () => {
    const { experts, base, root } = await fixture();
    const outs: Buffer[][] = [];
    for (const chunkElements of [1, 7, 1 << 20]) {
      const iterDir = join(root, `c${chunkElements}/iter_000000300`);
      await mergeExperts(
        { mode: "tv", experts, base, lam: 0.3, out: join(iterDir, "model.pt") },
        { chunkElements },
      );
      const f = artifactFiles(iterDir);
      outs.push([await readFile(f.model), await readFile(f.diagnostics)]);
    }
    expect(outs[1]).toEqual(outs[0]);
    expect(outs[2]).toEqual(outs[0]);
  });

  it("reports progress: planned, decided, bytes adding up to the model size, verify, commit; returns the report", async () => {
    const { experts, out } = await fixture();
    const events: MergeEvent[] = [];
    const report = await drain(
      mergeExpertsIter({ mode: "avg", experts, out }, { chunkElements: 8 }),
      (event) => events.push(event),
    );
    const types = [...new Set(events.map((e) => e.type))];
    expect(types).toEqual(["planned", "decided", "bytes", "phase"]);
    expect(report.status).toBe("merged");
    const planned = events.find((e) => e.type === "planned")!;
    const last = events.filter((e) => e.type === "bytes").at(-1)!;
    expect(last.type === "bytes" && planned.type === "planned" && last.doneBytes).toBe(
      planned.type === "planned" ? planned.totalBytes : -1,
    );
    expect(events.filter((e) => e.type === "phase").map((e) => e.type === "phase" && e.phase)).toEqual([
      "verify",
      "commit",
    ]);
  });

  it("writes diagnostics outside the artifact when --diag points there (recorded as external)", async () => {
    const { experts, base, out, iterDir, root } = await fixture();
    const diag = join(root, "reports/tv.json");
    await mergeExperts({ mode: "tv", experts, base, out, diag });
    expect(JSON.parse(await readFile(diag, "utf8")).mode).toBe("tv");
    expect((await MERGE_COMPLETE.read(artifactFiles(iterDir).completion)).diagnostics).toEqual({
      location: "external",
      source: diag,
    });
    expect((await readdir(iterDir)).sort()).toEqual([
      ".merge-complete.json",
      ".posttrain-checkpoint-artifact.json",
      "model.pt",
    ]);
  });
});

describe("mergeExperts: refusals before anything is written", () => {
  async function refusedWithoutOutput(options: MergeOptions, code: string, tensor?: string) {
    await expect(mergeExperts(options)).rejects.toMatchObject({ code, ...(tensor ? { tensor } : {}) });
    expect(await readdir(tmp)).not.toContain("run");
  }

  it("a key one expert lacks", async () => {
    const { experts, out, root } = await fixture();
    const { "model.norm.weight": _dropped, ...rest } = randomModel(4, shapes);
    const short = await writeTorchExpert(join(root, "short/model.pt"), rest);
    await refusedWithoutOutput(
      { mode: "avg", experts: [...experts, short], out },
      "MERGE_KEY_MISSING",
      "model.norm.weight",
    );
  });

  it("a shape disagreement with the base", async () => {
    const { experts, out, root } = await fixture();
    const base = await writeHfBase(
      join(root, "base2"),
      randomModel(9, { ...shapes, "model.norm.weight": [5] }),
    );
    await refusedWithoutOutput(
      { mode: "tv", experts, base, out },
      "MERGE_SHAPE_MISMATCH",
      "model.norm.weight",
    );
  });

  it("a dtype disagreement between experts", async () => {
    const { experts, out, root } = await fixture();
    const model = randomModel(5, shapes);
    const f32 = await writeTorchExpert(join(root, "f32/model.pt"), {
      ...model,
      "model.norm.weight": { ...model["model.norm.weight"]!, dtype: "F32" },
    });
    await refusedWithoutOutput(
      { mode: "avg", experts: [experts[0]!, f32], out },
      "MERGE_DTYPE_MISMATCH",
      "model.norm.weight",
    );
  });

  it("an expert that is not {net: state_dict}, and one that is not a model file", async () => {
    const { experts, out, root } = await fixture();
    const flat = await writeTorchExpert(join(root, "flat/model.pt"), randomModel(6, shapes), "model");
    await refusedWithoutOutput({ mode: "avg", experts: [experts[0]!, flat], out }, "MERGE_EXPERT_LAYOUT");
    await writeFile(join(root, "junk.pt"), "not a model");
    await refusedWithoutOutput(
      { mode: "avg", experts: [join(root, "junk.pt")], out },
      "MERGE_INPUT_UNREADABLE",
    );
    await refusedWithoutOutput(
      { mode: "avg", experts: [join(root, "missing.pt")], out },
      "MERGE_INPUT_UNREADABLE",
    );
  });

  it.each(["fifo", "zero"] as const)(
    "an expert that is a %s: refused naming it, never waited on or read without end",
    { timeout: 10_000 },
    async (what) => {
      const { experts, out, root } = await fixture();
      const planted = join(root, `${what}.pt`);
      if (what === "fifo") execFileSync("mkfifo", [planted]);
      else await symlink("/dev/zero", planted);
      const merged = mergeExperts({ mode: "avg", experts: [experts[0]!, planted], out });
      await expect(merged).rejects.toMatchObject({ code: "MERGE_INPUT_UNREADABLE", file: planted });
      await expect(merged).rejects.toThrow(planted);
      expect(await readdir(tmp)).not.toContain("run");
    },
  );

  it("a base that is not a Hugging Face directory", async () => {
    const { experts, out, root } = await fixture();
    await refusedWithoutOutput({ mode: "tv", experts, base: join(root, "a"), out }, "MERGE_INPUT_UNREADABLE");
  });
});

describe("mergeExperts: skip, rebuild, refuse", () => {
  it("skips the same request on an intact output and leaves every byte and time alone", async () => {
    const { experts, base, out, iterDir } = await fixture();
    await mergeExperts({ mode: "tv", experts, base, lam: 0.5, out });
    const before = await snapshot(iterDir);
    const mtime = (await stat(out)).mtimeMs;
    const report = await mergeExperts({ mode: "tv", experts, base, lam: 0.5, out });
    expect(report.status).toBe("skipped");
    expect(report.model).toEqual(await hashFile(out));
    expect(await snapshot(iterDir)).toEqual(before);
    expect((await stat(out)).mtimeMs).toBe(mtime);
  });

  it("an abort while the inputs are hashed ends as MERGE_ABORTED caused by the hasher's abort", async () => {
    const { experts, base, out } = await fixture();
    await mergeExperts({ mode: "tv", experts, base, lam: 0.5, out });
    const controller = new AbortController();
    const error = await drain(
      mergeExpertsIter({ mode: "tv", experts, base, lam: 0.5, out }, { signal: controller.signal }),
      (event) => {
        if (event.type === "phase" && event.phase === "hash-inputs")
          controller.abort(new Error("SIGINT received"));
      },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "MERGE_ABORTED", cause: { code: "HASH_ABORTED" } });
  });

  it("treats the same expert bytes at another path as the same request", async () => {
    const { experts, out, root } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    await mkdir(join(root, "moved"));
    await rename(experts[0]!, join(root, "moved/model.pt"));
    const report = await mergeExperts({
      mode: "avg",
      experts: [join(root, "moved/model.pt"), ...experts.slice(1)],
      out,
    });
    expect(report.status).toBe("skipped");
  });

  it("refuses a completed different request (lam) and changes nothing; --force replaces it", async () => {
    const { experts, base, out, iterDir } = await fixture();
    await mergeExperts({ mode: "tv", experts, base, lam: 0.5, out });
    const before = await snapshot(iterDir);
    await expect(mergeExperts({ mode: "tv", experts, base, lam: 1, out })).rejects.toMatchObject({
      code: "MERGE_DIFFERENT_REQUEST",
      kind: "refused",
      message: expect.stringContaining("lam"),
    });
    expect(await snapshot(iterDir)).toEqual(before);
    const forced = await mergeExperts({ mode: "tv", experts, base, lam: 1, out, force: true });
    expect(forced.status).toBe("merged");
    expect((await MERGE_COMPLETE.read(artifactFiles(iterDir).completion)).request.lam).toBe(1);
  });

  it("refuses the same experts in another order (the order is part of the identity)", async () => {
    const { experts, out } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    await expect(mergeExperts({ mode: "avg", experts: [...experts].reverse(), out })).rejects.toMatchObject({
      code: "MERGE_DIFFERENT_REQUEST",
      message: expect.stringContaining("experts[0]"),
    });
  });

  it("refuses a changed expert (same size, other bytes) by its digest", async () => {
    const { experts, out } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    await writeTorchExpert(experts[1]!, randomModel(77, shapes));
    await expect(mergeExperts({ mode: "avg", experts, out })).rejects.toMatchObject({
      code: "MERGE_DIFFERENT_REQUEST",
      message: expect.stringContaining("experts[1]"),
    });
  });

  it("rebuilds a damaged model without --force", async () => {
    const { experts, out } = await fixture();
    const first = await mergeExperts({ mode: "avg", experts, out });
    const bytes = await readFile(out);
    bytes[bytes.length - 100] = bytes[bytes.length - 100]! ^ 0xff;
    await writeFile(out, bytes);
    const report = await mergeExperts({ mode: "avg", experts, out });
    expect(report).toMatchObject({ status: "merged", reason: expect.stringContaining("damaged") });
    expect(await hashFile(out)).toEqual(first.model);
  });

  it("rebuilds an output whose completion record is gone (incomplete)", async () => {
    const { experts, out, iterDir } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    await rm(artifactFiles(iterDir).completion);
    const report = await mergeExperts({ mode: "avg", experts, out });
    expect(report).toMatchObject({ status: "merged", reason: expect.stringContaining("incomplete") });
  });

  it("refuses an output completed by another tool version unless --force", async () => {
    const { experts, out, iterDir } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    const files = artifactFiles(iterDir);
    const record = await MERGE_COMPLETE.read(files.completion);
    await writeFile(
      files.completion,
      MERGE_COMPLETE.serialize({ ...record, tool_version: "merge_model_pt/1" }),
    );
    await expect(mergeExperts({ mode: "avg", experts, out })).rejects.toMatchObject({
      code: "MERGE_OTHER_TOOL_VERSION",
    });
    expect((await mergeExperts({ mode: "avg", experts, out, force: true })).status).toBe("merged");
    expect((await MERGE_COMPLETE.read(files.completion)).tool_version).toBe(MERGE_TOOL_VERSION);
  });

  it("refuses the retired tool's legacy manifest unless --force", async () => {
    const { experts, out, iterDir } = await fixture();
    await mkdir(iterDir, { recursive: true });
    await writeFile(out, "legacy model bytes");
    const legacy = {
      tool: "merge_model_pt",
      version: 1,
      iteration: 300,
      files: { "model.pt": { size: 18, sha256: "a".repeat(64) } },
    };
    await writeFile(artifactFiles(iterDir).manifest, JSON.stringify(legacy));
    await expect(mergeExperts({ mode: "avg", experts, out })).rejects.toMatchObject({
      code: "MERGE_OTHER_TOOL_VERSION",
      message: expect.stringContaining("merge_model_pt"),
    });
    expect((await mergeExperts({ mode: "avg", experts, out, force: true })).status).toBe("merged");
  });

  it("refuses another writer's committed artifact unless --force", async () => {
    const { experts, out, iterDir } = await fixture();
    await mkdir(iterDir, { recursive: true });
    await writeFile(out, "trainer model");
    const manifest = ARTIFACT_MANIFEST.serialize({
      schema: "posttrain.checkpoint-artifact.v1",
      iteration: 300,
      format: "consolidated",
      logical_components: ["model"],
      physical_components: [{ name: "model", kind: "file", path: "model.pt", size: 13 }],
      producer: "ckpt-trainer/0.1.0",
    });
    await writeFile(artifactFiles(iterDir).manifest, manifest);
    await expect(mergeExperts({ mode: "avg", experts, out })).rejects.toMatchObject({
      code: "MERGE_FOREIGN_ARTIFACT",
    });
    expect((await mergeExperts({ mode: "avg", experts, out, force: true })).status).toBe("merged");
  });

  it("never replaces a directory holding files a merge did not write, even with --force", async () => {
    const { experts, out, iterDir } = await fixture();
    await mergeExperts({ mode: "avg", experts, out });
    await writeFile(join(iterDir, ".uploaded"), "receipt");
    const before = await snapshot(iterDir);
    await expect(
      mergeExperts({ mode: "avg", experts: [...experts].reverse(), out, force: true }),
    ).rejects.toMatchObject({
      code: "MERGE_FOREIGN_FILES",
      message: expect.stringContaining(".uploaded"),
    });
    expect(await snapshot(iterDir)).toEqual(before);
    // The identical request still skips: a skip writes nothing.
    expect((await mergeExperts({ mode: "avg", experts, out })).status).toBe("skipped");
  });

  it("fails without committing when an input changes while it is merged", async () => {
    const { experts, out, root } = await fixture();
    let touched = false;
    await expect(
      (async () => {
        for await (const event of mergeExpertsIter({ mode: "avg", experts, out }, { chunkElements: 1 })) {
          if (event.type === "bytes" && !touched) {
            touched = true;
            await utimes(experts[2]!, new Date(), new Date(Date.now() + 5000));
          }
        }
      })(),
    ).rejects.toMatchObject({ code: "MERGE_INPUT_CHANGED", file: experts[2] });
    expect(await readdir(join(root, "run/checkpoint_artifacts"))).toEqual([]);
  });
});

describe("mergeExperts: one writer per output", () => {
  it("refuses while another merge holds the output's lock, changing nothing; merges once it is released", async () => {
    const f = await fixture();
    const parent = join(f.iterDir, "..");
    await mkdir(parent, { recursive: true });
    const other = await lockDirectory({
      lockDir: join(parent, ".iter_000000300.merge.lock"),
      staleMs: 10_000,
      waitMs: 0,
    });
    if (other.status !== "held") throw new Error(`expected to hold the lock, got ${other.status}`);
    const refused = await mergeExperts(
      { mode: "avg", experts: f.experts, out: f.out },
      { lockWaitMs: 0 },
    ).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "MERGE_OUTPUT_LOCKED", kind: "refused" });
    expect(String((refused as Error).message)).toContain(`pid ${process.pid}`);
    expect(await readdir(parent)).toEqual([".iter_000000300.merge.lock"]);
    await other.lock.release();
    const report = await mergeExperts({ mode: "avg", experts: f.experts, out: f.out }, { lockWaitMs: 0 });
    expect(report.status).toBe("merged");
    expect(await readdir(parent)).toEqual(["iter_000000300"]);
  });
});

describe("mergeExperts: recovery after a crash in the swap", () => {
  async function completedThenSplit() {
    const f = await fixture();
    await mergeExperts({ mode: "avg", experts: f.experts, out: f.out });
    const parent = join(f.root, "run/checkpoint_artifacts");
    return {
      ...f,
      parent,
      staging: join(parent, ".iter_000000300.merge-staging"),
      previous: join(parent, ".iter_000000300.merge-previous"),
    };
  }

  it("finishes a swap stopped between its renames (complete staging, previous aside)", async () => {
    const f = await completedThenSplit();
    const done = await snapshot(f.iterDir);
    // The state between the renames of a forced rebuild: old output aside, the new one staged.
    await rename(f.iterDir, f.staging);
    await mkdir(f.previous);
    await writeFile(join(f.previous, "model.pt"), "old");
    const report = await mergeExperts({ mode: "avg", experts: f.experts, out: f.out });
    expect(report).toMatchObject({ status: "skipped", recovered: ["finished-swap", "removed-previous"] });
    expect(await snapshot(f.iterDir)).toEqual(done);
    expect((await readdir(f.parent)).sort()).toEqual(["iter_000000300"]);
  });

  it("undoes a swap whose staging is not complete (puts the previous output back)", async () => {
    const f = await completedThenSplit();
    const done = await snapshot(f.iterDir);
    await rename(f.iterDir, f.previous);
    await mkdir(f.staging);
    await writeFile(join(f.staging, "model.pt"), "partial");
    const report = await mergeExperts({ mode: "avg", experts: f.experts, out: f.out });
    expect(report).toMatchObject({ status: "skipped", recovered: ["undid-swap", "removed-staging"] });
    expect(await snapshot(f.iterDir)).toEqual(done);
  });

  it("refuses to remove a staging directory holding something a merge does not write", async () => {
    const f = await completedThenSplit();
    await mkdir(join(f.staging, "nested"), { recursive: true });
    await expect(mergeExperts({ mode: "avg", experts: f.experts, out: f.out })).rejects.toMatchObject({
      code: "MERGE_FOREIGN_FILES",
      file: f.staging,
    });
  });

  it.each([
    ["a symbolic link to a directory at the staging name", "staging", "link"],
    ["a symbolic link at the previous name", "previous", "link"],
    ["a FIFO at the staging name", "staging", "fifo"],
  ] as const)("refuses %s: coded, nothing followed or removed", async (_, side, what) => {
    const f = await fixture();
    const parent = join(f.root, "run/checkpoint_artifacts");
    await mkdir(parent, { recursive: true });
    const target = join(f.root, "elsewhere");
    await mkdir(target);
    await writeFile(join(target, "keep.txt"), "not ckpt's");
    const path = join(parent, `.iter_000000300.merge-${side}`);
    if (what === "link") await symlink(target, path);
    else execFileSync("mkfifo", [path]);
    await expect(mergeExperts({ mode: "avg", experts: f.experts, out: f.out })).rejects.toMatchObject({
      code: "MERGE_FOREIGN_FILES",
      file: path,
    });
    expect(await readdir(target)).toEqual(["keep.txt"]);
    expect((await lstat(path)).isDirectory()).toBe(false);
  });
});
