import { mkdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { ARTIFACT_MANIFEST, sha256Hex } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import { commitArtifact, commitArtifactIter, normalizeComponents, planCommit } from "../src/index.js";
import { payload, tempDir, writeTree } from "./helpers.js";

const none = { file: false, dir: false };
const presence = (over: Record<string, { file: boolean; dir: boolean }>) =>
  ({ model: none, optim: none, old: none, ref: none, trainer: none, data: none, ...over }) as Parameters<
    typeof planCommit
  >[3];

describe("planCommit (pure)", () => {
  it("describes the plan's components and ignores payloads of unlisted ones", () => {
    const plan = planCommit(
      "/a/iter_1",
      "consolidated",
      ["model"],
      presence({
        model: { file: true, dir: false },
        optim: { file: true, dir: false },
      }),
    );
    expect(plan.components).toEqual([{ name: "model", kind: "file", path: "model.pt" }]);
    expect(plan.ignored).toEqual(["optim.pt"]);
  });

  it("takes optional training-state parts when present and requires trainer.pt", () => {
    const plan = planCommit(
      "/a/iter_1",
      "dcp",
      ["model", "training_state"],
      presence({
        model: { file: false, dir: true },
        trainer: { file: true, dir: false },
        data: { file: true, dir: false },
        ref: { file: false, dir: true },
      }),
    );
    expect(plan.components.map((c) => c.path)).toEqual(["model", "ref", "trainer.pt", "data.pt"]);
    expect(() =>
      planCommit(
        "/a/iter_1",
        "dcp",
        ["model", "training_state"],
        presence({ model: { file: false, dir: true } }),
      ),
    ).toThrow(expect.objectContaining({ code: "COMMIT_COMPONENT_MISSING" }));
  });

  it("refuses both forms, and a form the format does not allow", () => {
    expect(() =>
      planCommit("/a/iter_1", "consolidated", ["optimizer"], presence({ optim: { file: true, dir: true } })),
    ).toThrow(expect.objectContaining({ code: "COMMIT_COMPONENT_CONFLICT" }));
    expect(() =>
      planCommit("/a/iter_1", "consolidated", ["model"], presence({ model: { file: false, dir: true } })),
    ).toThrow(expect.objectContaining({ code: "COMMIT_COMPONENT_CONFLICT" }));
    // optim may be sharded under consolidated
    expect(
      planCommit("/a/iter_1", "consolidated", ["optimizer"], presence({ optim: { file: false, dir: true } }))
        .components,
    ).toEqual([{ name: "optim", kind: "dir", path: "optim" }]);
  });

  it("normalizes plans into table order and refuses bad ones", () => {
    expect(normalizeComponents(["training_state", "model"])).toEqual(["model", "training_state"]);
    // optim (the optimizer's file name) is read as optimizer; naming it both ways is naming it twice.
    expect(normalizeComponents(["optim", "model"])).toEqual(["model", "optimizer"]);
    for (const bad of [[], ["model", "model"], ["weights"], ["optim", "optimizer"]]) {
      expect(() => normalizeComponents(bad)).toThrow(
        expect.objectContaining({ code: "COMMIT_BAD_COMPONENTS" }),
      );
    }
  });
});

describe("commitArtifact", () => {
  it("writes the manifest last with sizes and digests, leaving unselected payloads out", async () => {
    const dir = join(await tempDir(), "checkpoint_artifacts", "iter_000000300");
    const model = payload("model");
    await writeTree(dir, { "model.pt": model, "optim.pt": payload("stale optim") });
    const events: string[] = [];
    const result = await commitArtifact(
      dir,
      { format: "consolidated", components: ["model"], producer: "test/1" },
      (e) => events.push(e.type),
    );
    expect(result.ignored).toEqual(["optim.pt"]);
    expect(result.bytes).toBe(model.byteLength);
    const manifest = ARTIFACT_MANIFEST.parse(await readFile(join(dir, ARTIFACT_MANIFEST.fileName)));
    expect(manifest).toEqual({
      schema: "posttrain.checkpoint-artifact.v1",
      iteration: 300,
      format: "consolidated",
      logical_components: ["model"],
      physical_components: [
        { name: "model", kind: "file", path: "model.pt", size: model.byteLength, sha256: sha256Hex(model) },
      ],
      producer: "test/1",
    });
    expect(events.at(-1)).toBe("committed");
    expect(events).toContain("hash");
  });

  it("commits DCP shard directories with every file", async () => {
    const dir = join(await tempDir(), "iter_000000100");
    await writeTree(dir, {
      "model/.metadata": "meta",
      "model/__0_0.distcp": payload("s0"),
      "model/__1_0.distcp": payload("s1"),
      "trainer.pt": "trainer",
    });
    const result = await commitArtifact(dir, { format: "dcp", components: ["model", "training_state"] });
    const model = result.manifest.physical_components[0]!;
    expect(model.kind === "dir" && model.files.map((f) => f.path)).toEqual([
      ".metadata",
      "__0_0.distcp",
      "__1_0.distcp",
    ]);
    expect(result.manifest.physical_components.map((c) => c.name)).toEqual(["model", "trainer"]);
  });

  it("refuses a second commit before reading or writing anything", async () => {
    const dir = join(await tempDir(), "iter_000000001");
    await writeTree(dir, { "model.pt": payload("a") });
    await commitArtifact(dir, { format: "consolidated", components: ["model"] });
    const before = await stat(join(dir, ARTIFACT_MANIFEST.fileName));
    const iter = commitArtifactIter(dir, { format: "consolidated", components: ["model"] });
    await expect(iter.next()).rejects.toMatchObject({ code: "PUBLISH_ALREADY_COMMITTED", kind: "refused" });
    expect((await stat(join(dir, ARTIFACT_MANIFEST.fileName))).mtimeMs).toBe(before.mtimeMs);
  });

  it("refuses an iteration that does not match the directory, and a non-iter directory", async () => {
    const root = await tempDir();
    const dir = join(root, "iter_000000005");
    await writeTree(dir, { "model.pt": payload("a") });
    await expect(
      commitArtifact(dir, { iteration: 6, format: "consolidated", components: ["model"] }),
    ).rejects.toMatchObject({
      code: "COMMIT_ITERATION_MISMATCH",
      kind: "input",
    });
    await mkdir(join(root, "step5"));
    await expect(commitArtifact(join(root, "step5"), { format: "consolidated" })).rejects.toMatchObject({
      code: "COMMIT_NOT_ITER_DIR",
    });
  });

  it("refuses a plan whose component is missing and writes nothing", async () => {
    const dir = join(await tempDir(), "iter_000000005");
    await writeTree(dir, { "model.pt": payload("a") });
    await expect(commitArtifact(dir, { format: "consolidated" })).rejects.toMatchObject({
      code: "COMMIT_COMPONENT_MISSING",
    });
    await expect(stat(join(dir, ARTIFACT_MANIFEST.fileName))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
