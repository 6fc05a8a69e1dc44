import type { Server } from "node:http";
import { UsageError } from "../errors.js";
import type { CkptCommand } from "./registry.js";

interface UiArgs {
  root: string;
  port: number;
  host: string;
  "timeout-ms": number;
  "max-entries": number;
}

/** The names of the loopback address the server binds; any other is refused. */
const LOOPBACK_NAMES = ["127.0.0.1", "localhost"];

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((done, fail) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      fail(
        error.code === "EADDRINUSE"
          ? new UsageError(
              `--port ${port}: another program listens there; pass another port, or 0 for a free one`,
            )
          : error,
      ),
    );
    server.listen(port, host, () => done((server.address() as { port: number }).port));
  });
}

/** Resolves never; rejects with the signal's reason once it aborts. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, stop) => {
    if (signal.aborted) stop(signal.reason);
    signal.addEventListener("abort", () => stop(signal.reason), { once: true });
  });
}

export const uiCommand: CkptCommand<UiArgs> = {
  command: "ui",
  describe:
    "A read-only web page on 127.0.0.1 for the runs under --root: saves, resumability, archive and verify state, what retention releases next, problems and remedies",
  abortCode: "UI_STOPPED",
  builder: (yargs) =>
    yargs
      .option("root", {
        type: "string",
        demandOption: true,
        describe: "The directory the page answers about; every path it asks for must resolve inside it",
      })
      .option("port", {
        type: "number",
        default: 0,
        describe: "The port on 127.0.0.1 (0: a free one); the URL is the one line on stdout",
      })
      .option("host", {
        type: "string",
        default: "127.0.0.1",
        describe: "Only 127.0.0.1 (or localhost) is accepted: the page is never served to the network",
      })
      .option("timeout-ms", {
        type: "number",
        default: 10_000,
        describe: "Bound on one request's evidence collection; past it the page shows TIMED_OUT",
      })
      .option("max-entries", {
        type: "number",
        default: 20_000,
        describe: "Entries read from one directory before the rest is left out (TREE_TOO_LARGE)",
      })
      .example("ckpt ui --root ckpt-demo/runs/demo/mlp/main", "the demo's main run in the browser")
      .example(
        "ckpt ui --root /lustre/ckpt --port 8470",
        "a fixed port, for an SSH tunnel (ssh -L 8470:127.0.0.1:8470)",
      ),
  async run(args, io, context) {
    if (!LOOPBACK_NAMES.includes(args.host))
      throw new UsageError(
        `--host ${args.host}: the web view serves 127.0.0.1 only; reach it from elsewhere through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT)`,
      );
    if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65_535)
      throw new UsageError(`--port ${args.port}: expected a port number from 0 to 65535 (0: a free one)`);
    for (const name of ["timeout-ms", "max-entries"] as const)
      if (!Number.isInteger(args[name]) || args[name] < 1)
        throw new UsageError(`--${name} ${args[name]}: expected a positive whole number`);
    const [{ guardedRoot }, { loadUiAssets }, { createUiServer, UI_HOST }] = await Promise.all([
      import("../mcp/path-guard.js"),
      import("../ui/assets.js"),
      import("../ui/server.js"),
    ]);
    const guarded = await guardedRoot(args.root);
    const server = createUiServer(guarded, await loadUiAssets(), {
      timeoutMs: args["timeout-ms"],
      maxEntries: args["max-entries"],
    });
    const port = await listen(server, args.port, UI_HOST);
    context.leaves("the web view stopped; it wrote nothing");
    io.stdout.write(`http://${UI_HOST}:${port}/\n`);
    io.stderr.write(`serving ${guarded.root} read-only; Ctrl-C stops\n`);
    try {
      return await untilAborted(context.signal);
    } finally {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  },
};
