// Issue 16: a full disk under a file:// store. Runs on a 2 MiB tmpfs mounted for the test (the
// suite runs as root); a failed mount fails the suite rather than skipping it.
import { spawnSync } from "node:child_process";
import { readdir, readlink, rm, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { smallDisk, testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { createFileStore } from "../src/file/store.js";

const MiB = 1024 * 1024;

async function everyName(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String).sort();
}

describe("file store on a full disk", () => {
  let mount: string;
  beforeAll(async () => {
    mount = await smallDisk(2 * MiB);
  });

  it("refuses early a body larger than the free space, leaving the previous object and nothing else", async () => {
    const store = createFileStore({ root: join(mount, "store-a") });
    const old = new Uint8Array(MiB / 2).fill(1);
    await store.put("run/model.pt", old);
    const before = await everyName(join(mount, "store-a"));
    const refusal = store.put("run/model.pt", new Uint8Array(3 * MiB).fill(2));
    await expect(refusal).rejects.toMatchObject({ code: "STORE_NO_SPACE", subject: "run/model.pt" });
    await expect(refusal).rejects.toThrow("run/model.pt");
    expect(await everyName(join(mount, "store-a"))).toEqual(before);
    const kept = Buffer.concat(await (await store.get("run/model.pt")).toArray());
    expect(kept.equals(Buffer.from(old))).toBe(true);
    await store.delete("run/model.pt");
  });

  it("closes a file body it refuses for lack of space", async () => {
    const store = createFileStore({ root: join(mount, "store-c") });
    const source = join(await testdir("ckpt-full-disk-src-"), "big");
    await writeFile(source, new Uint8Array(3 * MiB));
    await expect(store.put("big", { path: source })).rejects.toMatchObject({ code: "STORE_NO_SPACE" });
    const openOnSource = async () => {
      const fds = await readdir("/proc/self/fd");
      const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")));
      return targets.filter((t) => t === source).length;
    };
    // The read stream opens and closes asynchronously: wait for it to settle.
    for (let round = 0; round < 50 && (await openOnSource()) > 0; round++) await sleep(20);
    expect(await openOnSource()).toBe(0);
  });

  it("maps ENOSPC met while writing to STORE_NO_SPACE, cleans its temporary, and succeeds once space is freed", async () => {
    const store = createFileStore({ root: join(mount, "store-b") });
    // Fill the disk behind the store's back, after its free-space check passes.
    await store.put("filler", new Uint8Array(MiB).fill(3));
    const hog = join(mount, "hog");
    const body = Readable.from(
      (async function* () {
        // dd stops (exit 1) when the disk is full: that is the point.
        spawnSync("dd", ["if=/dev/zero", `of=${hog}`, "bs=64k", "count=100"], { stdio: "ignore" });
        yield new Uint8Array(MiB / 2).fill(4);
      })(),
    );
    const write = store.put("a/big", { stream: body, size: MiB / 2 });
    await expect(write).rejects.toMatchObject({ code: "STORE_NO_SPACE", subject: "a/big" });
    const names = await everyName(join(mount, "store-b"));
    expect(names.filter((n) => n.includes(".ckpt-tmp."))).toEqual([]);
    expect(await store.head("a/big")).toBeUndefined();
    await rm(hog);
    await store.put("a/big", new Uint8Array(MiB / 2).fill(4));
    expect((await store.head("a/big"))?.size).toBe(MiB / 2);
  });
});
