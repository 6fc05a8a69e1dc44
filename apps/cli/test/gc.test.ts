import { spawnSync } from "node:child_process";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { lockDirectory, STAGED_RECORD, type StagedRecord } from "@ckpt/manifest";
import { createFileStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { treeDigest } from "./helpers/tree.js";

const HOUR = 3_600_000;
const SHA = "a".repeat(64);

/** Sets a path's times to `ms` ago: a leftover from an earlier run. */
async function age(path: string, ms: number): Promise<void> {
  const when = new Date(Date.now() - ms);
  await utimes(path, when, when);
}

interface Item {
  kind: string;
  path: string;
  bytes: number;
  age_s: number;
  ours: boolean;
  action: string;
  reason: string;
  files?: string[];
}

async function gc(
  args: string[],
): Promise<{ code: number; report: { items: Item[] } & Record<string, unknown> }> {
  const c = captureIo({ env: { HOME: "/nonexistent" } });
  const code = await runCli(["gc", ...args, "--json"], c.io);
  return { code, report: JSON.parse(c.out()) };
}

function stagedRecord(complete: boolean, files: string[]): StagedRecord {
  return {
    schema: "posttrain.staged-fetch.v1",
    source: {
      uri: "s3://bkt/run/checkpoint_artifacts/iter_000000300",
      destination: {
        scheme: "s3",
        endpoint: "s3.example.com",
        bucket: "bkt",
        prefix: "run/checkpoint_artifacts/iter_000000300",
      },
      manifest_sha256: SHA,
      declaration_sha256: null,
    },
    iteration: 300,
    files: files.map((path) => ({ path, size: 4, sha256: SHA })),
    complete,
  };
}

/** A pid that ran on this host and has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  return child.pid!;
}

async function holderLock(dir: string, holder: Record<string, unknown>, extra = false): Promise<void> {
  await mkdir(dir);
  await writeFile(
    join(dir, "holder.json"),
    JSON.stringify({ started_at: new Date().toISOString(), ...holder }),
  );
  if (extra) await writeFile(join(dir, "notes.txt"), "mine");
}

describe("ckpt gc on a file:// store", () => {
  it("lists an interrupted write's temporary, removes it with --apply, and keeps a look-alike and a young one", async () => {
    const root = await testdir("ckpt-cli-gc-");
    const store = createFileStore({ root });
    await store.put("run/iter_1/model.pt", new Uint8Array([1, 2, 3]));
    const stale = join(root, "run", "iter_1", ".ckpt-tmp.0123456789abcdef");
    const young = join(root, "run", "iter_1", ".ckpt-tmp.fedcba9876543210");
    const lookAlike = join(root, "run", ".ckpt-tmp.mine");
    await writeFile(stale, Buffer.alloc(5000));
    await age(stale, 2 * HOUR);
    await writeFile(young, "in flight");
    await writeFile(lookAlike, "someone else's");
    await age(lookAlike, 2 * HOUR);

    const before = await treeDigest(root);
    const listed = await gc([`file://${root}`]);
    expect(listed.code).toBe(0);
    expect(await treeDigest(root)).toBe(before);
    expect(listed.report).toMatchObject({
      ok: true,
      dry_run: true,
      older_than_s: 3600,
      would_free_bytes: 5000,
    });
    const byPath = Object.fromEntries(listed.report.items.map((i: Item) => [i.path, i]));
    expect(byPath[stale]).toMatchObject({
      kind: "temporary",
      bytes: 5000,
      ours: true,
      action: "would remove",
    });
    expect(byPath[stale]?.age_s).toBeGreaterThanOrEqual(7000);
    expect(byPath[young]).toMatchObject({
      ours: true,
      action: "kept",
      reason: expect.stringMatching(/may be work in flight/),
    });
    expect(byPath[lookAlike]).toMatchObject({
      ours: false,
      action: "kept",
      reason: expect.stringMatching(/^not ours/),
    });

    const applied = await gc([root, "--apply"]);
    expect(applied.report).toMatchObject({ ok: true, dry_run: false, freed_bytes: 5000 });
    expect((await readdir(join(root, "run", "iter_1"))).sort()).toEqual([
      ".ckpt-tmp.fedcba9876543210",
      "model.pt",
    ]);
    expect(await readdir(join(root, "run"))).toContain(".ckpt-tmp.mine");
    expect(
      Buffer.from(await (await store.get("run/iter_1/model.pt")).toArray().then((c) => Buffer.concat(c))),
    ).toEqual(Buffer.from([1, 2, 3]));
  });

  it("--older-than 0s takes the young temporary too; a malformed age is bad usage", async () => {
    const root = await testdir("ckpt-cli-gc-");
    await writeFile(join(root, ".ckpt-tmp.00000000000000aa"), "x");
    expect((await gc([root, "--apply", "--older-than", "0s"])).report.items[0]?.action).toBe("removed");
    expect(await readdir(root)).toEqual([]);
    const c = captureIo();
    expect(await runCli(["gc", root, "--older-than", "soon"], c.io)).toBe(2);
    expect(c.err()).toMatch(/--older-than soon: expected <number><s\|m\|h\|d>/);
  });
});

describe("ckpt gc on stages and locks", () => {
  it("removes an incomplete stage's own files (record last) and a complete stage's stale .part, nothing else", async () => {
    const root = await testdir("ckpt-cli-gc-");
    const unfinished = join(root, "dst", "iter_000000300");
    await mkdir(join(unfinished, "shards"), { recursive: true });
    await writeFile(join(unfinished, "model.pt"), "abcd");
    await writeFile(join(unfinished, "shards", "a.bin.part"), "ab");
    await writeFile(join(unfinished, "notes.txt"), "the user's");
    await STAGED_RECORD.write(
      join(unfinished, ".staged.json"),
      stagedRecord(false, ["model.pt", "shards/a.bin"]),
    );
    const complete = join(root, "dst2", "iter_000000300");
    await mkdir(complete, { recursive: true });
    await writeFile(join(complete, "model.pt"), "abcd");
    await writeFile(join(complete, "model.pt.part"), "ab");
    await writeFile(join(complete, "other.part"), "not named");
    await STAGED_RECORD.write(join(complete, ".staged.json"), stagedRecord(true, ["model.pt"]));
    const download = join(root, "downloaded", "x.bin.part");
    await mkdir(join(root, "downloaded"));
    await writeFile(download, "no marker");
    const foreignStage = join(root, "foreign");
    await mkdir(foreignStage);
    await writeFile(join(foreignStage, ".staged.json"), "{}");
    await writeFile(join(foreignStage, "w.bin"), "w");
    for (const path of [
      join(unfinished, "model.pt"),
      join(unfinished, "shards", "a.bin.part"),
      join(unfinished, "notes.txt"),
      join(unfinished, ".staged.json"),
      join(complete, "model.pt.part"),
      join(complete, "other.part"),
      download,
      join(foreignStage, ".staged.json"),
    ])
      await age(path, 2 * HOUR);

    const before = await treeDigest(root);
    const listed = await gc([root, "--dry-run"]);
    expect(await treeDigest(root)).toBe(before);
    const rows = listed.report.items.map((i: Item) => [i.kind, i.path, i.ours, i.action]);
    expect(rows).toEqual([
      ["stale-part", download, false, "kept"],
      ["incomplete-stage", unfinished, true, "would remove"],
      ["incomplete-stage", join(unfinished, "notes.txt"), false, "kept"],
      ["stale-part", join(complete, "model.pt.part"), true, "would remove"],
      ["stale-part", join(complete, "other.part"), false, "kept"],
      ["incomplete-stage", foreignStage, false, "kept"],
    ]);
    const stage = listed.report.items.find((i: Item) => i.path === unfinished);
    expect(stage).toMatchObject({
      files: ["model.pt", "shards/a.bin.part", ".staged.json"],
      bytes: expect.any(Number),
    });
    expect(listed.report.items.find((i: Item) => i.path === foreignStage)?.reason).toMatch(
      /^not ours: its \.staged\.json/,
    );

    const applied = await gc([root, "--apply"]);
    expect(applied.code).toBe(0);
    expect((await readdir(unfinished)).sort()).toEqual(["notes.txt", "shards"]);
    expect((await readdir(complete)).sort()).toEqual([".staged.json", "model.pt", "other.part"]);
    expect(await readdir(join(root, "downloaded"))).toEqual(["x.bin.part"]);
    expect((await readdir(foreignStage)).sort()).toEqual([".staged.json", "w.bin"]);
  });

  it("removes only the lock of a dead holder of this host: a live one, another host's and a foreign one stay", async () => {
    const root = await testdir("ckpt-cli-gc-");
    const dead = join(root, "out.lock");
    await holderLock(dead, { pid: deadPid(), host: hostname() });
    const elsewhere = join(root, "b.lock");
    await holderLock(elsewhere, { pid: deadPid(), host: "another-host.example" });
    const foreign = join(root, "c.lock");
    await holderLock(foreign, { pid: deadPid(), host: hostname() }, true);
    const held = await lockDirectory({ lockDir: join(root, "live.lock"), staleMs: 10_000, waitMs: 0 });
    if (held.status !== "held") throw new Error(`lock not taken: ${held.status}`);
    try {
      const before = await treeDigest(root);
      const listed = await gc([root]);
      expect(await treeDigest(root)).toBe(before);
      const byPath = Object.fromEntries(listed.report.items.map((i: Item) => [i.path, i]));
      expect(byPath[dead]).toMatchObject({
        kind: "lock",
        ours: true,
        action: "would remove",
        reason: expect.stringMatching(/is gone/),
      });
      expect(byPath[elsewhere]).toMatchObject({
        action: "kept",
        reason: expect.stringMatching(/another-host\.example: its liveness cannot be checked/),
      });
      expect(byPath[foreign]).toMatchObject({
        ours: false,
        action: "kept",
        reason: expect.stringMatching(/^not ours/),
      });
      expect(byPath[join(root, "live.lock")]).toMatchObject({
        action: "kept",
        reason: expect.stringMatching(/which is running/),
      });

      await gc([root, "--apply"]);
      expect((await readdir(root)).sort()).toEqual(["b.lock", "c.lock", "live.lock"]);
      expect(held.lock.lost()).toBeUndefined();
    } finally {
      await held.lock.release();
    }
  });

  it("a human listing names each item, and a missing directory is refused", async () => {
    const root = await testdir("ckpt-cli-gc-");
    await writeFile(join(root, ".ckpt-tmp.0123456789abcdef"), "x");
    await age(join(root, ".ckpt-tmp.0123456789abcdef"), 2 * HOUR);
    const c = captureIo();
    expect(await runCli(["gc", root], c.io)).toBe(0);
    expect(c.out()).toMatch(
      /temporary\s+would remove\s+1 B\s+\d+ s\s+.*\.ckpt-tmp\.0123456789abcdef\s+a file store's temporary/,
    );
    expect(c.out().trimEnd().split("\n").at(-1)).toBe(
      "dry run: nothing was changed; --apply would remove 1 (1 B), kept 0",
    );
    const both = captureIo();
    expect(await runCli(["gc", root, "--apply", "--dry-run"], both.io)).toBe(2);
    const missing = captureIo();
    expect(await runCli(["gc", join(root, "nope")], missing.io)).toBe(2);
    expect(missing.err()).toMatch(/nope: not a directory/);
  });
});
