// `ckpt mcp` driven the way an agent drives it: the SDK's Client over a real stdio child running
// the built CLI (dist/bin.js), on run attempts the demo trainer wrote through the checkpoint
// manager. Covers the handshake, every tool, the root guard and a 10,000-checkpoint tree.
import { execFileSync } from "node:child_process";
import { link, mkdir, readdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { type Evidence, type EvidenceAttempt, evidenceSchema } from "@ckpt/evidence";
import { testdir } from "@ckpt/test-utils";
import { formatIterDir } from "@ckpt/manifest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { train, type TrainResult } from "../src/demo/train.js";
import { nonSnakeKeys } from "./helpers/json-keys.js";

const BIN = join(import.meta.dirname, "..", "dist", "bin.js");
const TOOLS = ["evidence", "explain", "list", "resumable", "status", "storage", "verify"];

interface ToolResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Record<string, unknown> & { error?: { code: string; message: string } };
}

const clients: Client[] = [];

/** A client connected to `ckpt mcp --root <root>` in a child process. */
async function connect(root: string, extra: string[] = []): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, "mcp", "--root", root, ...extra],
    stderr: "pipe",
  });
  const client = new Client({ name: "ckpt-mcp-test", version: "1.0.0" });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** One tool call; every answer has the snake_case keys `--json` has, ckpt's own documents included. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  const result = (await client.callTool({ name, arguments: args })) as ToolResult;
  expect(nonSnakeKeys(result.structuredContent), `${name} ${JSON.stringify(args)}`).toEqual([]);
  return result;
}

/** Every file and directory below `dir` with its size and mtime: what "nothing writes" compares. */
async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { recursive: true })) {
    const info = await stat(join(dir, entry)).catch(() => undefined);
    out.push(`${entry} ${info?.size ?? "-"} ${info?.mtimeMs ?? "-"}`);
  }
  return out.sort();
}

const common = { saveEvery: 10, keepModelLast: 0, initSeed: 1, taskSeed: 2, dataSeed: 3 };
let base = "";
let root = "";
let run: TrainResult;
let attempt = "";

beforeAll(async () => {
  base = await testdir("ckpt-mcp-");
  root = join(base, "root");
  run = await train({
    ...common,
    outputRoot: root,
    name: "main",
    steps: 30,
    keepOptimLast: 1,
    validateAt: [15],
  });
  attempt = relative(root, run.attemptDir);
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

describe("ckpt mcp over stdio", () => {
  it("answers the handshake with its name and every tool, each with an input schema and read-only hints", async () => {
    const client = await connect(root);
    expect(client.getServerVersion()).toMatchObject({ name: "ckpt" });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    for (const tool of tools) {
      expect(tool.inputSchema.type, tool.name).toBe("object");
      expect(tool.description?.length, tool.name).toBeGreaterThan(40);
      expect(tool.annotations, tool.name).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    }
    const status = tools.find((t) => t.name === "status")!;
    expect(status.inputSchema.required).toEqual(["attempt"]);
    expect(Object.keys(status.inputSchema.properties ?? {})).toEqual(["attempt"]);
    const verify = tools.find((t) => t.name === "verify")!;
    expect(Object.keys(verify.inputSchema.properties ?? {}).sort()).toEqual([
      "deep",
      "finite",
      "kind",
      "path",
    ]);
  });

  it("every tool answers on a real run attempt, as structured JSON plus a short text, and nothing is written", async () => {
    const before = await snapshot(root);
    const client = await connect(root);
    const newest = join(attempt, "checkpoints", formatIterDir(30));

    const list = await call(client, "list");
    expect(list.isError).toBeFalsy();
    expect(list.structuredContent).toMatchObject({
      ok: true,
      partial: false,
      counts: { runs: 1, attempts: 1, checkpoints: 3, artifacts: 1 },
      runs: [
        {
          run: "demo/mlp/main",
          attempts: [{ attempt, run_ts: run.runTs, checkpoints: [10, 20, 30], artifacts: [15] }],
        },
      ],
    });
    expect(list.content[0]!.text).toBe(".: 1 runs, 1 attempts, 3 checkpoints, 1 artifacts");

    // status and evidence answer in the ckpt.evidence.v2 model: status is the attempt's entry.
    const status = await call(client, "status", { attempt });
    const glance = status.structuredContent as { attempt: EvidenceAttempt };
    expect(status.structuredContent).toMatchObject({
      ok: true,
      schema: "ckpt.evidence.v2",
      complete: true,
      attempt: {
        dir: run.attemptDir,
        run_ts: run.runTs,
        pointer: { state: "present", iteration: 30 },
        resume: { decision: "checkpoint", iteration: 30 },
      },
    });
    expect(glance.attempt.checkpoints.map((c) => [c.iteration, c.resume.resumable])).toEqual([
      [30, true],
      [20, null],
      [10, null],
    ]);
    expect(glance.attempt.artifacts.map((a) => a.iteration)).toEqual([15]);

    const evidence = await call(client, "evidence", { path: attempt });
    const { ok, ...bundle } = evidence.structuredContent as Evidence & { ok: boolean };
    expect(ok).toBe(true);
    expect(evidenceSchema.parse(bundle)).toEqual(bundle);
    expect(bundle).toMatchObject({ status: "resumable", complete: true });
    // The bundle's attempt is what status answered; its problems are warnings (an artifact not archived).
    expect(bundle.attempts).toEqual([glance.attempt]);
    expect(bundle.problems.map((p) => [p.code, p.severity])).toEqual([["NOT_ARCHIVED", "warning"]]);
    expect(status.structuredContent!.problems).toEqual(bundle.problems);
    expect(status.content[0]!.text).toBe(
      `${attempt}: resume would pick iteration 30; 3 checkpoints, 1 artifacts, 1 problems`,
    );
    expect(evidence.content[0]!.text).toBe(`${attempt}: resumable; 1 problems`);
    // A run directory answers with every attempt under it.
    const whole = await call(client, "evidence", { path: relative(root, join(run.attemptDir, "..")) });
    expect(whole.structuredContent).toMatchObject({
      run: { name: "main" },
      attempts: [{ run_ts: run.runTs }],
    });

    const resumable = await call(client, "resumable", { checkpoint: newest });
    expect(resumable.structuredContent).toMatchObject({ resumable: true, code: null });
    expect(resumable.content[0]!.text).toMatch(
      /^demo\/mlp\/main\/\d{14}\/checkpoints\/iter_000000030: resumable/,
    );
    const pinned = await call(client, "resumable", { checkpoint: newest, sha256: "0".repeat(64) });
    expect(pinned.structuredContent).toMatchObject({ resumable: false, code: "MANAGER_RESUME_PIN_MISMATCH" });

    const verify = await call(client, "verify", { path: newest, deep: true });
    expect(verify.structuredContent).toMatchObject({
      ok: true,
      kind: "checkpoint",
      iteration: 30,
      problems: [],
    });
    expect(verify.content[0]!.text).toBe(`${newest}: checkpoint sound`);

    const storage = await call(client, "storage", { path: attempt });
    const fsType = execFileSync("findmnt", ["-n", "-o", "FSTYPE", "--target", run.attemptDir], {
      encoding: "utf8",
    })
      .trim()
      .split("\n")
      .at(-1);
    expect(storage.structuredContent).toMatchObject({
      probed: false,
      expect: "any",
      filesystem: { type: fsType },
      real_dir: run.attemptDir,
    });
    expect(storage.structuredContent).not.toHaveProperty("steps");
    const shared = await call(client, "storage", { path: attempt, expect: "shared" });
    if (storage.structuredContent!.tier === "local")
      expect(shared.structuredContent).toMatchObject({ ok: false });

    const explain = await call(client, "explain", { code: "checkpoint_incomplete" });
    expect(explain.structuredContent).toMatchObject({
      ok: true,
      code: "CHECKPOINT_INCOMPLETE",
      known: true,
      section: "Trainer checkpoint manager (`@ckpt/trainer-checkpoint-manager`)",
      remedy: expect.stringContaining("ckpt verify"),
    });
    const own = await call(client, "explain", { code: "MCP_PATH_REFUSED" });
    expect(own.structuredContent).toMatchObject({ known: true, remedy: expect.stringContaining("--root") });
    const unknown = await call(client, "explain", { code: "VERIFY_NOPE" });
    expect(unknown.structuredContent).toMatchObject({ ok: false, known: false });
    expect(unknown.structuredContent!.related).toContain("VERIFY_DIGEST_MISMATCH");

    expect(await snapshot(root)).toEqual(before);
  }, 60_000);

  it("a damaged checkpoint is reported with its codes, which explain describes", async () => {
    const damagedRoot = join(base, "damaged");
    const damaged = await train({
      ...common,
      outputRoot: damagedRoot,
      name: "cut",
      steps: 20,
      keepOptimLast: 2,
    });
    const iter = join(damaged.attemptDir, "checkpoints", formatIterDir(20));
    const model = join(iter, "model.pt");
    await writeFile(model, (await readFile(model)).subarray(0, 100));
    const client = await connect(damagedRoot);
    const rel = relative(damagedRoot, iter);
    const verify = await call(client, "verify", { path: rel });
    expect(verify.structuredContent).toMatchObject({ ok: false });
    const codes = (verify.structuredContent!.problems as Array<{ code: string }>).map((p) => p.code);
    expect(codes).toContain("VERIFY_SIZE_MISMATCH");
    expect(verify.content[0]!.text).toContain("VERIFY_SIZE_MISMATCH");
    const evidence = await call(client, "evidence", { path: relative(damagedRoot, damaged.attemptDir) });
    const problems = evidence.structuredContent!.problems as Evidence["problems"];
    expect(problems.length).toBeGreaterThan(0);
    // v2 problems: the closed set's codes, the library's own code kept as the cause.
    expect(problems.map((p) => p.cause)).toContain("VERIFY_SIZE_MISMATCH");
    for (const { code } of problems) {
      expect((await call(client, "explain", { code })).structuredContent, code).toMatchObject({
        known: true,
      });
    }
  }, 60_000);

  it("refuses 28 escapes from the root across every path-taking tool with MCP_PATH_REFUSED", async () => {
    const escapeRoot = join(base, "escape-root");
    await mkdir(join(escapeRoot, "sub"), { recursive: true });
    await mkdir(join(base, "outside"), { recursive: true });
    await writeFile(join(base, "outside", "secret"), "not yours");
    await symlink("/", join(escapeRoot, "to-slash"));
    await symlink("..", join(escapeRoot, "up"));
    await symlink("../outside", join(escapeRoot, "sneaky"));
    await symlink("/etc/passwd", join(escapeRoot, "passwd"));
    await symlink("loop-b", join(escapeRoot, "loop-a"));
    await symlink("loop-a", join(escapeRoot, "loop-b"));
    await symlink(join(base, "outside"), join(escapeRoot, "sub", "deep-out"));
    const client = await connect(escapeRoot);
    const escapes = [
      "..",
      "../",
      "../..",
      "../outside",
      "sub/../../outside",
      "sub/./../../outside/secret",
      "./../outside",
      `${"../".repeat(64)}etc`,
      "/",
      "/etc",
      "/etc/passwd",
      join(base, "outside"),
      `${escapeRoot}/../outside`,
      "to-slash",
      "to-slash/etc/passwd",
      "up",
      "up/outside/secret",
      "sneaky",
      "sneaky/secret",
      "passwd",
      "sub/deep-out",
      "loop-a",
      "loop-b/x",
      "sub\u0000/../../etc",
      "%2e%2e/%2e%2e/etc",
      "..%2f..%2fetc",
      "%252e%252e/outside",
      "..\\..\\etc",
    ];
    expect(escapes.length).toBeGreaterThanOrEqual(20);
    const tools: Array<[string, string]> = [
      ["list", "path"],
      ["status", "attempt"],
      ["resumable", "checkpoint"],
      ["verify", "path"],
      ["evidence", "path"],
      ["storage", "path"],
    ];
    for (const [i, path] of escapes.entries()) {
      const [tool, arg] = tools[i % tools.length]!;
      const result = await call(client, tool, { [arg]: path });
      expect(result.isError, `${tool} ${JSON.stringify(path)}`).toBe(true);
      expect(result.structuredContent?.error?.code, `${tool} ${JSON.stringify(path)}`).toBe(
        "MCP_PATH_REFUSED",
      );
      expect(result.content[0]!.text).toMatch(/^MCP_PATH_REFUSED: path .* refused: /);
    }
    // The same escapes through every other tool too: the guard is the tools' single entrance.
    for (const [tool, arg] of tools) {
      const result = await call(client, tool, { [arg]: "to-slash/etc" });
      expect(result.structuredContent?.error?.code, tool).toBe("MCP_PATH_REFUSED");
    }
    // Inside the root: a path that names nothing is not an escape.
    const missing = await call(client, "status", { attempt: "sub/nothing" });
    expect(missing.structuredContent?.error?.code).toBe("MCP_PATH_NOT_FOUND");
    const list = await call(client, "list");
    expect(list.structuredContent).toMatchObject({ ok: true, counts: { attempts: 0 } });
  }, 60_000);

  it("prints the registration snippet for agent clients", () => {
    const out = execFileSync(process.execPath, [BIN, "mcp", "--root", root, "--print-config", "--json"], {
      encoding: "utf8",
    });
    const config = JSON.parse(out) as {
      mcp_servers: { ckpt: { command: string; args: string[] } };
      claude_code: string;
      stdio: string;
    };
    expect(config.mcp_servers.ckpt).toEqual({
      command: process.execPath,
      args: [BIN, "mcp", "--root", root],
    });
    expect(config.claude_code).toBe(`claude mcp add ckpt -- ${process.execPath} ${BIN} mcp --root ${root}`);
    expect(config.stdio).toBe(`${process.execPath} ${BIN} mcp --root ${root}`);
    const human = execFileSync(process.execPath, [BIN, "mcp", "--root", root, "--print-config"], {
      encoding: "utf8",
    });
    expect(human).toContain('"mcpServers"');
    expect(human).toContain("claude mcp add ckpt --");
  });
});

describe("ckpt mcp on a tree of 10,000 checkpoints", () => {
  const COUNT = 10_000;
  let bigRoot = "";
  let big: TrainResult;
  beforeAll(async () => {
    bigRoot = join(base, "big");
    // One real save at the newest iteration, then 9,999 older checkpoints holding the same files
    // (hard links): what the scans and the resume probe read is real, only the count is large.
    big = await train({
      ...common,
      outputRoot: bigRoot,
      name: "long",
      steps: COUNT,
      saveEvery: COUNT,
      keepOptimLast: COUNT,
    });
    const checkpoints = join(big.attemptDir, "checkpoints");
    const newest = join(checkpoints, formatIterDir(COUNT));
    const files = await readdir(newest, { recursive: true, withFileTypes: true });
    for (let iteration = 1; iteration < COUNT; iteration++) {
      const dir = join(checkpoints, formatIterDir(iteration));
      for (const entry of files) {
        const from = join(entry.parentPath, entry.name);
        const to = join(dir, relative(newest, from));
        if (entry.isDirectory()) await mkdir(to, { recursive: true });
        else {
          await mkdir(join(to, ".."), { recursive: true });
          await link(from, to);
        }
      }
    }
    // And a wide tree of empty run directories: more directories than a 1 ms budget can walk.
    for (let i = 0; i < 2000; i++) await mkdir(join(bigRoot, "wide", `run-${i}`), { recursive: true });
  }, 600_000);

  it("lists, statuses and collects the evidence of every checkpoint, completely and correctly", async () => {
    const client = await connect(bigRoot, ["--budget-ms", "120000"]);
    const list = await call(client, "list");
    expect(list.structuredContent).toMatchObject({
      ok: true,
      partial: false,
      counts: { attempts: 1, checkpoints: COUNT },
    });
    const [listed] = (
      list.structuredContent!.runs as Array<{ attempts: Array<{ checkpoints: number[] }> }>
    )[0]!.attempts;
    expect(listed!.checkpoints).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
    const attempt = relative(bigRoot, big.attemptDir);
    const status = await call(client, "status", { attempt });
    expect(status.isError).toBeFalsy();
    const report = status.structuredContent as { ok: boolean; complete: boolean; attempt: EvidenceAttempt };
    expect(report).toMatchObject({ ok: true, complete: true, attempt: { resume: { iteration: COUNT } } });
    expect(report).not.toHaveProperty("partial");
    const checkpoints = report.attempt.checkpoints;
    expect(checkpoints.map((c) => c.iteration)).toEqual(Array.from({ length: COUNT }, (_, i) => COUNT - i));
    expect(checkpoints[0]).toMatchObject({ resume: { resumable: true }, retention: { latest: true } });
    expect(checkpoints.at(-1)).toMatchObject({
      resume: { resumable: null },
      retention: { has_optimizer: true },
    });
    const evidence = await call(client, "evidence", { path: attempt });
    const { ok, ...bundle } = evidence.structuredContent as Evidence & { ok: boolean };
    expect(ok).toBe(true);
    expect(evidence.structuredContent).not.toHaveProperty("partial");
    expect(evidenceSchema.parse(bundle)).toEqual(bundle);
    expect(bundle.complete).toBe(true);
    expect(bundle.attempts).toEqual([report.attempt]);
  }, 300_000);

  it("a request over budget answers with what it found and MCP_PARTIAL, and the server keeps answering", async () => {
    const client = await connect(bigRoot, ["--budget-ms", "1"]);
    for (const [tool, args] of [
      ["list", {}],
      ["status", { attempt: relative(bigRoot, big.attemptDir) }],
      ["evidence", { path: relative(bigRoot, big.attemptDir) }],
    ] as const) {
      const result = await call(client, tool, args);
      expect(result.isError, tool).toBeFalsy();
      expect(result.structuredContent, tool).toMatchObject({ ok: false, partial: true });
      const problems = result.structuredContent!.problems as Array<{ code: string; message: string }>;
      expect(problems.map((p) => p.code)).toContain("MCP_PARTIAL");
      expect(result.content[0]!.text).toMatch(/partial/);
      // status and evidence say what the attempt's listing, started alongside, had found by then.
      if (tool !== "list") {
        expect(result.structuredContent!.found, tool).toMatchObject({
          path: relative(bigRoot, big.attemptDir),
        });
      }
    }
    expect((await call(client, "explain", { code: "MCP_PARTIAL" })).structuredContent).toMatchObject({
      known: true,
    });
  }, 120_000);
});
