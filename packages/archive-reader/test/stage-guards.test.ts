import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createMemoryStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { fetchArtifact } from "../src/index.js";
import { makeArtifact, putArchive } from "./helpers/archive.js";
import { snapshotTree } from "./helpers/tree.js";

const PREFIX = "run/checkpoint_artifacts/iter_000000300";
let root = "";
beforeEach(async () => {
  root = await testdir("ckpt-stage-guards-");
});

describe("staging directory guards", () => {
  it("refuses a staging path that is a file", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact());
    await writeFile(join(root, "iter_000000300"), "a file");
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_STAGE_NOT_DIRECTORY" });
    expect(await readFile(join(root, "iter_000000300"), "utf8")).toBe("a file");
  });

  it("refuses a malformed .staged.json without touching anything", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact());
    await mkdir(join(root, "iter_000000300"));
    await writeFile(join(root, "iter_000000300", ".staged.json"), "{ not json");
    await writeFile(join(root, "iter_000000300", "model.pt"), "x");
    const before = await snapshotTree(root);
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_STAGE_RECORD_INVALID" });
    expect(await snapshotTree(root)).toEqual(before);
  });

  it("a malformed .staged.json owns nothing: not even a dead writer's manifest temporary is removed", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact());
    const dir = join(root, "iter_000000300");
    await mkdir(dir);
    await writeFile(join(dir, ".staged.json"), "{}");
    // writeFileAtomic's temporary name for the native manifest, from a pid that is not running.
    await writeFile(join(dir, "..posttrain-checkpoint-artifact.json.tmp-4194303-0123456789ab"), "foreign");
    const before = await snapshotTree(root);
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({ code: "READER_STAGE_RECORD_INVALID" });
    expect(await snapshotTree(root)).toEqual(before);
  });

  it("never writes through a symlinked component directory leading outside the staging directory", async () => {
    const outside = join(root, "outside");
    await mkdir(outside);
    const store = createMemoryStore({ prefix: PREFIX });
    await putArchive(store, makeArtifact({ dcpModel: new Map([[".metadata", new Uint8Array([1, 2, 3])]]) }));
    const stage = join(root, "dst");
    await fetchArtifact(store, stage).catch(() => {});
    // Our own (incomplete: the .metadata is not a DCP file) staging, where someone swapped model/ for a symlink.
    const { rm } = await import("node:fs/promises");
    await rm(join(stage, "iter_000000300", "model"), { recursive: true, force: true });
    await symlink(outside, join(stage, "iter_000000300", "model"));
    await expect(fetchArtifact(store, stage)).rejects.toMatchObject({ code: "READER_STAGE_FOREIGN" });
    expect(await snapshotTree(outside)).toEqual({});
  });

  it("refuses a remote record larger than the record cap without buffering it whole", async () => {
    const store = createMemoryStore({ prefix: PREFIX });
    await store.put(".posttrain-checkpoint-artifact.json", new Uint8Array(64 * 1024 * 1024 + 1));
    await expect(fetchArtifact(store, root)).rejects.toMatchObject({
      code: "READER_REMOTE_RECORD_TOO_LARGE",
    });
  });
});
