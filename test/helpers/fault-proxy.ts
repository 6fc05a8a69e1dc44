// A loopback TCP proxy that injects network faults between a client and a server on 127.0.0.1.
// Per accepted connection it takes one action from a (seeded) schedule:
//   pass      forward both ways untouched
//   reset     RST the client connection: at once, after the request reached the server, or
//             after the server's response started (the request was processed, the answer lost)
//   stall     forward the request, then stop forwarding the response for `ms` (longer than the
//             client's timeout), then reset; bounded by `maxStallMs`
//   truncate  forward only the first `bytes` bytes of the response, then close (FIN) both sides
// Faults are bounded in number (`maxFaults`, then every connection passes) and in time.
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { mulberry32, randomInt } from "@ckpt/test-utils";

export type FaultAction =
  | { readonly kind: "pass" }
  | { readonly kind: "reset"; readonly at: "connect" | "request" | "response" }
  | { readonly kind: "stall"; readonly ms: number }
  | { readonly kind: "truncate"; readonly bytes: number };

type FaultKind = FaultAction["kind"];

export interface FaultProxyOptions {
  /** The server behind the proxy; only 127.0.0.1 is allowed. */
  readonly upstreamPort: number;
  readonly upstreamHost?: "127.0.0.1";
  /** The action for the n-th accepted connection (0-based). */
  readonly schedule: (connection: number) => FaultAction;
  /** At most this many connections get a fault; later ones pass. Default 1000. */
  readonly maxFaults?: number;
  /** Upper bound of any stall. Default 10 s. */
  readonly maxStallMs?: number;
}

interface FaultRecord {
  readonly connection: number;
  readonly action: FaultAction;
  /** Bytes the client sent / the server answered through the proxy on this connection. */
  requestBytes: number;
  responseBytes: number;
}

export interface FaultProxy {
  readonly port: number;
  /** `http://127.0.0.1:<port>`, for a credentials file's endpoint_url. */
  readonly endpoint: string;
  readonly records: readonly FaultRecord[];
  /** Connections that got each action. */
  counts(): Record<FaultKind, number>;
  /** Stop accepting, destroy every open connection and wait for the listener to close. */
  close(): Promise<void>;
}

/** Weights of each action in a seeded schedule (need not sum to 1). */
export interface FaultWeights {
  readonly pass: number;
  readonly reset: number;
  readonly stall: number;
  readonly truncate: number;
}

/**
 * A schedule drawn from mulberry32(seed): the same seed yields the same action for every
 * connection index, whatever order connections arrive in.
 */
export function seededSchedule(
  seed: number,
  weights: FaultWeights,
  params: { stallMs: number; maxTruncateBytes?: number },
): (connection: number) => FaultAction {
  const total = weights.pass + weights.reset + weights.stall + weights.truncate;
  if (!(total > 0)) throw new Error("fault weights must have a positive sum");
  return (connection) => {
    // One generator per connection index keeps the schedule independent of arrival order.
    const random = mulberry32((seed ^ Math.imul(connection + 1, 0x9e3779b1)) >>> 0);
    const pick = random() * total;
    if (pick < weights.pass) return { kind: "pass" };
    if (pick < weights.pass + weights.reset) {
      const at = (["connect", "request", "response"] as const)[randomInt(random, 0, 2)]!;
      return { kind: "reset", at };
    }
    if (pick < weights.pass + weights.reset + weights.stall) return { kind: "stall", ms: params.stallMs };
    return { kind: "truncate", bytes: randomInt(random, 0, params.maxTruncateBytes ?? 4096) };
  };
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const host = options.upstreamHost ?? "127.0.0.1";
  if (host !== "127.0.0.1") throw new Error(`fault proxy: upstream must be 127.0.0.1, not ${host}`);
  const maxFaults = options.maxFaults ?? 1000;
  const maxStallMs = options.maxStallMs ?? 10_000;
  const records: FaultRecord[] = [];
  const open = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let faults = 0;

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };
  const track = (socket: Socket) => {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    socket.on("error", () => {}); // resets are the point here; never crash the test process
  };

  const server: Server = createServer((client) => {
    track(client);
    const index = records.length;
    let action = options.schedule(index);
    if (action.kind !== "pass") {
      if (faults >= maxFaults) action = { kind: "pass" };
      else faults++;
    }
    const record: FaultRecord = { connection: index, action, requestBytes: 0, responseBytes: 0 };
    records.push(record);

    if (action.kind === "reset" && action.at === "connect") {
      client.resetAndDestroy();
      return;
    }
    const upstream = createConnection({ host, port: options.upstreamPort });
    track(upstream);
    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    let stalled = false;
    let cut = false;
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => {
      // A stalled connection stays silent until its timer resets it, whatever the server does.
      if (!stalled && !client.destroyed) client.end();
    });

    client.on("data", (chunk: Buffer) => {
      record.requestBytes += chunk.length;
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once("drain", () => client.resume());
      }
    });
    client.on("end", () => upstream.end());

    upstream.on("data", (chunk: Buffer) => {
      if (cut || stalled) return;
      switch (action.kind) {
        case "reset":
          // "request": the server has the request and answers; the client never sees it.
          // "response": the first bytes of the answer arrive, then the connection is reset.
          if (action.at === "response") {
            const half = chunk.subarray(0, Math.max(1, chunk.length >> 1));
            record.responseBytes += half.length;
            client.write(half, () => {
              cut = true;
              client.resetAndDestroy();
              upstream.destroy();
            });
            cut = true;
          } else {
            cut = true;
            client.resetAndDestroy();
            upstream.destroy();
          }
          return;
        case "stall":
          stalled = true;
          later(Math.min(action.ms, maxStallMs), () => {
            if (!client.destroyed) client.resetAndDestroy();
            upstream.destroy();
          });
          return;
        case "truncate": {
          const room = action.bytes - record.responseBytes;
          const part = chunk.subarray(0, Math.max(0, room));
          record.responseBytes += part.length;
          if (record.responseBytes >= action.bytes) {
            cut = true;
            client.end(part, () => closeBoth());
            upstream.destroy();
          } else client.write(part);
          return;
        }
        case "pass":
          record.responseBytes += chunk.length;
          if (!client.write(chunk)) {
            upstream.pause();
            client.once("drain", () => upstream.resume());
          }
          return;
      }
    });
    upstream.on("error", () => {
      if (!stalled) closeBoth();
    });
  });
  server.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address !== "object") throw new Error("fault proxy: no address");
  const port = address.port;
  return {
    port,
    endpoint: `http://127.0.0.1:${port}`,
    records,
    counts() {
      const counts: Record<FaultKind, number> = { pass: 0, reset: 0, stall: 0, truncate: 0 };
      for (const r of records) counts[r.action.kind]++;
      return counts;
    },
    close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of open) socket.destroy();
      });
    },
  };
}
