// Generates docs/cli.md from the yargs definitions of the built CLI (apps/cli/dist):
//   node tools/docs/gen-cli-reference.mjs           write docs/cli.md
//   node tools/docs/gen-cli-reference.mjs --check   exit 1 when docs/cli.md is stale
// Build the CLI first (pnpm turbo run build --filter=@ckpt/cli). Every registered command is
// picked up: its usage, description, exit codes, positionals and options (from its builder) and examples.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(fileURLToPath(import.meta.url), "..", "..", "..");
export const CLI_REFERENCE = join(ROOT, "docs", "cli.md");
const PREFACE = join(ROOT, "tools", "docs", "cli-preface.md");
export const REMEDY = "node tools/docs/gen-cli-reference.mjs";

/**
 * Runs a command's builder against a recorder standing in for yargs: positionals, options and
 * examples are recorded; every other call (check, conflicts, middleware, ...) is accepted.
 */
export function recordBuilder(builder) {
  const recorded = { positionals: [], options: [], examples: [] };
  const proxy = new Proxy(
    {},
    {
      get(_, method) {
        return (...args) => {
          if (method === "positional") recorded.positionals.push({ name: args[0], ...args[1] });
          else if (method === "option") recorded.options.push({ name: args[0], ...args[1] });
          else if (method === "options") {
            for (const [name, spec] of Object.entries(args[0])) recorded.options.push({ name, ...spec });
          } else if (method === "example") {
            const pairs = Array.isArray(args[0]) ? args[0] : [[args[0], args[1]]];
            for (const [command, description] of pairs) recorded.examples.push({ command, description });
          }
          return proxy;
        };
      },
    },
  );
  builder(proxy);
  return recorded;
}

const cell = (text) =>
  String(text ?? "")
    .replaceAll("|", "\\|")
    .replaceAll("\n", " ");
const code = (text) => `\`${cell(text).replaceAll("`", "'")}\``;

function typeOf(spec) {
  if (spec.choices) return spec.choices.map((c) => `\`${c}\``).join(", ");
  return [spec.type ?? "string", spec.array ? "(repeatable)" : ""].filter(Boolean).join(" ");
}

function argumentRows(recorded) {
  const rows = [];
  for (const p of recorded.positionals) {
    rows.push([
      code(`<${p.name}>`),
      typeOf(p),
      p.demandOption ? "required" : "",
      cell(p.describe ?? p.description),
    ]);
  }
  for (const o of recorded.options) {
    const name = `--${o.name}${o.alias ? `, ${o.alias.length === 1 ? "-" : "--"}${o.alias}` : ""}`;
    const need = o.demandOption
      ? "required"
      : o.default === undefined
        ? ""
        : `default ${code(JSON.stringify(o.default))}`;
    rows.push([code(name), typeOf(o), need, cell(o.describe ?? o.description)]);
  }
  return rows;
}

function table(header, rows) {
  return [
    `| ${header.join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}

const anchor = (words) => `ckpt-${words.join("-")}`;

async function helpText(cli, args) {
  const stdout = new PassThrough();
  let text = "";
  stdout.on("data", (c) => (text += c));
  const io = { stdout, stderr: new PassThrough(), interactive: false, color: false, env: {} };
  const exit = await cli.runCli(args, io);
  if (exit !== 0) throw new Error(`ckpt ${args.join(" ")} exited ${exit}`);
  return text.trimEnd();
}

/** Every command, depth first, with the words that name it: [{ words, entry, group }]. */
function walk(cli, entries, prefix = []) {
  return entries.flatMap((entry) => {
    const words = [...prefix, entry.command.split(" ")[0]];
    const node = { words, entry, group: cli.isGroup(entry) };
    return node.group ? [node, ...walk(cli, entry.subcommands, words)] : [node];
  });
}

/** The whole of docs/cli.md for the CLI module `cli` (the built @ckpt/cli). */
export async function renderCliReference(cli) {
  const nodes = walk(cli, cli.commands);
  const out = [
    "# CLI reference",
    "",
    `<!-- Generated from the yargs definitions of the built CLI by ${REMEDY}; do not edit by hand. -->`,
    "",
    readFileSync(PREFACE, "utf8").trim(),
    "",
    "## Commands",
    "",
    ...nodes.map(
      (n) =>
        `${"  ".repeat(n.words.length - 1)}- [\`ckpt ${n.words.join(" ")}\`](#${anchor(n.words)}): ${n.entry.describe}`,
    ),
    "",
    "`ckpt --help`:",
    "",
    "```text",
    await helpText(cli, ["--help"]),
    "```",
  ];
  for (const { words, entry, group } of nodes) {
    const usage = [...words.slice(0, -1), entry.command].join(" ");
    out.push("", `## ckpt ${words.join(" ")}`, "", entry.describe, "");
    if (group) {
      out.push(
        `Usage: \`ckpt ${usage}\`. Subcommands: ${entry.subcommands.map((s) => `[\`${s.command.split(" ")[0]}\`](#${anchor([...words, s.command.split(" ")[0]])})`).join(", ")}.`,
      );
      continue;
    }
    const recorded = recordBuilder(entry.builder);
    out.push(`Usage: \`ckpt ${usage} [options]\` (plus \`--json\`, \`--quiet\`, \`-h\`)`);
    for (const alias of entry.aliases ?? []) {
      out.push("", `Also runs as \`ckpt ${[...words.slice(0, -1), alias].join(" ")}\`, its earlier name.`);
    }
    out.push("", cli.exitCodesEpilogue(entry.exitCodes));
    const rows = argumentRows(recorded);
    if (rows.length > 0) out.push("", table(["argument", "type", "required / default", "description"], rows));
    if (recorded.examples.length > 0) {
      out.push(
        "",
        "Examples:",
        "",
        table(
          ["command", "what it does"],
          recorded.examples.map((e) => [code(e.command), cell(e.description)]),
        ),
      );
    }
  }
  return `${out.join("\n")}\n`;
}

/** Imports the built CLI (apps/cli/dist). */
export async function loadBuiltCli() {
  return import(pathToFileURL(join(ROOT, "apps", "cli", "dist", "index.js")).href);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = await renderCliReference(await loadBuiltCli());
  if (process.argv.includes("--check")) {
    const current = readFileSync(CLI_REFERENCE, "utf8");
    if (current !== text) {
      console.error(
        `docs/cli.md is stale: run \`${REMEDY}\` (after building the CLI) and commit the result.`,
      );
      process.exitCode = 1;
    }
  } else {
    writeFileSync(CLI_REFERENCE, text);
    console.error(`wrote ${CLI_REFERENCE}`);
  }
}
