import { execFileSync } from "node:child_process";
import { mkdir, open, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TORCH_PYTHON, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { fingerprintDirectory, fingerprintOf } from "../src/fingerprint.js";
import { hashDirectory } from "@ckpt/manifest";

/** An HF-like directory, written in the given file order. */
async function writeTree(dir: string, order: readonly string[]): Promise<void> {
  const contents: Record<string, string> = {
    "config.json": '{"hidden_size": 8}\n',
    "model-00001-of-00002.safetensors": "A".repeat(3000),
    "model-00002-of-00002.safetensors": "B".repeat(2000),
    "model.safetensors.index.json": '{"weight_map": {}}\n',
    "tokenizer/tokenizer.json": '{"v": 1}\n',
    "\u{1F600}.txt": "emoji",
    "\uFFFD.txt": "replacement",
  };
  await mkdir(join(dir, "tokenizer"), { recursive: true });
  for (const name of order) await writeFile(join(dir, name), contents[name]!);
}

const NAMES = [
  "config.json",
  "model-00001-of-00002.safetensors",
  "model-00002-of-00002.safetensors",
  "model.safetensors.index.json",
  "tokenizer/tokenizer.json",
  "\u{1F600}.txt",
  "\uFFFD.txt",
];

async function flipByte(path: string, offset: number): Promise<void> {
  const handle = await open(path, "r+");
  const one = new Uint8Array(1);
  await handle.read(one, 0, 1, offset);
  one[0] = one[0]! ^ 1;
  await handle.write(one, 0, 1, offset);
  await handle.close();
}

describe("fingerprintDirectory", () => {
  it("is the same across runs and whatever order the files were written in", async () => {
    const a = await testdir();
    const b = await testdir();
    await writeTree(a, NAMES);
    await writeTree(b, [...NAMES].reverse());
    const first = await fingerprintDirectory(a);
    expect((await fingerprintDirectory(a)).fingerprint).toBe(first.fingerprint);
    expect((await fingerprintDirectory(b)).fingerprint).toBe(first.fingerprint);
    // Code-point order: U+FFFD sorts before U+1F600 (whose UTF-16 surrogates would sort first).
    expect(first.files.map((f) => f.path).slice(-2)).toEqual(["\uFFFD.txt", "\u{1F600}.txt"]);
    expect(first).toMatchObject({
      schema: "ckpt.fingerprint.v1",
      mode: "full",
      size: 5063,
      hashed_bytes: 5063,
    });
  });

  it("is exactly the documented definition: sha256 of the canonical JSON {files, mode, schema} (checked with Python's json)", {
    tags: ["torch"],
  }, async () => {
    const dir = await testdir();
    await writeTree(dir, NAMES);
    for (const fast of [false, true]) {
      const result = await fingerprintDirectory(dir, { fast });
      const script =
        "import hashlib, json, sys\n" +
        "doc = json.loads(sys.stdin.read())\n" +
        "text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, separators=(',', ': ')) + '\\n'\n" +
        "print(hashlib.sha256(text.encode('utf-8')).hexdigest())\n";
      const doc = { schema: result.schema, mode: result.mode, files: result.files };
      const python = execFileSync(TORCH_PYTHON, ["-c", script], {
        input: JSON.stringify(doc),
        encoding: "utf8",
      }).trim();
      expect(python).toBe(result.fingerprint);
    }
  });

  it("changes when one byte of any file changes; fast mode ignores payload bytes but not their size or metadata", async () => {
    const dir = await testdir();
    await writeTree(dir, NAMES);
    const full = await fingerprintDirectory(dir);
    const fast = await fingerprintDirectory(dir, { fast: true });
    expect(fast.fingerprint).not.toBe(full.fingerprint);
    expect(fast.hashed_bytes).toBe(full.hashed_bytes - 5000);
    expect(fast.files.find((f) => f.path === "model-00001-of-00002.safetensors")).toEqual({
      path: "model-00001-of-00002.safetensors",
      size: 3000,
    });

    await flipByte(join(dir, "model-00001-of-00002.safetensors"), 1500);
    expect((await fingerprintDirectory(dir)).fingerprint).not.toBe(full.fingerprint);
    expect((await fingerprintDirectory(dir, { fast: true })).fingerprint).toBe(fast.fingerprint);

    await flipByte(join(dir, "config.json"), 3);
    expect((await fingerprintDirectory(dir, { fast: true })).fingerprint).not.toBe(fast.fingerprint);

    const resized = await testdir();
    await writeTree(resized, NAMES);
    await writeFile(join(resized, "model-00002-of-00002.safetensors"), "B".repeat(2001));
    expect((await fingerprintDirectory(resized, { fast: true })).fingerprint).not.toBe(fast.fingerprint);
  });

  it("leaves the top-level receipt and fetch record out of the identity, and says so", async () => {
    const dir = await testdir();
    await writeTree(dir, NAMES);
    const before = await fingerprintDirectory(dir);
    await writeFile(join(dir, ".uploaded"), "{}");
    await writeFile(join(dir, ".staged.json"), "{}");
    const after = await fingerprintDirectory(dir);
    expect(after.fingerprint).toBe(before.fingerprint);
    expect(after.excluded).toEqual([".staged.json", ".uploaded"]);
    // Only at the top: a nested file of that name is content.
    await writeFile(join(dir, "tokenizer", ".uploaded"), "{}");
    expect((await fingerprintDirectory(dir)).fingerprint).not.toBe(before.fingerprint);
  });

  it("fingerprints two copies of the same weights alike whatever ckpt's bookkeeping says", async () => {
    const published = await testdir();
    const materialized = await testdir();
    await writeTree(published, NAMES);
    await writeTree(materialized, NAMES);
    // One copy was published (receipt, an interrupted receipt write and its temporary) and fetched.
    await writeFile(join(published, ".uploaded"), '{"destination": "s3://a/run-1"}');
    await writeFile(join(published, ".uploaded.tmp"), '{"destination": "s3://a/run-');
    await writeFile(join(published, "..uploaded.tmp-4242-0123456789ab"), "{");
    await writeFile(join(published, ".staged.json"), '{"source": "s3://a/run-1"}');
    await writeFile(join(published, ".posttrain-validation.json"), '{"state": "archived"}');
    // The other was made by materialize-hf and merge, which record their source paths.
    await writeFile(join(materialized, ".materialized"), '{"source": "/lustre/runs/7/iter_0000100"}');
    await writeFile(join(materialized, ".overlay_source.json"), '{"source": "/lustre/runs/7"}');
    await writeFile(join(materialized, ".merge-complete.json"), '{"request": "/home/me/experts"}');
    await writeFile(join(materialized, "tokenizer", ".tokenizer.json.tmp-4242-0123456789ab"), "{");

    for (const fast of [false, true]) {
      const a = await fingerprintDirectory(published, { fast });
      const b = await fingerprintDirectory(materialized, { fast });
      expect(a.fingerprint).toBe(b.fingerprint);
      expect(a.files).toEqual(b.files);
    }
    expect((await fingerprintDirectory(published)).excluded).toEqual([
      "..uploaded.tmp-4242-0123456789ab",
      ".posttrain-validation.json",
      ".staged.json",
      ".uploaded",
      ".uploaded.tmp",
    ]);
    expect((await fingerprintDirectory(materialized)).excluded).toEqual([
      ".materialized",
      ".merge-complete.json",
      ".overlay_source.json",
      "tokenizer/.tokenizer.json.tmp-4242-0123456789ab",
    ]);

    await flipByte(join(materialized, "model-00002-of-00002.safetensors"), 7);
    expect((await fingerprintDirectory(materialized)).fingerprint).not.toBe(
      (await fingerprintDirectory(published)).fingerprint,
    );
  });

  it("follows a symlink to a file inside, refuses one leading outside or to a directory", async () => {
    const dir = await testdir();
    await writeTree(dir, NAMES);
    const plain = await fingerprintDirectory(dir);
    await symlink("config.json", join(dir, "config-link.json"));
    const linked = await fingerprintDirectory(dir);
    expect(linked.files.find((f) => f.path === "config-link.json")).toEqual({
      ...plain.files.find((f) => f.path === "config.json"),
      path: "config-link.json",
    });
    // The plain directory hash still refuses every link.
    await expect(hashDirectory(dir)).rejects.toMatchObject({ code: "HASH_SYMLINK_REFUSED" });

    const outside = await testdir();
    await writeFile(join(outside, "secret"), "s");
    const escaping = await testdir();
    await writeTree(escaping, NAMES);
    await symlink(join(outside, "secret"), join(escaping, "tokenizer", "vocab.txt"));
    await expect(fingerprintDirectory(escaping)).rejects.toMatchObject({
      code: "PATH_ESCAPES_ROOT",
      kind: "refused",
    });

    const looping = await testdir();
    await writeTree(looping, NAMES);
    await symlink(".", join(looping, "tokenizer", "again"));
    await expect(fingerprintDirectory(looping)).rejects.toMatchObject({ code: "HASH_SYMLINK_REFUSED" });
  });

  it("refuses anything but a directory as input", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "file"), "x");
    for (const path of [join(dir, "file"), join(dir, "missing")]) {
      await expect(fingerprintDirectory(path)).rejects.toMatchObject({
        code: "FINGERPRINT_NOT_A_DIRECTORY",
        kind: "input",
      });
    }
  });
});

describe("fingerprintOf", () => {
  it("does not depend on the order of its input", () => {
    const files = [
      { path: "b", size: 2, sha256: "b".repeat(64) },
      { path: "a", size: 1 },
    ];
    expect(fingerprintOf(files, "fast")).toBe(fingerprintOf([...files].reverse(), "fast"));
    expect(fingerprintOf(files, "fast")).not.toBe(fingerprintOf(files, "full"));
  });
});
