// The code examples of docs/*.md and how they are run. The convention (tools/docs/README.md):
//
//   ```sh example                 run with bash -e -o pipefail; must exit 0
//   ```sh example exit=1          ... must exit 1 (the last command fails on purpose)
//   ```sh example s3              needs the S3 test server: $CKPT_BUCKET and $CKPT_CREDENTIALS are set
//   ```ts example                 TypeScript (or js): compiled, run with node; may import @ckpt/*
//   ```python example             run with /usr/bin/python3 (PyTorch available)
//   ```sh no-run: <reason>        shown, never run; the reason is required
//
// Every block in sh/bash/shell/ts/typescript/js/javascript/python is one or the other. The
// runnable blocks of one page run in order, in one fresh scratch directory (their cwd and
// $HOME), with `ckpt` (the built CLI) on PATH and $CKPT_REPO pointing at the repository.
import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdirSync, readFileSync, rm, writeFile } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import ts from "typescript";

export const ROOT = join(fileURLToPath(import.meta.url), "..", "..", "..");
const fsp = {
  mkdir: promisify(mkdir),
  mkdtemp: promisify(mkdtemp),
  rm: promisify(rm),
  writeFile: promisify(writeFile),
  chmod: promisify(chmod),
};

const LANGUAGES = {
  sh: "shell",
  bash: "shell",
  shell: "shell",
  ts: "typescript",
  typescript: "typescript",
  js: "typescript",
  javascript: "typescript",
  python: "python",
  py: "python",
};

/** Time one block may take. Examples are meant to be quick. */
export const BLOCK_TIMEOUT_MS = 90_000;

/**
 * The code blocks of a page: { page, line, runner, run, s3, exit, reason, code } for every fence
 * in a code language (data blocks such as json or text are not examples). `problem` is set
 * when a block breaks the convention. Pure.
 */
export function parseExamples(markdown, page) {
  const blocks = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})\s*([A-Za-z]+)?\s*(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang = "", rest] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length && !lines[j].trimStart().startsWith(fence); j++)
      body.push(lines[j].slice(indent.length));
    const runner = LANGUAGES[lang.toLowerCase()];
    const start = i + 1;
    i = j;
    if (runner === undefined) continue;
    const block = {
      page,
      line: start,
      lang,
      runner,
      code: `${body.join("\n")}\n`,
      run: false,
      s3: false,
      exit: 0,
    };
    const noRun = /^no-run:\s*(\S.*)$/.exec(rest.trim());
    const words = rest.trim().split(/\s+/).filter(Boolean);
    if (noRun) block.reason = noRun[1];
    else if (words[0] === "example") {
      block.run = true;
      for (const word of words.slice(1)) {
        if (word === "s3") block.s3 = true;
        else if (/^exit=\d+$/.test(word)) block.exit = Number(word.slice(5));
        else block.problem = `unknown attribute "${word}" (known: s3, exit=N)`;
      }
    } else {
      block.problem = `mark it \`${lang} example\` (run by the docs test) or \`${lang} no-run: <reason>\``;
    }
    blocks.push(block);
  }
  return blocks;
}

/** The pages whose examples are run: docs/*.md. */
export function docPages(root = ROOT) {
  return readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => ({ page: `docs/${name}`, markdown: readFileSync(join(root, "docs", name), "utf8") }));
}

function run(file, args, options) {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { ...options, timeout: BLOCK_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({
          code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
          stdout,
          stderr,
          error,
        });
      },
    );
  });
}

/**
 * A place to run one page's examples: a scratch directory, a `ckpt` shim on PATH, and a
 * directory inside the test package for compiled TypeScript (so `@ckpt/*` imports resolve).
 */
export async function prepareSandbox(extraEnv = {}) {
  const scratch = await fsp.mkdtemp(join(tmpdir(), "ckpt-doc-example-"));
  const bin = join(scratch, ".bin");
  await fsp.mkdir(bin);
  const shim = join(bin, "ckpt");
  await fsp.writeFile(
    shim,
    `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, "apps", "cli", "dist", "bin.js")}" "$@"\n`,
  );
  await fsp.chmod(shim, 0o755);
  // The examples' own temporaries (mkdtemp, Python's tempfile, torch's caches) land in the scratch
  // directory and go with it, even when an example fails before its own cleanup.
  const tmp = join(scratch, ".tmp");
  await fsp.mkdir(tmp);
  const compiled = await fsp.mkdtemp(join(ROOT, "test", "docs", ".run-"));
  const env = {
    PATH: `${bin}:${process.env.PATH}`,
    HOME: scratch,
    TMPDIR: tmp,
    CKPT_REPO: ROOT,
    NO_COLOR: "1",
    ...(process.env.CI ? { CI: process.env.CI } : {}),
    // The PyTorch 2 interpreter the tests use (default: the repository's .venv), for transformers examples.
    CKPT_PYTHON: process.env.CKPT_PYTHON ?? join(ROOT, ".venv", "bin", "python"),
    ...extraEnv,
  };
  let count = 0;
  return {
    scratch,
    env,
    /** Runs one block; resolves to { code, stdout, stderr }. */
    async run(block) {
      if (block.runner === "shell") {
        return run("bash", ["-e", "-o", "pipefail", "-c", block.code], { cwd: scratch, env });
      }
      if (block.runner === "python") {
        return run("/usr/bin/python3", ["-c", block.code], { cwd: scratch, env });
      }
      const js = ts.transpileModule(block.code, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        fileName: "example.ts",
      }).outputText;
      const file = join(compiled, `example-${++count}.mjs`);
      await fsp.writeFile(file, js);
      return run(process.execPath, [file], { cwd: scratch, env });
    },
    async dispose() {
      await fsp.rm(scratch, { recursive: true, force: true });
      await fsp.rm(compiled, { recursive: true, force: true });
    },
  };
}
