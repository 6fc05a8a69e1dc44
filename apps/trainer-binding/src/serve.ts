import { chmod, lstat, unlink } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
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
 * Listens on a unix socket only this user may use: the path must not exist (the socket file is the
 * server's own and the returned close removes it), it is created under an owner-only umask (bind
 * happens inside listen), and its mode is set again in case the platform ignores umask.
 */
export async function listenOwnerOnly(server: Server, path: string): Promise<() => Promise<void>> {
  if (await pathExists(path)) {
    throw new TrainerBindingError(
      "SOCKET_EXISTS",
      `--socket ${path}: the path exists. Another ckpt-trainer may be listening there; if not, remove it and retry`,
      { kind: "refused" },
    );
  }
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(umask);
  }
  try {
    await chmod(path, 0o600);
  } catch (error) {
    server.close();
    await unlink(path).catch(() => {});
    throw error;
  }
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
  await ended;
}
