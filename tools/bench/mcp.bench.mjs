// `ckpt mcp` on a large tree: the time of each request an agent sends, over the real stdio protocol
// (newline-delimited JSON-RPC, spoken here directly) to the built CLI in a child process, on a run
// attempt with 10,000 checkpoints. The attempt is written by the demo trainer (`ckpt demo
// --worker`, the checkpoint manager for real) with one save at the newest iteration; the 9,999
// older checkpoints hold the same files as hard links, so every scan and probe reads real records.
// The server runs with a budget far above any request, so each time is the full answer's.
// Build first: pnpm turbo run build --filter=@ckpt/cli... && pnpm bench mcp
// Then builds the same bundle in this process (@ckpt/evidence's dist), wall and CPU time.
// Knobs (environment): CKPT_BENCH_CHECKPOINTS (10000), CKPT_BENCH_REPS (5), CKPT_BENCH_DIR (os.tmpdir()).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { link, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { CLI_DIST, measure, median, printTable, run } from "./lib.mjs";

/** The built evidence model, timed in this process too (what status and evidence answer from, without the server). */
const EVIDENCE_DIST = join(import.meta.dirname, "..", "..", "packages", "evidence", "dist", "index.js");

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const COUNT = env("CKPT_BENCH_CHECKPOINTS", 10_000);
const REPS = env("CKPT_BENCH_REPS", 5);
const iterDir = (iteration) => `iter_${String(iteration).padStart(9, "0")}`;

/** An attempt of COUNT checkpoints under `root`: one real save at COUNT, hard-linked copies below it. */
async function buildTree(root) {
  const spec = { outputRoot: root, name: "long", steps: COUNT, saveEvery: COUNT, keepOptimLast: COUNT };
  const seeds = { keepModelLast: 0, initSeed: 1, taskSeed: 2, dataSeed: 3 };
  const out = await run(process.execPath, [
    CLI_DIST,
    "demo",
    "--worker",
    JSON.stringify({ ...spec, ...seeds }),
  ]);
  // The worker reports JSON lines; the last, `done`, carries the attempt it trained.
  const done = out
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line))
    .find((line) => line.type === "done");
  const attempt = done.result.attemptDir;
  const checkpoints = join(attempt, "checkpoints");
  const newest = join(checkpoints, iterDir(COUNT));
  const files = await readdir(newest, { recursive: true, withFileTypes: true });
  for (let iteration = 1; iteration < COUNT; iteration++) {
    const dir = join(checkpoints, iterDir(iteration));
    await mkdir(dir);
    for (const entry of files) {
      const from = join(entry.parentPath, entry.name);
      const to = join(dir, relative(newest, from));
      if (entry.isDirectory()) await mkdir(to, { recursive: true });
      else await link(from, to);
    }
  }
  return { attempt: relative(root, attempt), newest: relative(root, newest) };
}

/** A `ckpt mcp` child and a request function that resolves to [seconds, result]. */
function startServer(root) {
  const child = spawn(process.execPath, [CLI_DIST, "mcp", "--root", root, "--budget-ms", "600000"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiting = new Map();
  createInterface({ input: child.stdout }).on("line", (line) => {
    const message = JSON.parse(line);
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  });
  let nextId = 1;
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const started = performance.now();
      waiting.set(id, (message) => {
        if (message.error) reject(new Error(`${method}: ${JSON.stringify(message.error)}`));
        else resolve([(performance.now() - started) / 1000, message.result]);
      });
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  const stop = () =>
    new Promise((resolve) => {
      child.once("exit", resolve);
      child.stdin.end();
    });
  return {
    request,
    stop,
    notify: (method) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method })}\n`),
  };
}

async function main() {
  if (!existsSync(CLI_DIST)) {
    console.error(`missing ${CLI_DIST}; run: pnpm turbo run build --filter=@ckpt/cli...`);
    process.exit(2);
  }
  const dir = await mkdtemp(join(process.env.CKPT_BENCH_DIR ?? tmpdir(), "ckpt-bench-mcp-"));
  try {
    console.log(`building a run attempt of ${COUNT} checkpoints...`);
    const { attempt, newest } = await buildTree(dir);
    const calls = [
      ["list", {}],
      ["status", { attempt }],
      ["evidence", { path: attempt }],
      ["resumable", { checkpoint: newest }],
      ["verify", { path: newest }],
      ["storage", { path: attempt }],
      ["explain", { code: "CHECKPOINT_INCOMPLETE" }],
    ];
    const times = new Map([
      ["initialize (spawn + handshake)", []],
      ["tools/list", []],
    ]);
    for (const [name] of calls) times.set(name, []);
    const laidOut = new Map();
    for (let rep = 0; rep < REPS; rep++) {
      const started = performance.now();
      const server = startServer(dir);
      await server.request("initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "ckpt-bench", version: "1" },
      });
      times.get("initialize (spawn + handshake)").push((performance.now() - started) / 1000);
      server.notify("notifications/initialized");
      const [listSeconds] = await server.request("tools/list", {});
      times.get("tools/list").push(listSeconds);
      for (const [name, args] of calls) {
        const [seconds, result] = await server.request("tools/call", { name, arguments: args });
        if (
          result.isError ||
          result.structuredContent?.partial ||
          result.structuredContent?.complete === false
        ) {
          throw new Error(`${name}: ${result.content[0].text}`);
        }
        if (name === "list" && result.structuredContent.counts.checkpoints !== COUNT) {
          throw new Error(
            `list found ${result.structuredContent.counts.checkpoints} checkpoints, not ${COUNT}`,
          );
        }
        const attempt =
          name === "evidence" ? result.structuredContent.attempts?.[0] : result.structuredContent.attempt;
        if ((name === "status" || name === "evidence") && attempt.checkpoints.length !== COUNT) {
          throw new Error(`${name} holds ${attempt.checkpoints.length} checkpoints, not ${COUNT}`);
        }
        // How many checkpoints the answer gives a format and components for (all of them, since the unprobed are listed).
        if (name === "status" || name === "evidence")
          laidOut.set(
            name,
            attempt.checkpoints.filter((c) => c.format !== null && c.components.length > 0).length,
          );
        times.get(name).push(seconds);
      }
      await server.stop();
    }
    console.log(`\n${COUNT} checkpoints, ${REPS} reps (a fresh server each), seconds per request:`);
    printTable(
      ["request", "median s", "max s"],
      [...times].map(([name, list]) => [name, median(list).toFixed(3), Math.max(...list).toFixed(3)]),
    );
    for (const [name, count] of laidOut)
      console.log(`${name}: ${count} of ${COUNT} checkpoints with their format and components`);
    // The same bundle built in this process (warm after the first), with its own CPU time.
    const { buildEvidence } = await import(pathToFileURL(EVIDENCE_DIST).href);
    const inProcess = [];
    for (let rep = 0; rep < REPS; rep++) {
      const m = await measure(() => buildEvidence(join(dir, attempt), { timeoutMs: 600_000 }));
      if (!m.value.complete || m.value.attempts[0].checkpoints.length !== COUNT)
        throw new Error(`in process: ${JSON.stringify(m.value.problems)}`);
      inProcess.push(m);
    }
    console.log(`\nbuildEvidence of the attempt in this process, ${REPS} reps:`);
    printTable(
      ["", "median s", "max s"],
      [
        [
          "wall",
          median(inProcess.map((m) => m.seconds)).toFixed(3),
          Math.max(...inProcess.map((m) => m.seconds)).toFixed(3),
        ],
        [
          "CPU (user + sys)",
          median(inProcess.map((m) => m.ownCpu)).toFixed(3),
          Math.max(...inProcess.map((m) => m.ownCpu)).toFixed(3),
        ],
      ],
    );
    const medians = Object.fromEntries([...times].map(([name, list]) => [name, median(list)]));
    medians["buildEvidence in process"] = median(inProcess.map((m) => m.seconds));
    console.log(`BENCH_JSON ${JSON.stringify({ bench: "mcp", checkpoints: COUNT, reps: REPS, medians })}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
