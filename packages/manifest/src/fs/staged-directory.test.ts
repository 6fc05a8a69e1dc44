import { execFileSync } from "node:child_process";
import { lstat, mkdir, readdir, readFile, rename, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { ManifestError } from "../errors.js";
import { parseStrictJson } from "../json/strict.js";
import { fsyncDirectory } from "./atomic.js";
import {
  decideSwapRecovery,
  type Ownership,
  pathInfo,
  pathKind,
  readOwnership,
  recoverSwap,
  removeOwnedDirectory,
  type StagedPaths,
  type SwapIo,
  swapIntoPlace,
} from "./staged-directory.js";

async function scratch(): Promise<{ parent: string; paths: StagedPaths }> {
  const parent = await testdir("ckpt-staged-directory-");
  return {
    parent,
    paths: {
      final: join(parent, "out"),
      staging: join(parent, "out.tmp"),
      previous: join(parent, "out.previous"),
    },
  };
}

async function tree(dir: string, files: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
}

/** Records every rename and fsync; `crashAfter` calls in, it throws as a kill would stop the run. */
function spyIo(crashAfter = Number.POSITIVE_INFINITY): { io: SwapIo; calls: string[] } {
  const calls: string[] = [];
  const step = () => {
    if (calls.length >= crashAfter) throw new Error("killed");
  };
  return {
    calls,
    io: {
      async rename(from, to) {
        step();
        await rename(from, to);
        calls.push(`rename ${from} ${to}`);
      },
      async fsyncDirectory(dir) {
        step();
        await fsyncDirectory(dir);
        calls.push(`fsync ${dir}`);
      },
    },
  };
}

/** A record that names the tool `test` (the ownership rule's "names this tool"). */
function parseOurs(bytes: Uint8Array, name: string): { tool: "test" } {
  const json = parseStrictJson(new TextDecoder().decode(bytes), { name });
  if (typeof json !== "object" || json === null || (json as { tool?: unknown }).tool !== "test") {
    throw new ManifestError("RECORD_INVALID", `${name} does not name this tool`, {
      kind: "input",
      file: name,
    });
  }
  return { tool: "test" };
}

const ownedByRecord = (dir: string): Promise<Ownership> => readOwnership(dir, ".ours", parseOurs);
const refuse = (dir: string, reason: string) => new Error(`FOREIGN ${dir}: ${reason}`);

describe("swapIntoPlace", () => {
  it("replaces the final directory with the staged one, fsyncing the parent after each rename", async () => {
    const { parent, paths } = await scratch();
    await tree(paths.final, { a: "old" });
    await tree(paths.staging, { a: "new" });
    const { io, calls } = spyIo();
    const removed: string[] = [];
    const replaced = await swapIntoPlace(paths, async (p) => void removed.push(p), io);
    expect(replaced).toBe(true);
    expect(calls).toEqual([
      `fsync ${paths.staging}`,
      `rename ${paths.final} ${paths.previous}`,
      `fsync ${parent}`,
      `rename ${paths.staging} ${paths.final}`,
      `fsync ${parent}`,
    ]);
    expect(removed).toEqual([paths.previous]);
    expect(await readFile(join(paths.final, "a"), "utf8")).toBe("new");
  });

  it("with no final directory, renames the staged one in once", async () => {
    const { parent, paths } = await scratch();
    await tree(paths.staging, { a: "new" });
    const { io, calls } = spyIo();
    expect(await swapIntoPlace(paths, async () => {}, io)).toBe(false);
    expect(calls).toEqual([
      `fsync ${paths.staging}`,
      `rename ${paths.staging} ${paths.final}`,
      `fsync ${parent}`,
    ]);
  });

  it.each([1, 2, 3, 4])("a crash after %i steps is recovered to one whole directory", async (steps) => {
    const { paths } = await scratch();
    await tree(paths.final, { a: "old" });
    await tree(paths.staging, { a: "new" });
    const { io } = spyIo(steps);
    await expect(swapIntoPlace(paths, async () => {}, io)).rejects.toThrow("killed");
    const kinds = {
      final: await pathKind(paths.final),
      previous: await pathKind(paths.previous),
      stagingComplete: (await pathKind(paths.staging)) === "dir",
    };
    await recoverSwap(paths, decideSwapRecovery(kinds));
    const text = await readFile(join(paths.final, "a"), "utf8");
    // Before the first rename the old directory stands; after it, the complete staged one is finished in.
    expect(text).toBe(steps < 2 ? "old" : "new");
  });

  it("an interrupted swap whose staged build is not complete is undone", async () => {
    const { paths } = await scratch();
    await tree(paths.previous, { a: "old" });
    const step = decideSwapRecovery({ final: "absent", previous: "dir", stagingComplete: false });
    expect(step).toBe("undo");
    await recoverSwap(paths, step);
    expect(await readFile(join(paths.final, "a"), "utf8")).toBe("old");
    expect(decideSwapRecovery({ final: "dir", previous: "dir", stagingComplete: true })).toBe("none");
  });
});

describe("ownership and removal", () => {
  it("removes a directory whose record names this tool, the record last", async () => {
    const { parent } = await scratch();
    const dir = join(parent, "mine");
    await tree(dir, { ".ours": JSON.stringify({ tool: "test" }), data: "x" });
    await removeOwnedDirectory(dir, { ownership: ownedByRecord, refuse, recordsLast: [".ours"] });
    expect(await readdir(parent)).toEqual([]);
    await removeOwnedDirectory(dir, { ownership: ownedByRecord, refuse });
  });

  it.each([
    ["no record", undefined],
    ["a garbage record", "not json{"],
    ["an empty JSON record", "{}"],
    ["another tool's record", JSON.stringify({ tool: "other" })],
  ])("refuses to remove a directory with %s and leaves it untouched", async (_, record) => {
    const { parent } = await scratch();
    const dir = join(parent, "theirs");
    await tree(dir, { notes: "mine", ...(record === undefined ? {} : { ".ours": record }) });
    await expect(removeOwnedDirectory(dir, { ownership: ownedByRecord, refuse })).rejects.toThrow(/FOREIGN/);
    expect(await readFile(join(dir, "notes"), "utf8")).toBe("mine");
  });

  it("refuses a symbolic link under the directory's name, even to a directory that is ours", async () => {
    const { parent } = await scratch();
    const target = join(parent, "ours-elsewhere");
    await tree(target, { notes: "kept", ".ours": JSON.stringify({ tool: "test" }) });
    expect(await ownedByRecord(target)).toMatchObject({ owned: true });
    const link = join(parent, "out.previous");
    await symlink(target, link);
    await expect(removeOwnedDirectory(link, { ownership: ownedByRecord, refuse })).rejects.toThrow(/FOREIGN/);
    expect((await readdir(target)).sort()).toEqual([".ours", "notes"]);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
  });

  it("a FIFO in the record's place makes the directory foreign (it is never opened for a blocking read)", async () => {
    const { parent } = await scratch();
    const dir = join(parent, "theirs");
    await tree(dir, { notes: "mine" });
    execFileSync("mkfifo", [join(dir, ".ours")]);
    expect(await ownedByRecord(dir)).toMatchObject({ owned: false });
    await expect(removeOwnedDirectory(dir, { ownership: ownedByRecord, refuse })).rejects.toThrow(/FOREIGN/);
    expect(await readFile(join(dir, "notes"), "utf8")).toBe("mine");
  });

  it("pathKind tells files, directories, others and absence apart without following links", async () => {
    const { parent } = await scratch();
    await tree(join(parent, "d"), { f: "x" });
    await symlink(join(parent, "d"), join(parent, "l"));
    expect(await pathKind(join(parent, "d"))).toBe("dir");
    expect(await pathKind(join(parent, "d", "f"))).toBe("file");
    expect(await pathKind(join(parent, "l"))).toBe("other");
    expect(await pathInfo(join(parent, "d", "f"))).toEqual({ kind: "file", size: 1 });
    expect(await pathKind(join(parent, "none"))).toBe("absent");
  });
});
