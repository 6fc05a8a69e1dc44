// The fault proxy itself: every fault mode is observed by a real client, the schedule is
// reproducible from its seed, and faults stay within their bounds.
import { createHash, randomBytes } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type ObjectStore, openStore } from "@ckpt/object-store";
import { createTestBucket, s3TestEnv, testCredentials } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type FaultAction,
  type FaultProxy,
  seededSchedule,
  startFaultProxy,
} from "../helpers/fault-proxy.js";

const BODY = randomBytes(256 * 1024);
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let server: Server;
let serverPort: number;
let requestsSeen = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    requestsSeen++;
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-length": BODY.length, "content-type": "application/octet-stream" });
      res.end(BODY);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverPort = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

interface Outcome {
  status?: number;
  body?: Buffer;
  error?: string;
  received: number;
}

/** One GET through the proxy with a fresh connection and a client timeout. */
function get(port: number, timeoutMs = 2_000): Promise<Outcome> {
  return new Promise((resolve) => {
    let received = 0;
    const chunks: Buffer[] = [];
    const req = request(
      { host: "127.0.0.1", port, path: "/data", agent: false, timeout: timeoutMs },
      (res) => {
        res.on("data", (c: Buffer) => {
          received += c.length;
          chunks.push(c);
        });
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks), received }));
        res.on("error", (e) =>
          resolve({
            status: res.statusCode,
            error: (e as NodeJS.ErrnoException).code ?? e.message,
            received,
          }),
        );
        res.on("aborted", () => resolve({ status: res.statusCode, error: "aborted", received }));
      },
    );
    req.on("timeout", () => {
      req.destroy(new Error("client timeout"));
    });
    req.on("error", (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message, received }));
    req.end();
  });
}

async function withProxy<T>(action: FaultAction, fn: (proxy: FaultProxy) => Promise<T>): Promise<T> {
  const proxy = await startFaultProxy({
    upstreamPort: serverPort,
    schedule: () => action,
    maxStallMs: 3_000,
  });
  try {
    return await fn(proxy);
  } finally {
    await proxy.close();
  }
}

describe("fault proxy against a loopback HTTP server", () => {
  it("pass: forwards request and response untouched", async () => {
    const out = await withProxy({ kind: "pass" }, (p) => get(p.port));
    expect(out.error).toBeUndefined();
    expect(out.status).toBe(200);
    expect(sha(out.body!)).toBe(sha(BODY));
  });

  it("reset at connect: the client sees ECONNRESET and the server sees nothing", async () => {
    const before = requestsSeen;
    const out = await withProxy({ kind: "reset", at: "connect" }, (p) => get(p.port));
    expect(out.error).toBe("ECONNRESET");
    expect(requestsSeen).toBe(before);
  });

  it("reset at request: the server processed the request, the client sees ECONNRESET", async () => {
    const before = requestsSeen;
    const out = await withProxy({ kind: "reset", at: "request" }, (p) => get(p.port));
    expect(out.error).toBe("ECONNRESET");
    expect(out.status).toBeUndefined();
    expect(requestsSeen).toBe(before + 1);
  });

  it("reset at response: part of the answer arrives, then a reset", async () => {
    const out = await withProxy({ kind: "reset", at: "response" }, async (p) => {
      const o = await get(p.port);
      expect(p.records[0]?.responseBytes).toBeGreaterThan(0);
      return o;
    });
    expect(out.error).toBeDefined();
    expect(out.body).toBeUndefined();
  });

  it("stall: nothing comes back before the client's timeout; the proxy resets after the stall", async () => {
    const out = await withProxy({ kind: "stall", ms: 1_500 }, async (p) => {
      const o = await get(p.port, 300);
      // The request reached the server; nothing of its answer was forwarded.
      expect(p.records[0]?.requestBytes).toBeGreaterThan(0);
      expect(p.records[0]?.responseBytes).toBe(0);
      return o;
    });
    // The client gave up on its own timeout (the proxy would have reset the connection instead).
    expect(out.error).toBe("client timeout");
    expect(out.received).toBe(0);
  });

  it("stall longer than no timeout: the proxy ends it with a reset at its bound", async () => {
    const out = await withProxy({ kind: "stall", ms: 200 }, (p) => get(p.port, 5_000));
    expect(out.error).toBe("ECONNRESET");
  });

  it("truncate: the response stops after N bytes and the client sees a short body", async () => {
    const out = await withProxy({ kind: "truncate", bytes: 1_000 }, async (p) => {
      const o = await get(p.port);
      expect(p.records[0]?.responseBytes).toBe(1_000);
      return o;
    });
    // 1000 bytes of the raw response (headers first): never the whole body.
    expect(out.body?.length ?? out.received).toBeLessThan(BODY.length);
  });

  it("bounds the number of faults: after maxFaults every connection passes", async () => {
    const proxy = await startFaultProxy({
      upstreamPort: serverPort,
      schedule: () => ({ kind: "reset", at: "connect" }),
      maxFaults: 2,
    });
    try {
      const outs = [];
      for (let i = 0; i < 4; i++) outs.push(await get(proxy.port));
      expect(outs.map((o) => o.error ?? o.status)).toEqual(["ECONNRESET", "ECONNRESET", 200, 200]);
      expect(proxy.counts()).toEqual({ pass: 2, reset: 2, stall: 0, truncate: 0 });
    } finally {
      await proxy.close();
    }
  });

  it("refuses an upstream other than 127.0.0.1", async () => {
    await expect(
      startFaultProxy({
        upstreamPort: serverPort,
        upstreamHost: "10.0.0.1" as "127.0.0.1",
        schedule: () => ({ kind: "pass" }),
      }),
    ).rejects.toThrow(/127\.0\.0\.1/);
  });
});

describe("seeded schedule", () => {
  it("is a function of the seed and the connection index", () => {
    const weights = { pass: 1, reset: 1, stall: 1, truncate: 1 };
    const a = seededSchedule(42, weights, { stallMs: 100 });
    const b = seededSchedule(42, weights, { stallMs: 100 });
    const c = seededSchedule(43, weights, { stallMs: 100 });
    const seq = (f: typeof a) => Array.from({ length: 64 }, (_, i) => JSON.stringify(f(i)));
    expect(seq(a)).toEqual(seq(b));
    expect(seq(a)).not.toEqual(seq(c));
    // Reverse order of asking gives the same answers.
    expect(Array.from({ length: 64 }, (_, i) => JSON.stringify(a(63 - i))).reverse()).toEqual(seq(b));
    const kinds = new Set(seq(a).map((s) => JSON.parse(s).kind));
    expect([...kinds].sort()).toEqual(["pass", "reset", "stall", "truncate"]);
  });

  it("honours zero weights", () => {
    const f = seededSchedule(7, { pass: 1, reset: 0, stall: 0, truncate: 0 }, { stallMs: 1 });
    for (let i = 0; i < 100; i++) expect(f(i).kind).toBe("pass");
  });
});

describe("fault proxy in front of the real S3 server", { tags: ["s3"] }, () => {
  let bucket: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ bucket, cleanup } = await createTestBucket(s3TestEnv(), "proxy"));
  });
  afterAll(async () => {
    await cleanup();
  });

  /** A store whose only way to the server is the proxy; no retries, so each fault is visible. */
  async function storeThrough(action: FaultAction): Promise<{ store: ObjectStore; proxy: FaultProxy }> {
    const env = s3TestEnv();
    const upstreamPort = Number(new URL(env.endpoint).port);
    const proxy = await startFaultProxy({ upstreamPort, schedule: () => action, maxStallMs: 3_000 });
    const store = await openStore(`s3://${bucket}/proxy`, {
      credentials: { ...testCredentials(env), endpoint_url: proxy.endpoint },
      retry: { retries: 0 },
      timeoutMs: 500,
    });
    return { store, proxy };
  }

  it("pass: put and head go through", async () => {
    const { store, proxy } = await storeThrough({ kind: "pass" });
    try {
      const body = randomBytes(10_000);
      await store.put("a.bin", body, { sha256: sha(body) });
      const info = await store.head("a.bin");
      expect(info?.size).toBe(10_000);
      expect(info?.sha256).toBe(sha(body));
    } finally {
      await proxy.close();
    }
  });

  it.each<[string, FaultAction, string[]]>([
    ["reset at connect", { kind: "reset", at: "connect" }, ["STORE_TRANSIENT"]],
    ["reset after the request", { kind: "reset", at: "request" }, ["STORE_TRANSIENT"]],
    ["stall past the client timeout", { kind: "stall", ms: 2_000 }, ["STORE_TIMEOUT"]],
    ["truncated response", { kind: "truncate", bytes: 40 }, ["STORE_TRANSIENT", "STORE_REQUEST_FAILED"]],
  ])("%s: the store fails with a coded error", async (_name, action, codes) => {
    const { store, proxy } = await storeThrough(action);
    try {
      const error = await store.head("a.bin").then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(Error);
      expect(codes).toContain((error as { code?: string }).code);
      expect(proxy.records.length).toBeGreaterThan(0);
      expect(proxy.records[0]?.action.kind).toBe(action.kind);
    } finally {
      await proxy.close();
    }
  });
});
