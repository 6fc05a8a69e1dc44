// The README's promise, checked from the outside: a clone of the repository at HEAD, the README's
// main-job command run as written with an empty pnpm store, and the demo's JSON report judged.
// Slow (a full install and build), so it runs when CKPT_FRESH_CLONE=1; tools/test-all.sh (the
// README's test command, which .ci/run calls) sets it. Running the test command itself here
// would recurse, so for that command the test checks that CI runs it.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const enabled = process.env.CKPT_FRESH_CLONE === "1";

/** The command in the README's "Two commands" table row whose label starts with `label`. */
async function readmeCommand(readmePath: string, label: string): Promise<string> {
  const readme = await readFile(readmePath, "utf8");
  const row = readme.split("\n").find((line) => line.startsWith(`| ${label}`));
  const command = row
    ?.split("|")[2]
    ?.trim()
    .match(/^`([^`]+)`$/)?.[1];
  if (command === undefined) throw new Error(`README.md has no "${label}" row with one command in backticks`);
  return command;
}

function run(
  command: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn("bash", ["-c", command], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr = (stderr + c).slice(-20_000)));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

describe.runIf(enabled)("a fresh clone runs the README's main job", () => {
  let scratch = "";
  let cleanup: () => Promise<void> = async () => {};
  let clone = "";
  beforeAll(async () => {
    ({ dir: scratch, cleanup } = await makeTempDir("ckpt-fresh-clone-"));
    clone = join(scratch, "repo");
    execFileSync("git", ["clone", "--quiet", "--no-hardlinks", repoRoot, clone]);
  });
  afterAll(() => cleanup());

  it("the main-job command installs, builds and runs the demo; its JSON report shows every step done", async () => {
    const mainJob = await readmeCommand(join(clone, "README.md"), "the main job");
    const demoDir = join(scratch, "demo");
    const result = await run(`${mainJob} --json`, clone, {
      ...process.env,
      PNPM_STORE_DIR: join(scratch, "pnpm-store"),
      CKPT_DEMO_DIR: demoDir,
    });
    const report = JSON.parse(result.stdout) as {
      schema: string;
      ok: boolean;
      complete: boolean;
      fault: string;
      steps: { id: string; status: string; summary: string }[];
      resume: { decision: { kind: string; iteration?: number } } | null;
      inventory: { where: string; bytes: number; sha256: string | null }[];
    };
    expect(report.schema).toBe("ckpt.demo-report.v1");
    expect(report.fault).toBe("kill");
    expect(report.steps.filter((s) => s.status !== "ok")).toEqual([]);
    expect(report).toMatchObject({ ok: true, complete: true });
    expect(report.resume?.decision).toMatchObject({ kind: "checkpoint", iteration: 40 });
    expect(report.inventory.length).toBeGreaterThan(3);
    for (const row of report.inventory) expect(existsSync(join(demoDir, row.where))).toBe(true);
    expect(existsSync(join(demoDir, ".ckpt-demo.json"))).toBe(true);
    expect(result.code).toBe(0);
  }, 1_800_000);

  it("CI runs the README's test command", async () => {
    const testCommand = await readmeCommand(join(clone, "README.md"), "the whole test suite");
    const ci = await readFile(join(clone, ".ci", "run"), "utf8");
    const lines = ci
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(lines).toContain(testCommand);
  });
});
