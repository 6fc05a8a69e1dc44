// turbo replays a task from its cache when the task's hash is unchanged, so every file a suite
// reads must be an input. This copies the repository's turbo configs over a small workspace in a
// scratch directory and asks turbo (dry run: nothing executes, nothing is fetched) for the hashes.
import { execFile } from "node:child_process";
import { cp, mkdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, "..", "..");
const TURBO = join(repoRoot, "node_modules", ".bin", "turbo");

/** Every turbo.json the scratch workspace takes from the repository, and the packages they configure. */
const CONFIGS = ["turbo.json", "test/turbo.json", "packages/manifest/turbo.json"];
const FILES: Record<string, string> = {
  "package.json": JSON.stringify({ name: "scratch", private: true, packageManager: "pnpm@10.34.9" }),
  "pnpm-workspace.yaml": "packages:\n  - packages/*\n  - test\n",
  "docs/formats.md": "# formats\n",
  "test/package.json": JSON.stringify({ name: "@ckpt/integration-tests", scripts: { test: "vitest run" } }),
  "test/archive/crash-fetch.test.ts": "// a suite\n",
  "packages/manifest/package.json": JSON.stringify({
    name: "@ckpt/manifest",
    scripts: { test: "vitest run" },
  }),
  "packages/manifest/src/index.ts": "export {};\n",
  "packages/manifest/test/records.test.ts": "// a suite\n",
  "packages/errors/package.json": JSON.stringify({ name: "@ckpt/errors", scripts: { test: "vitest run" } }),
  "packages/errors/src/index.ts": "export {};\n",
};

let root: string;

async function write(rel: string, text: string): Promise<void> {
  await mkdir(dirname(join(root, rel)), { recursive: true });
  await writeFile(join(root, rel), text);
}

/** taskId -> hash of every `test` task, as `turbo run test --dry=json` reports them. */
async function testHashes(): Promise<Record<string, string>> {
  const { stdout } = await run(TURBO, ["run", "test", "--dry=json"], {
    cwd: root,
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
  });
  const tasks = (JSON.parse(stdout) as { tasks: Array<{ taskId: string; hash: string }> }).tasks;
  return Object.fromEntries(tasks.map((task) => [task.taskId, task.hash]));
}

describe("turbo task inputs", () => {
  beforeAll(async () => {
    root = await testdir("ckpt-turbo-");
    for (const rel of CONFIGS) await cp(join(repoRoot, rel), join(root, rel));
    for (const [rel, text] of Object.entries(FILES)) await write(rel, text);
  });

  it("an edit of an integration suite, of docs/ or of a package's test changes the hash of the suites that read them", async () => {
    const before = await testHashes();
    expect(Object.keys(before).sort()).toEqual([
      "@ckpt/errors#test",
      "@ckpt/integration-tests#test",
      "@ckpt/manifest#test",
    ]);

    await write("test/archive/crash-fetch.test.ts", "// a suite, edited\n");
    const afterSuite = await testHashes();
    expect(afterSuite["@ckpt/integration-tests#test"]).not.toBe(before["@ckpt/integration-tests#test"]);
    expect(afterSuite["@ckpt/manifest#test"]).toBe(before["@ckpt/manifest#test"]);

    await write("docs/formats.md", "# formats, edited\n");
    const afterDocs = await testHashes();
    expect(afterDocs["@ckpt/integration-tests#test"]).not.toBe(afterSuite["@ckpt/integration-tests#test"]);
    expect(afterDocs["@ckpt/manifest#test"]).not.toBe(afterSuite["@ckpt/manifest#test"]);
    // A suite that reads no docs keeps its cache entry.
    expect(afterDocs["@ckpt/errors#test"]).toBe(before["@ckpt/errors#test"]);

    // The claims check (test/docs/claims.test.ts) reads every package's test titles.
    await write("packages/manifest/test/records.test.ts", "// a suite, renamed\n");
    const afterTitles = await testHashes();
    expect(afterTitles["@ckpt/integration-tests#test"]).not.toBe(afterDocs["@ckpt/integration-tests#test"]);
  }, 120_000);
});
