// Issue 16: fetching onto a full disk. The archive is a file:// store on a normal disk; the
// staging directory is on a real small tmpfs (the suite runs as root, in CI too; a failed mount
// fails it). Every write step of a fetch (each `.part`, the native manifest, `.staged.json`) is
// made to meet the full disk, and each must end READER_NO_SPACE naming the path, keep what was
// staged before, leave no temporary, and succeed once space is freed.
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { ARTIFACT_MANIFEST, STAGED_RECORD } from "@ckpt/manifest";
import { createFileStore, type ObjectStore } from "@ckpt/object-store";
import { fillDisk, smallDisk, testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { ArchiveReaderError, fetchArtifact } from "../src/index.js";
import { bytes, makeArtifact, putArchive, type TestArtifact } from "./helpers/archive.js";

const KiB = 1024;
const PAGE = 4 * KiB;
const STAGE = "iter_000000300";

/** Every file below `dir` with its bytes, by relative path. */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out.set(path.slice(dir.length + 1), (await readFile(path)).toString("base64"));
  }
  return out;
}

/** Names below `dir` that only a write in progress leaves: `.part`s and atomic-write temporaries. */
async function leftovers(dir: string): Promise<string[]> {
  const names = (await readdir(dir, { recursive: true }).catch(() => [])).map(String);
  return names.filter((n) => n.endsWith(".part") || /\.tmp-\d+-[0-9a-f]{12}$/.test(n));
}

async function archive(label: string, artifact: TestArtifact): Promise<ObjectStore> {
  const store = createFileStore({ root: join(await testdir("ckpt-fetch-src-"), label, STAGE) });
  await putArchive(store, artifact);
  return store;
}

async function expectStaged(stagedDir: string, artifact: TestArtifact): Promise<void> {
  for (const path of [...artifact.payloads, ARTIFACT_MANIFEST.fileName]) {
    expect(new Uint8Array(await readFile(join(stagedDir, path)))).toEqual(artifact.files.get(path));
  }
  expect((await STAGED_RECORD.read(join(stagedDir, STAGED_RECORD.fileName))).complete).toBe(true);
}

describe("fetch onto a full disk", () => {
  let disk: string;
  let artifact: TestArtifact;
  let store: ObjectStore;
  beforeAll(async () => {
    disk = await smallDisk(512 * KiB);
    artifact = makeArtifact({ model: bytes(20 * KiB, 7), trainer: bytes(8 * KiB, 8) });
    store = await archive("a", artifact);
  });

  it("refuses before writing anything when the archive does not fit, and fetches once space is freed", async () => {
    const dst = join(disk, "early");
    const filler = await fillDisk(disk, 8 * KiB);
    const refusal = fetchArtifact(store, dst);
    await expect(refusal).rejects.toMatchObject({ code: "READER_NO_SPACE", subject: join(dst, STAGE) });
    await expect(refusal).rejects.toThrow(/iter_000000300 needs \d+ bytes, \d+ free\. Nothing was written/);
    await expect(readdir(dst)).rejects.toMatchObject({ code: "ENOENT" });
    await rm(filler);
    await expectStaged((await fetchArtifact(store, dst)).stagedDir, artifact);
    await rm(dst, { recursive: true });
  });

  it("meets the full disk at every write step (each .part, the manifest, .staged.json), and each run again succeeds", async () => {
    const failedAt = new Set<string>();
    let succeeded = 0;
    // The disk fills up (leaving `leave` bytes) when the first payload download starts: after the
    // free-space check passed and the record was written, as when another writer takes the space.
    for (let leave = 0; leave <= 10 * PAGE; leave += PAGE) {
      const dst = join(disk, `sweep-${leave}`);
      let filler: string | undefined;
      const filling = new Proxy(store, {
        get(target, prop) {
          const value = Reflect.get(target, prop, target);
          if (prop !== "get") return typeof value === "function" ? value.bind(target) : value;
          return async (...args: Parameters<ObjectStore["get"]>) => {
            if (filler === undefined && artifact.payloads.includes(args[0]))
              filler = await fillDisk(disk, leave);
            return target.get(...args);
          };
        },
      });
      const stagedDir = join(dst, STAGE);
      const outcome = await fetchArtifact(filling, dst, { concurrency: 1 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      if (outcome === undefined) {
        succeeded++;
      } else {
        expect(outcome).toBeInstanceOf(ArchiveReaderError);
        const error = outcome as ArchiveReaderError;
        expect(error.code, error.message).toBe("READER_NO_SPACE");
        expect(error.subject?.startsWith(`${stagedDir}/`)).toBe(true);
        expect(error.message).toContain(error.subject);
        expect(error.message).toMatch(/\d+ bytes still to write/);
        expect(error.message).toContain("free space and run the same fetch again");
        failedAt.add(error.subject!.slice(stagedDir.length + 1));
        // No half-written record under a final name, no temporary left; the record says incomplete.
        expect(await leftovers(dst)).toEqual([]);
        expect((await STAGED_RECORD.read(join(stagedDir, STAGED_RECORD.fileName))).complete).toBe(false);
        if (error.subject !== join(stagedDir, STAGED_RECORD.fileName)) {
          await expect(readFile(join(stagedDir, ARTIFACT_MANIFEST.fileName))).rejects.toMatchObject({
            code: "ENOENT",
          });
        }
      }
      if (filler !== undefined) await rm(filler);
      await expectStaged((await fetchArtifact(store, dst)).stagedDir, artifact);
      await rm(dst, { recursive: true });
    }
    expect([...failedAt].sort()).toEqual([
      ARTIFACT_MANIFEST.fileName,
      STAGED_RECORD.fileName,
      "model.pt.part",
      "trainer.pt.part",
    ]);
    expect(succeeded).toBeGreaterThan(0);
  }, 120_000);

  it("keeps a complete staging of another archive byte-identical when the disk is full before its record changes", async () => {
    const dst = join(disk, "replace");
    const first = await fetchArtifact(store, dst);
    const before = await snapshot(first.stagedDir);
    // Another archive of the same step, smaller: removing the first one's files would make room,
    // so the free-space check lets it start; its first write (marking the record incomplete) meets the full disk.
    const other = makeArtifact({ model: bytes(20 * KiB, 9), trainer: bytes(4 * KiB, 10) });
    const otherStore = await archive("b", other);
    const filler = await fillDisk(disk, 0);
    await expect(fetchArtifact(otherStore, dst)).rejects.toMatchObject({
      code: "READER_NO_SPACE",
      subject: join(first.stagedDir, STAGED_RECORD.fileName),
    });
    expect(await snapshot(first.stagedDir)).toEqual(before);
    expect(await leftovers(dst)).toEqual([]);
    await rm(filler);
    await expectStaged((await fetchArtifact(otherStore, dst)).stagedDir, other);
    await rm(dst, { recursive: true });
  });
});
