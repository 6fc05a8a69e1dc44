import { resolve } from "node:path";
import { UsageError } from "../errors.js";
import type { CkptCommand } from "./registry.js";

interface McpArgs {
  root?: string;
  "print-config": boolean;
  "budget-ms": number;
}

/** How agent clients start the server: the command, its arguments, and the snippets each client reads. Pure. */
function registrationSnippets(command: string, args: readonly string[]) {
  const server = { command, args: [...args] };
  const quote = (word: string) =>
    /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
  const commandLine = [command, ...args].map(quote).join(" ");
  return {
    /** Claude Desktop's claude_desktop_config.json, and a project's .mcp.json for Claude Code. */
    mcpServers: { ckpt: server },
    claudeCode: `claude mcp add ckpt -- ${commandLine}`,
    /** Any other client that starts a stdio server from a command line. */
    stdio: commandLine,
  };
}

export const mcpCommand: CkptCommand<McpArgs> = {
  command: "mcp",
  describe:
    "A read-only MCP server on stdio for agents: list, status, resumable, verify, evidence, storage and explain, confined to --root",
  builder: (yargs) =>
    yargs
      .option("root", {
        type: "string",
        describe: "The directory the server answers about; every path argument must resolve inside it",
      })
      .option("print-config", {
        type: "boolean",
        default: false,
        describe:
          "Print how to register the server with agent clients (Claude Desktop, Claude Code, any stdio client)",
      })
      .option("budget-ms", {
        type: "number",
        default: 1500,
        describe:
          "The time one request may take; a longer one answers with what it found and an MCP_PARTIAL problem",
      })
      .example("ckpt mcp --root /lustre/ckpt", "serve the checkpoints under /lustre/ckpt over stdio")
      .example(
        "ckpt mcp --root /lustre/ckpt --print-config",
        "the mcpServers snippet for the client's config file",
      ),
  async run(args, io) {
    const budgetMs = args["budget-ms"];
    if (!Number.isInteger(budgetMs) || budgetMs < 1) {
      throw new UsageError(`--budget-ms ${budgetMs}: expected a positive whole number of milliseconds`);
    }
    if (args["print-config"]) {
      const root = resolve(args.root ?? ".");
      // This very CLI, by absolute paths: the client's PATH need not hold `ckpt`.
      const snippets = registrationSnippets(process.execPath, [
        process.argv[1] ?? "ckpt",
        "mcp",
        "--root",
        root,
      ]);
      const human = [
        "Claude Desktop (claude_desktop_config.json) or Claude Code (.mcp.json in the project):",
        JSON.stringify({ mcpServers: snippets.mcpServers }, null, 2),
        "",
        "Claude Code, from a shell:",
        `  ${snippets.claudeCode}`,
        "",
        "Any other MCP client, as the stdio command line:",
        `  ${snippets.stdio}`,
      ].join("\n");
      return { exitCode: 0, report: { ok: true, ...snippets }, human };
    }
    if (args.root === undefined) {
      throw new UsageError("ckpt mcp: pass --root DIR, the directory the server may answer about");
    }
    const [{ StdioServerTransport }, { createCkptMcpServer }, { guardedRoot }, { preloadLibraries }] =
      await Promise.all([
        import("@modelcontextprotocol/sdk/server/stdio.js"),
        import("../mcp/server.js"),
        import("../mcp/path-guard.js"),
        import("../mcp/evidence-adapter.js"),
      ]);
    const server = createCkptMcpServer(await guardedRoot(args.root), { budgetMs });
    // The protocol owns stdout; the server runs until the client closes stdin.
    const closed = new Promise<void>((done) => process.stdin.once("end", done));
    await server.connect(new StdioServerTransport(process.stdin, io.stdout));
    preloadLibraries();
    await closed;
    await server.close();
    return { exitCode: 0, report: { ok: true }, human: "" };
  },
};
