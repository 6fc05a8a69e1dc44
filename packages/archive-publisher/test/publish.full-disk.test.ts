// Issue 16: publishing with a full disk, on a real small tmpfs (the suite runs as root, in CI
// too; a failed mount fails it). A file:// store on the small disk takes a publish from an
// artifact on a normal disk, and an artifact on the small disk publishes to a store on a normal
// disk. Every write step (the probe, the declaration, each payload, the manifest; the local
// manifest rewrite and the receipt) is made to meet the full disk: each ends PUBLISH_NO_SPACE
// naming the path, leaves nothing half-written under a final name and no temporary, and the same
// publish succeeds once space is freed.
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { ARTIFACT_MANIFEST, LEGACY_ARTIFACT_MANIFEST_FILE, sha256Hex, UPLOADED_MARKER } from "@ckpt/manifest";
import { createFileStore, type ObjectStore } from "@ckpt/object-store";
import { fillDisk, smallDisk } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  ArchivePublisherError,
  commitArtifact,
  publishArtifact,
  uploadFullCheckpoint,
} from "../src/index.js";
import { payload, tempDir, writeTree } from "./helpers.js";

const KiB = 1024;
const PAGE = 4 * KiB;

/** Every file below `dir` with its bytes, by relative path (missing dir: empty). */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.set(path.slice(dir.length + 1), (await readFile(path)).toString("base64"));
  }
  return out;
}

/** Temporaries of the file store or of an atomic write below `dir`. */
async function temporaries(dir: string): Promise<string[]> {
  const names = (await readdir(dir, { recursive: true }).catch(() => [])).map(String);
  return names.filter((n) => n.includes(".ckpt-tmp.") || /\.tmp-\d+-[0-9a-f]{12}$/.test(n));
}

async function artifact(parent: string): Promise<string> {
  const dir = join(parent, "iter_000000300");
  await writeTree(dir, {
    "model.pt": payload("model", 40 * KiB),
    "trainer.pt": payload("trainer", 12 * KiB),
  });
  await commitArtifact(dir, { format: "consolidated", components: ["model", "training_state"] });
  return dir;
}

/** `store`, filling `disk` (leaving `leave` bytes) right before the first write whose key `at` accepts. */
function fillingAt(store: ObjectStore, disk: string, at: (key: string) => boolean, leave = 0) {
  const state: { filler?: string } = {};
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop !== "put" && prop !== "createIfAbsent")
        return typeof value === "function" ? value.bind(target) : value;
      return async (key: string, ...rest: unknown[]) => {
        if (state.filler === undefined && at(key)) state.filler = await fillDisk(disk, leave);
        return (value as (...a: unknown[]) => unknown).call(target, key, ...rest);
      };
    },
  });
  return { store: wrapped, freeSpace: async () => state.filler !== undefined && rm(state.filler) };
}

async function expectPublished(dir: string, root: string): Promise<void> {
  const receipt = await UPLOADED_MARKER.read(join(dir, UPLOADED_MARKER.fileName));
  expect(receipt.legacy).toBe(false);
  for (const name of ["model.pt", "trainer.pt", ARTIFACT_MANIFEST.fileName]) {
    expect(sha256Hex(await readFile(join(root, name)))).toBe(sha256Hex(await readFile(join(dir, name))));
  }
}

describe("publish to a file:// store on a full disk", () => {
  let disk: string;
  beforeAll(async () => {
    disk = await smallDisk(512 * KiB);
  });

  it("refuses before writing anything when the payloads do not fit, and publishes once space is freed", async () => {
    const dir = await artifact(await tempDir());
    const before = await snapshot(dir);
    const root = join(disk, "early", "iter_000000300");
    const filler = await fillDisk(disk, 16 * KiB);
    const refusal = publishArtifact(dir, createFileStore({ root }));
    await expect(refusal).rejects.toMatchObject({ code: "PUBLISH_NO_SPACE", subject: root });
    await expect(refusal).rejects.toThrow(/iter_000000300 needs \d+ bytes, \d+ free\. Nothing was written/);
    expect(await snapshot(root)).toEqual(new Map());
    expect(await snapshot(dir)).toEqual(before);
    await rm(filler);
    expect((await publishArtifact(dir, createFileStore({ root }))).status).toBe("published");
    await expectPublished(dir, root);
    await rm(join(disk, "early"), { recursive: true });
  });

  const steps: Array<[string, (key: string) => boolean]> = [
    ["the conditional-create probe", (key) => key.startsWith(".posttrain-archive.probe-")],
    ["the declaration", (key) => key === ".posttrain-archive.json"],
    ["the first payload", (key) => key === "model.pt"],
    ["the second payload", (key) => key === "trainer.pt"],
    ["the manifest", (key) => key === ARTIFACT_MANIFEST.fileName],
  ];
  for (const [step, at] of steps) {
    for (const leave of [0, 2 * PAGE, 11 * PAGE]) {
      it(`meets the full disk at ${step} with ${leave} bytes left: PUBLISH_NO_SPACE or done, and a rerun publishes`, async () => {
        const dir = await artifact(await tempDir());
        const before = await snapshot(dir);
        const root = join(disk, "steps", "iter_000000300");
        const filling = fillingAt(createFileStore({ root }), disk, at, leave);
        const outcome = await publishArtifact(dir, filling.store, { uploadConcurrency: 1 }).then(
          () => undefined,
          (error: unknown) => error,
        );
        if (outcome !== undefined) {
          expect(outcome).toBeInstanceOf(ArchivePublisherError);
          const error = outcome as ArchivePublisherError;
          expect(error.code, error.message).toBe("PUBLISH_NO_SPACE");
          // With nothing left, the step the disk filled before is the one that fails.
          if (leave === 0) expect(at(error.subject!)).toBe(true);
          expect(error.message).toContain(`${root}/${error.subject}`);
          expect(error.message).toMatch(/needs \d+ bytes|bytes still to write/);
          expect(error.message).toContain("free space and run again");
          // Not committed: no manifest in the store, no receipt, the artifact untouched, no temporary.
          await expect(readFile(join(root, ARTIFACT_MANIFEST.fileName))).rejects.toMatchObject({
            code: "ENOENT",
          });
          expect(await snapshot(dir)).toEqual(before);
          expect(await temporaries(root)).toEqual([]);
        } else {
          // Enough was left for this step and the ones after it.
          expect(leave).toBeGreaterThan(0);
        }
        await filling.freeSpace();
        await publishArtifact(dir, createFileStore({ root }));
        await expectPublished(dir, root);
        await rm(join(disk, "steps"), { recursive: true });
      });
    }
  }
});

describe("publish of an artifact on a full disk", () => {
  let disk: string;
  beforeAll(async () => {
    disk = await smallDisk(256 * KiB);
  });

  async function legacyArtifact(): Promise<{ dir: string; legacy: string }> {
    const dir = join(disk, "run", "iter_000000300");
    const model = payload("merged", 8 * KiB);
    const legacy = `${JSON.stringify({ tool: "merge_model_pt", version: 1, iteration: 300, files: { "model.pt": { size: model.byteLength, sha256: sha256Hex(model) } } })}\n`;
    await writeTree(dir, { "model.pt": model, [ARTIFACT_MANIFEST.fileName]: legacy });
    return { dir, legacy };
  }

  it("sweeps the free space over the manifest rewrite: refused early, met half way, or done; a rerun publishes", async () => {
    const outcomes: string[] = [];
    for (const leave of [0, PAGE, 2 * PAGE, 4 * PAGE]) {
      const { dir, legacy } = await legacyArtifact();
      const root = join(await tempDir(), "iter_000000300");
      const filler = await fillDisk(disk, leave);
      const outcome = await publishArtifact(dir, createFileStore({ root })).then(
        () => "published",
        (error: unknown) => {
          expect(error).toMatchObject({ code: "PUBLISH_NO_SPACE" });
          const { subject, message } = error as ArchivePublisherError;
          expect(message).toContain(subject);
          return subject === dir ? "early" : (subject ?? "").slice(dir.length + 1);
        },
      );
      outcomes.push(outcome);
      if (outcome !== "published") {
        // The manifest keeps its legacy bytes; nothing was uploaded; no temporary, no receipt.
        expect(await readFile(join(dir, ARTIFACT_MANIFEST.fileName), "utf8")).toBe(legacy);
        expect(await temporaries(dir)).toEqual([]);
        expect(await snapshot(root)).toEqual(new Map());
        await expect(readFile(join(dir, UPLOADED_MARKER.fileName))).rejects.toMatchObject({ code: "ENOENT" });
      }
      await rm(filler);
      if (outcome !== "published")
        expect((await publishArtifact(dir, createFileStore({ root }))).status).toBe("published");
      expect(await readFile(join(dir, LEGACY_ARTIFACT_MANIFEST_FILE), "utf8")).toBe(legacy);
      await rm(join(disk, "run"), { recursive: true });
    }
    expect(outcomes).toContain("early");
    expect(outcomes).toContain(ARTIFACT_MANIFEST.fileName);
    expect(outcomes).toContain("published");
  });

  it("a full checkpoint's upload: a full store disk and a full receipt disk are each PUBLISH_NO_SPACE, and a rerun finishes", async () => {
    const dir = join(disk, "checkpoints", "iter_000000100");
    await writeTree(dir, { "model.pt": payload("m", 8 * KiB), "trainer.pt": payload("t", 100) });
    const root = join(await tempDir(), "full");
    // The receipt's disk fills once the last file is stored.
    const filling = fillingAt(createFileStore({ root }), disk, (key) => key === "trainer.pt");
    const receipt = join(dir, UPLOADED_MARKER.fileName);
    await expect(uploadFullCheckpoint(dir, filling.store, { concurrency: 1 })).rejects.toMatchObject({
      code: "PUBLISH_NO_SPACE",
      subject: receipt,
      message: expect.stringMatching(/bytes still to write\. Every file is uploaded/),
    });
    expect(await temporaries(dir)).toEqual([]);
    await filling.freeSpace();
    const rerun = await uploadFullCheckpoint(dir, createFileStore({ root }));
    expect(rerun.skipped).toEqual(["model.pt", "trainer.pt"]);
    expect((await UPLOADED_MARKER.read(receipt)).legacy).toBe(false);
    // The store's disk full: refused by the store before the file is written.
    await rm(receipt);
    const storeRoot = join(disk, "full-store");
    const filler = await fillDisk(disk, 0);
    await expect(uploadFullCheckpoint(dir, createFileStore({ root: storeRoot }))).rejects.toMatchObject({
      code: "PUBLISH_NO_SPACE",
      message: expect.stringContaining("free space and run again"),
    });
    expect(await temporaries(storeRoot)).toEqual([]);
    await rm(filler);
    expect((await uploadFullCheckpoint(dir, createFileStore({ root: storeRoot }))).uploaded).toEqual([
      "model.pt",
      "trainer.pt",
    ]);
    await rm(join(disk, "checkpoints"), { recursive: true });
    await rm(storeRoot, { recursive: true });
  });

  it("meets the full disk at the receipt after the archive is committed; a rerun adopts it and writes the receipt", async () => {
    const dir = await artifact(join(disk, "receipt"));
    const root = join(await tempDir(), "iter_000000300");
    const filling = fillingAt(createFileStore({ root }), disk, (key) => key === ARTIFACT_MANIFEST.fileName);
    const refusal = publishArtifact(dir, filling.store);
    const receipt = join(dir, UPLOADED_MARKER.fileName);
    await expect(refusal).rejects.toMatchObject({ code: "PUBLISH_NO_SPACE", subject: receipt });
    await expect(refusal).rejects.toThrow(
      /bytes still to write\. The archive at .* is complete and verified/,
    );
    await expect(readFile(receipt)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await temporaries(dir)).toEqual([]);
    await filling.freeSpace();
    expect((await publishArtifact(dir, createFileStore({ root }))).status).toBe("adopted");
    await expectPublished(dir, root);
  });
});

describe("commit on a full disk", () => {
  it("fails PUBLISH_NO_SPACE naming the manifest, commits nothing and leaves no temporary; commits once space is freed", async () => {
    const disk = await smallDisk(1024 * KiB);
    const dir = join(disk, "iter_000000300");
    await writeTree(dir, { "model.pt": payload("model", 40 * KiB) });
    const filler = await fillDisk(disk, 0);
    const manifest = join(dir, ARTIFACT_MANIFEST.fileName);
    const refusal = commitArtifact(dir, { format: "consolidated", components: ["model"] });
    await expect(refusal).rejects.toBeInstanceOf(ArchivePublisherError);
    await expect(refusal).rejects.toMatchObject({
      code: "PUBLISH_NO_SPACE",
      kind: "failed",
      subject: manifest,
    });
    await expect(refusal).rejects.toThrow(`the disk filled while writing ${manifest}`);
    expect([...(await snapshot(dir)).keys()]).toEqual(["model.pt"]);
    expect(await temporaries(disk)).toEqual([]);
    await rm(filler);
    await commitArtifact(dir, { format: "consolidated", components: ["model"] });
    expect(ARTIFACT_MANIFEST.parse(await readFile(manifest)).iteration).toBe(300);
  });
});
