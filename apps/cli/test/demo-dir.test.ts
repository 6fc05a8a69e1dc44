import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { DEMO_MARKER_FILE, prepareDemoDir } from "../src/demo/directory.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

describe("the demo directory marker", () => {
  it("ckpt demo refuses an existing directory without its marker and leaves it untouched", async () => {
    const dir = join(await testdir(), "mine");
    await mkdir(dir);
    await writeFile(join(dir, "notes.txt"), "keep me");
    const c = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--json"], c.io)).toBe(2);
    const out = JSON.parse(c.out()) as { ok: boolean; error: { code: string; message: string } };
    expect(out.error.code).toBe("DEMO_DIR_NOT_OURS");
    expect(out.error.message).toContain(dir);
    expect(await readdir(dir)).toEqual(["notes.txt"]);
  });

  it("--clean refuses a directory without the marker", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "data.bin"), "x");
    const c = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--clean"], c.io)).toBe(2);
    expect(c.err()).toContain(DEMO_MARKER_FILE);
    expect(await readdir(dir)).toEqual(["data.bin"]);
  });

  it("--clean removes a demo directory, and keeps files the demo did not make", async () => {
    const root = await testdir();
    const dir = join(root, "demo");
    expect(await prepareDemoDir(dir)).toBe("created");
    const marker = JSON.parse(await readFile(join(dir, DEMO_MARKER_FILE), "utf8")) as { schema: string };
    expect(marker.schema).toBe("ckpt.demo-marker.v1");
    await mkdir(join(dir, "runs", "x"), { recursive: true });
    await writeFile(join(dir, "runs", "x", "f"), "demo output");
    await writeFile(join(dir, "user.txt"), "not the demo's");

    const first = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--clean", "--json"], first.io)).toBe(0);
    expect(JSON.parse(first.out())).toMatchObject({ ok: true, removed: false, left: ["user.txt"] });
    expect((await readdir(dir)).sort()).toEqual([DEMO_MARKER_FILE, "user.txt"]);

    await rm(join(dir, "user.txt"));
    const second = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--clean"], second.io)).toBe(0);
    expect(await readdir(root)).toEqual([]);
  });

  it("--clean --dry-run decides the same, removes nothing, and says what would go and why", async () => {
    const root = await testdir();
    const dir = join(root, "demo");
    await prepareDemoDir(dir);
    await mkdir(join(dir, "runs", "x"), { recursive: true });
    await writeFile(join(dir, "user.txt"), "not the demo's");
    const c = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--clean", "--dry-run", "--json"], c.io)).toBe(0);
    expect(JSON.parse(c.out())).toMatchObject({
      ok: true,
      dry_run: true,
      removed: false,
      would_remove: ["runs"],
      left: ["user.txt"],
    });
    expect((await readdir(dir)).sort()).toEqual([DEMO_MARKER_FILE, "runs", "user.txt"]);
    const human = captureIo();
    expect(await runCli(["demo", "--dir", dir, "--clean", "--dry-run"], human.io)).toBe(0);
    expect(human.out()).toContain(
      `dry run: would remove runs from ${dir} (the demo made them: ${DEMO_MARKER_FILE})`,
    );
    expect(human.out()).toContain("would keep user.txt");
  });

  it("a directory the demo made is reused: its earlier results are cleared", async () => {
    const dir = join(await testdir(), "demo");
    await prepareDemoDir(dir);
    await mkdir(join(dir, "archive"), { recursive: true });
    await writeFile(join(dir, "archive", "old"), "previous run");
    expect(await prepareDemoDir(dir)).toBe("reused");
    expect(await readdir(dir)).toEqual([DEMO_MARKER_FILE]);
  });
});
