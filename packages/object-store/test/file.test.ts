import { createHash } from "node:crypto";
import { execFileSync, spawn } from "node:child_process";
import { mkdir, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { createFileStore } from "../src/file/store.js";
import type { ObjectInfo, ObjectStore } from "../src/types.js";

const text = (s: string) => new TextEncoder().encode(s);
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

async function keys(store: ObjectStore, prefix = ""): Promise<string[]> {
  const out: ObjectInfo[] = [];
  for await (const info of store.list(prefix)) out.push(info);
  return out.map((i) => i.key);
}

async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

describe("file store specifics", () => {
  let root: string;
  let store: ObjectStore;

  beforeEach(async () => {
    root = join(await testdir("ckpt-file-"), "root");
    store = createFileStore({ root });
  });

  it("has identity file/local/<root> and a file:// URI", () => {
    expect(store.identity).toEqual({ scheme: "file", endpoint: "local", bucket: root, prefix: "" });
    expect(store.uri).toBe(`file://${root}`);
  });

  it("keeps payloads as plain files, metadata in hidden inode-bound sidecars, and no temporaries", async () => {
    await store.put("iter_1/model.pt", text("weights"), { sha256: sha("weights") });
    await store.createIfAbsent("iter_1/decl.json", text("{}"));
    const files = await tree(root);
    expect(files.filter((f) => !f.startsWith(".ckpt-meta/"))).toEqual([
      "iter_1/decl.json",
      "iter_1/model.pt",
    ]);
    expect(files.filter((f) => f.startsWith(".ckpt-meta/"))).toEqual([
      expect.stringMatching(/^\.ckpt-meta\/iter_1\/decl\.json\.\d+\.json$/),
      expect.stringMatching(/^\.ckpt-meta\/iter_1\/model\.pt\.\d+\.json$/),
    ]);
    expect(await keys(store)).toEqual(["iter_1/decl.json", "iter_1/model.pt"]);
  });

  it("refuses keys in the reserved namespaces", async () => {
    for (const key of [".ckpt-meta/x", "a/.ckpt-tmp.123", ".ckpt-meta"]) {
      await expect(store.put(key, text("x"))).rejects.toMatchObject({ code: "STORE_INVALID_KEY" });
    }
  });

  it("hides leftover temporaries and reports no digest for a file without a sidecar", async () => {
    await mkdir(join(root, "iter_2"), { recursive: true });
    await writeFile(join(root, "iter_2", ".ckpt-tmp.deadbeef"), "partial");
    await writeFile(join(root, "iter_2", "foreign.bin"), "foreign");
    expect(await keys(store)).toEqual(["iter_2/foreign.bin"]);
    const head = await store.head("iter_2/foreign.bin");
    expect(head).toMatchObject({ size: 7, metadata: {} });
    expect(head?.sha256).toBeUndefined();
  });

  it("drops the digest when the payload is changed in place behind the store's back", async () => {
    await store.put("m.pt", text("original"), { sha256: sha("original") });
    expect((await store.head("m.pt"))?.sha256).toBe(sha("original"));
    await writeFile(join(root, "m.pt"), "tampered");
    const head = await store.head("m.pt");
    expect(head?.size).toBe(8);
    expect(head?.sha256).toBeUndefined();
  });

  it("refuses a body whose digest differs from the declared sha256 and leaves nothing", async () => {
    await expect(store.put("x/y", text("abc"), { sha256: sha("abd") })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    await expect(store.createIfAbsent("x/z", text("abc"), { sha256: sha("abd") })).rejects.toMatchObject({
      code: "STORE_INTEGRITY",
    });
    expect(await tree(root)).toEqual([]);
  });

  it("removes the replaced payload's sidecar on overwrite and everything on delete, pruning empty dirs", async () => {
    await store.put("a/b/c", text("1"), { sha256: sha("1") });
    await store.put("a/b/c", text("22"), { sha256: sha("22") });
    expect((await tree(root)).filter((f) => f.startsWith(".ckpt-meta/"))).toHaveLength(1);
    expect((await store.head("a/b/c"))?.sha256).toBe(sha("22"));
    await store.delete("a/b/c");
    expect(await readdir(root)).toEqual([]);
  });

  it("does not follow a symlink at a key", async () => {
    await mkdir(root, { recursive: true });
    await writeFile(join(root, "..", "outside"), "secret");
    await symlink(join(root, "..", "outside"), join(root, "link"));
    await expect(store.head("link")).resolves.toBeUndefined();
    await expect(store.get("link")).rejects.toMatchObject({ code: "STORE_NOT_FOUND" });
    expect(await keys(store)).toEqual([]);
  });

  describe("never leaves its root through a symbolic link (issue 16)", () => {
    let outside: string;
    beforeEach(async () => {
      outside = join(root, "..", "outside");
      await mkdir(join(outside, "x"), { recursive: true });
      await writeFile(join(outside, "x", "planted"), "theirs");
      await mkdir(root, { recursive: true });
    });

    const refused = { code: "STORE_UNSAFE_PATH", kind: "refused" };

    it("a prefix directory that is a link: put, create, head, get, list and delete are refused", async () => {
      await symlink(outside, join(root, "run"));
      await expect(store.put("run/x/a", text("1"))).rejects.toMatchObject(refused);
      await expect(store.createIfAbsent("run/x/b", text("1"))).rejects.toMatchObject(refused);
      await expect(store.head("run/x/planted")).rejects.toMatchObject(refused);
      await expect(store.get("run/x/planted")).rejects.toMatchObject(refused);
      await expect(keys(store, "run/x/")).rejects.toMatchObject(refused);
      await expect(store.delete("run/x/planted")).rejects.toMatchObject(refused);
      expect(await tree(outside)).toEqual(["x/planted"]);
    });

    it("a .ckpt-meta that is a link: writes are refused before a byte lands outside", async () => {
      await symlink(outside, join(root, ".ckpt-meta"));
      await expect(store.put("a", text("1"))).rejects.toMatchObject(refused);
      await expect(store.createIfAbsent("b", text("1"))).rejects.toMatchObject(refused);
      expect(await tree(outside)).toEqual(["x/planted"]);
      expect(await readdir(root)).toEqual([".ckpt-meta"]);
    });

    it("a link inside .ckpt-meta: reading and deleting an object's metadata are refused", async () => {
      await store.put("run/a", text("1"));
      await rm(join(root, ".ckpt-meta", "run"), { recursive: true });
      await symlink(outside, join(root, ".ckpt-meta", "run"));
      await expect(store.head("run/a")).rejects.toMatchObject(refused);
      await expect(store.delete("run/a")).rejects.toMatchObject(refused);
      expect(await tree(outside)).toEqual(["x/planted"]);
    });
  });

  it("a prefix swapped for a link while writes run: nothing lands outside the root (issue 16)", {
    timeout: 60_000,
  }, async () => {
    const outside = join(root, "..", "outside");
    await mkdir(outside, { recursive: true });
    await writeFile(join(outside, "planted"), "theirs");
    await mkdir(join(root, "run"), { recursive: true });
    // Another process swaps root/run for a link to `outside` and back as fast as it can, so that
    // a check of the path and the write after it can see different directories.
    const swapper = spawn(
      process.execPath,
      [
        "-e",
        `const fs = require("node:fs");
         const [run, aside, outside] = process.argv.slice(1);
         process.stdout.write("ready\\n");
         for (;;) {
           try { fs.renameSync(run, aside); } catch {}
           try { fs.symlinkSync(outside, run); } catch {}
           try { fs.unlinkSync(run); } catch {}
           try { fs.renameSync(aside, run); } catch {}
         }`,
        join(root, "run"),
        join(root, "run-aside"),
        outside,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const exited = new Promise((resolve) => swapper.on("exit", resolve));
    try {
      const ready = new Promise((resolve) => swapper.stdout.once("data", resolve));
      await Promise.race([ready, exited.then(() => Promise.reject(new Error("the swapper died")))]);
      const outcomes: string[] = [];
      for (let batch = 0; batch < 20; batch++) {
        const writes = Array.from({ length: 8 }, (_, i) =>
          store.put(`run/k${i}/b${batch}`, text(`${batch}.${i}`)).then(
            () => "ok",
            (error: { code?: string }) => error.code ?? `uncoded ${String(error)}`,
          ),
        );
        outcomes.push(...(await Promise.all(writes)));
      }
      // Every write either landed (inside the root) or was refused by code.
      for (const outcome of outcomes) expect(outcome).toMatch(/^(ok|STORE_[A-Z_]+)$/);
    } finally {
      swapper.kill("SIGKILL");
      await exited;
    }
    const below = await readdir(outside, { recursive: true });
    expect(below).toEqual(["planted"]);
  });

  it("a FIFO at a key or at its sidecar never blocks: no object, or a coded refusal", {
    timeout: 5000,
  }, async () => {
    await mkdir(root, { recursive: true });
    execFileSync("mkfifo", [join(root, "fifo")]);
    await expect(store.head("fifo")).resolves.toBeUndefined();
    await expect(store.get("fifo")).rejects.toMatchObject({ code: "STORE_NOT_FOUND" });
    const info = await store.put("a", text("1"));
    const [sidecar] = await readdir(join(root, ".ckpt-meta"));
    await rm(join(root, ".ckpt-meta", sidecar!));
    execFileSync("mkfifo", [join(root, ".ckpt-meta", sidecar!)]);
    const refusal = store.head("a");
    await expect(refusal).rejects.toMatchObject({ code: "STORE_UNSAFE_PATH" });
    await expect(refusal).rejects.toThrow(sidecar!);
    expect(info.key).toBe("a");
  });

  it("refuses a key that collides with a directory of other keys", async () => {
    await store.put("a/b", text("x"));
    await expect(store.put("a", text("y"))).rejects.toMatchObject({
      code: "STORE_INVALID_KEY",
      kind: "refused",
    });
    await expect(store.createIfAbsent("a", text("y"))).rejects.toMatchObject({ code: "STORE_INVALID_KEY" });
    await expect(store.put("a/b/c", text("z"))).rejects.toMatchObject({ code: "STORE_INVALID_KEY" });
    await expect(store.head("a")).resolves.toBeUndefined();
    await store.delete("a");
    expect(await keys(store)).toEqual(["a/b"]);
  });

  it("answers an empty listing and no head for a root that does not exist yet", async () => {
    expect(await keys(store)).toEqual([]);
    await expect(store.head("x")).resolves.toBeUndefined();
  });
});
