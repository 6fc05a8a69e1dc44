import { chmod, link, lstat, unlink } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { TrainerBindingError } from "./errors.js";
import { type RequestHandler, serveConnection, toWireError } from "./protocol/connection.js";
import { encodeResponse } from "./protocol/messages.js";

/** Makes the session behind one connection. */
export type HandlerFactory = () => RequestHandler;

/** The signals a sidecar handles itself (a scheduler sends them to every task process). */
const SIDECAR_SIGNALS = ["SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP"] as const;
export type SidecarSignal = (typeof SIDECAR_SIGNALS)[number];

/** 128 + the signal's number: what a sidecar with nothing to protect exits with. */
const SIGNAL_EXIT_CODES: Record<SidecarSignal, number> = {
  SIGHUP: 129,
  SIGINT: 130,
  SIGUSR1: 138,
  SIGTERM: 143,
};

/** What a signal does: the one line logged and, when it ends the process, the exit code. */
export interface SignalAction {
  readonly line: string;
  readonly exitCode?: number;
}

/**
 * What a signal does to a sidecar, and the one line it logs: with a trainer session open
 * (`serving`), SIGTERM and SIGUSR1 only ask the trainer to stop (the manager's own listeners set
 * its stop flag) and SIGINT/SIGHUP are left to the trainer, so a save in progress is committed
 * whole or not at all; with none open there is nothing to protect, and SIGINT/SIGTERM end it. Pure.
 */
export function sidecarSignalAction(signal: SidecarSignal, serving: boolean): SignalAction {
  const what = "the sidecar";
  if (!serving && (signal === "SIGINT" || signal === "SIGTERM")) {
    return {
      line: `interrupted (${signal}): no trainer session was open, so nothing was left half done; ${what} ended`,
      exitCode: SIGNAL_EXIT_CODES[signal],
    };
  }
  if (signal === "SIGTERM" || signal === "SIGUSR1") {
    return {
      line: `${signal} received: the trainer is asked to stop at its next should_stop; ${what} keeps serving it until it finalizes or goes away, so a save in progress is committed whole or not at all`,
    };
  }
  return {
    line: `${signal} received: left to the trainer (it receives it too); ${what} keeps serving until the trainer finalizes or goes away, and a save still open then is not committed`,
  };
}

/**
 * The trainer binding's stop path: every SIGTERM, SIGUSR1, SIGINT and SIGHUP logs the one line
 * `decide` gives and, when it gives an exit code, `end` runs (removing what the process owns,
 * such as its socket) and ends the process with it. Returns the function that removes the listeners.
 */
export function handleSidecarSignals(
  decide: (signal: SidecarSignal) => SignalAction,
  log: (line: string) => void,
  end: (exitCode: number) => void,
): () => void {
  const handlers = SIDECAR_SIGNALS.map((signal) => {
    const handler = () => {
      const action = decide(signal);
      log(action.line);
      if (action.exitCode !== undefined) end(action.exitCode);
    };
    process.on(signal, handler);
    return [signal, handler] as const;
  });
  return () => {
    for (const [signal, handler] of handlers) process.off(signal, handler);
  };
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}

/**
 * Listens on a unix socket only this user may use: the path must not exist (the socket file is the
 * server's own and the returned close removes it), it is created under an owner-only umask (bind
 * happens inside listen), and its mode is set again in case the platform ignores umask.
 *
 * The socket is bound as `<path>~` and linked to `path` only once it listens: a client that waits
 * for `path` to appear (the Python client does) could otherwise connect between bind and listen
 * and be refused (ECONNREFUSED, seen on a loaded machine).
 */
export async function listenOwnerOnly(server: Server, path: string): Promise<() => Promise<void>> {
  const socketExists = () =>
    new TrainerBindingError(
      "SOCKET_EXISTS",
      `--socket ${path}: the path exists. Another ckpt-trainer may be listening there; if not, remove it and retry`,
      { kind: "refused" },
    );
  if (await pathExists(path)) throw socketExists();
  const bound = `${path}~`;
  // Ours alone: a leftover is a process killed between its bind and its link.
  await unlink(bound).catch(() => {});
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(bound, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  try {
    await chmod(bound, 0o600);
    // link, not rename: it refuses (EEXIST) a path created meanwhile instead of replacing it.
    await link(bound, path);
  } catch (error) {
    server.close();
    await unlink(bound).catch(() => {});
    if ((error as NodeJS.ErrnoException).code === "EEXIST") throw socketExists();
    throw error;
  }
  await unlink(bound);
  return () =>
    new Promise<void>((resolve) => {
      server.close();
      unlink(path)
        .catch(() => {})
        .then(() => resolve());
    });
}

/**
 * Serves sessions on a unix socket, one connection at a time: a second client meanwhile gets one
 * PROTOCOL_BUSY error line and is closed. A session that goes away without finalizing frees the
 * socket for the next client (a restarted trainer); the first finalized session ends the server.
 */
export async function serveSocket(
  path: string,
  factory: HandlerFactory,
  log: (line: string) => void,
  onListening: (close: () => Promise<void>) => void = () => {},
): Promise<void> {
  let busy = false;
  const server = createServer();
  let close: () => Promise<void> = async () => {};
  const ended = new Promise<void>((resolve, reject) => {
    const finish = (error?: unknown) => {
      close().then(() => (error === undefined ? resolve() : reject(error)));
    };
    server.on("error", (error) => finish(error));
    server.on("connection", (socket: Socket) => {
      if (busy) {
        const error = new TrainerBindingError(
          "PROTOCOL_BUSY",
          `the sidecar at ${path} already serves a trainer; one connection at a time`,
          { kind: "refused" },
        );
        socket.end(encodeResponse({ id: null, ok: false, error: toWireError(error) }));
        return;
      }
      busy = true;
      socket.on("error", () => {}); // a reset is an end of input for serveConnection
      serveConnection(socket, socket, factory()).then(
        (end) => {
          socket.end();
          busy = false;
          if (end === "finalized") finish();
          else log("the trainer disconnected without finalize; waiting for the next connection");
        },
        (error: unknown) => finish(error),
      );
    });
  });
  close = await listenOwnerOnly(server, path);
  onListening(close);
  await ended;
}
