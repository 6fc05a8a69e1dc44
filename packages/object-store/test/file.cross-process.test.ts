// Cross-process: eight Node processes race `createIfAbsent` of one key through the built package.
import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createHash } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFileStore } from "../src/file/store.js";

const CHILDREN = 8;
const ROUNDS = 20;
const packageDir = join(import.meta.dirname, "..");
// The package's own build, written to a private directory: rebuilding the shared dist/ (tsup cleans
// it first) would pull it from under other packages' tests running at the same time. Inside
// node_modules/ the bundle still resolves the package's dependencies.
const buildDir = join(packageDir, "node_modules", ".cache", `ckpt-cross-process-${process.pid}`);

const bodyOf = (child: number, round: number) => `child ${child} won round ${round}`;
const sha = (text: string) => createHash("sha256").update(text).digest("hex");

/** Each child answers every round number on stdin with one JSON line: its createIfAbsent outcome. */
const CHILD_SCRIPT = `
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";
const { createFileStore } = await import(process.env.CKPT_BUILT);
const store = createFileStore({ root: process.env.CKPT_ROOT });
const child = Number(process.env.CKPT_CHILD);
process.stdout.write("ready\\n");
for await (const line of createInterface({ input: process.stdin })) {
  const round = Number(line);
  const text = \`child \${child} won round \${round}\`;
  const sha256 = createHash("sha256").update(text).digest("hex");
  const result = await store.createIfAbsent(\`round-\${round}/decl.json\`, new TextEncoder().encode(text), { sha256 });
  process.stdout.write(JSON.stringify({ child, round, status: result.status, sha256: result.info.sha256 }) + "\\n");
}
`;

interface Outcome {
  readonly child: number;
  readonly round: number;
  readonly status: "created" | "exists";
  readonly sha256: string;
}

/** A child process and a reader of its stdout, one line at a time. */
function startChild(child: number, root: string) {
  const proc: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ["--input-type=module", "-e", CHILD_SCRIPT],
    {
      env: {
        ...process.env,
        CKPT_BUILT: pathToFileURL(join(buildDir, "index.js")).href,
        CKPT_ROOT: root,
        CKPT_CHILD: String(child),
      },
    },
  );
  let stderr = "";
  proc.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const nextLine = async (): Promise<string> => {
    const next = await lines.next();
    if (next.done) throw new Error(`child ${child} exited early: ${stderr}`);
    return next.value;
  };
  return { proc, nextLine };
}

describe("file store: conditional create across processes", () => {
  beforeAll(async () => {
    await promisify(execFile)("pnpm", ["--filter", "@ckpt/object-store", "build", "--out-dir", buildDir], {
      cwd: packageDir,
    });
  });
  afterAll(async () => {
    await rm(buildDir, { recursive: true, force: true });
  });

  it(`${CHILDREN} processes racing one key: exactly one created per round, the winner's body kept`, async () => {
    const dir = await testdir("ckpt-file-race-");
    const root = join(dir, "archive");
    const children = Array.from({ length: CHILDREN }, (_, child) => startChild(child, root));
    try {
      await Promise.all(children.map(async (c) => expect(await c.nextLine()).toBe("ready")));
      const store = createFileStore({ root });
      for (let round = 0; round < ROUNDS; round++) {
        for (const c of children) c.proc.stdin.write(`${round}\n`);
        const outcomes = await Promise.all(
          children.map(async (c) => JSON.parse(await c.nextLine()) as Outcome),
        );
        const winners = outcomes.filter((o) => o.status === "created");
        expect(winners).toHaveLength(1);
        const winner = winners[0]!.child;
        const expected = bodyOf(winner, round);
        // Every loser reports the winner's object, and the stored body is the winner's.
        expect(outcomes.map((o) => o.sha256)).toEqual(Array(CHILDREN).fill(sha(expected)));
        const stored = Buffer.concat(await (await store.get(`round-${round}/decl.json`)).toArray());
        expect(stored.toString()).toBe(expected);
      }
    } finally {
      for (const c of children) c.proc.stdin.end();
      await Promise.all(
        children.map((c) =>
          c.proc.exitCode === null ? new Promise((r) => c.proc.once("exit", r)) : undefined,
        ),
      );
    }
  });
});
