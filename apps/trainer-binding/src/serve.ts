import { chmod, lstat, unlink } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { TrainerBindingError } from "./errors.js";
import { type RequestHandler, serveConnection, toWireError } from "./protocol/connection.js";
import { encodeResponse } from "./protocol/messages.js";

/** Makes the session behind one connection. */
export type HandlerFactory = () => RequestHandler;

/**
 * Keeps the sidecar alive through the signals a scheduler sends to every task process: SIGTERM
 * and SIGUSR1 only set the manager's stop flag (its own listeners), and SIGINT (a terminal's ^C,
 * which the trainer also receives) is left to the trainer, whose exit ends this session.
 * Returns the function that removes the listeners.
 */
export function keepAliveThroughSignals(): () => void {
  const ignore = () => {};
  const signals: NodeJS.Signals[] = ["SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP"];
  for (const signal of signals) process.on(signal, ignore);
  return () => {
    for (const signal of signals) process.off(signal, ignore);
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
 * Serves sessions on a unix socket, one connection at a time: a second client meanwhile gets one
 * PROTOCOL_BUSY error line and is closed. A session that goes away without finalizing frees the
 * socket for the next client (a restarted trainer); the first finalized session ends the server.
 * The socket file is this server's own: it refuses a path that exists and removes it on exit.
 */
export async function serveSocket(
  path: string,
  factory: HandlerFactory,
  log: (line: string) => void,
): Promise<void> {
  if (await pathExists(path)) {
    throw new TrainerBindingError(
      "SOCKET_EXISTS",
      `serve --socket ${path}: the path exists. Another sidecar may be listening there; if not, remove it and retry`,
      { kind: "refused" },
    );
  }
  let busy = false;
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    const finish = (error?: unknown) => {
      server.close();
      unlink(path)
        .catch(() => {})
        .then(() => (error === undefined ? resolve() : reject(error)));
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
    // Only this user may drive the sidecar: the socket is created owner-only (bind happens inside
    // listen, under this umask), and the mode is set again in case the platform ignores umask.
    const umask = process.umask(0o177);
    try {
      server.listen(path, () => {
        chmod(path, 0o600).catch((error: unknown) => finish(error));
      });
    } finally {
      process.umask(umask);
    }
  });
}
