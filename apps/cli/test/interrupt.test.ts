import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { openStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { publishLeaves } from "../src/commands/artifact/publish.js";
import type { SignalSource, StopSignal } from "../src/interrupt.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

const BIN = resolve(import.meta.dirname, "..", "dist", "bin.js");

/** Signals delivered by the test: `send` reaches whoever listens; `exitNow` records instead of exiting. */
function testSignals(): SignalSource & {
  send(signal: StopSignal): void;
  exits: number[];
  listening(): boolean;
} {
  let handler: ((signal: StopSignal) => void) | undefined;
  const exits: number[] = [];
  return {
    listen(onSignal) {
      handler = onSignal;
      return () => {
        handler = undefined;
      };
    },
    exitNow(code) {
      exits.push(code);
      throw new Error(`exit ${code}`);
    },
    send: (signal) => handler?.(signal),
    exits,
    listening: () => handler !== undefined,
  };
}

/** A memory store to download from: the test's signal comes the moment the command listens, before it reads. */
async function memorySource(name: string): Promise<string> {
  const store = await openStore(`memory://${name}/run`);
  await store.put("model.pt", new Uint8Array(64));
  return store.uri;
}

describe("interrupting a long command", () => {
  it("aborts it on the first signal: one stderr line, the abort code under --json, exit 130 or 143", async () => {
    for (const [signal, code] of [
      ["SIGINT", 130],
      ["SIGTERM", 143],
    ] as const) {
      const signals = testSignals();
      const c = captureIo();
      const uri = await memorySource(`interrupt-${code}`);
      const local = join(await testdir("ckpt-cli-interrupt-"), "out");
      // The signal arrives as soon as the command listens: before its first transfer ends.
      const listen = signals.listen.bind(signals);
      signals.listen = (onSignal) => {
        const stop = listen(onSignal);
        queueMicrotask(() => signals.send(signal));
        return stop;
      };
      const exit = await runCli(["store", "download", uri, local, "--json"], { ...c.io, signals });
      expect(exit).toBe(code);
      expect(c.err()).toBe(
        `interrupted (${signal}): ${local} keeps the files downloaded so far, each complete (the partial one was removed); run the same command again to download the rest\n`,
      );
      expect(JSON.parse(c.out())).toMatchObject({
        ok: false,
        interrupted: signal,
        error: { code: "STORE_ABORTED" },
        cause: { code: "STORE_ABORTED" },
      });
      expect(signals.listening()).toBe(false);
      expect(signals.exits).toEqual([]);
    }
  });

  it("ends the process at once on a second signal while it stops", async () => {
    const signals = testSignals();
    const c = captureIo();
    const uri = await memorySource("interrupt-twice");
    const listen = signals.listen.bind(signals);
    signals.listen = (onSignal) => {
      const stop = listen(onSignal);
      queueMicrotask(() => {
        signals.send("SIGINT");
        expect(() => signals.send("SIGTERM")).toThrow("exit 143");
      });
      return stop;
    };
    const local = join(await testdir("ckpt-cli-interrupt-"), "out");
    expect(await runCli(["store", "download", uri, local], { ...c.io, signals })).toBe(130);
    expect(signals.exits).toEqual([143]);
    expect(c.err()).toMatch(/^interrupted again \(SIGTERM\): stopped at once, without cleaning up\n/);
  });

  it("ends a short command at once on the first signal: one stderr line, the report under --json, exit 143", async () => {
    const signals = testSignals();
    const c = captureIo();
    const dir = await testdir("ckpt-cli-interrupt-");
    const listen = signals.listen.bind(signals);
    signals.listen = (onSignal) => {
      const stop = listen(onSignal);
      // The test's exitNow throws where the process would have ended.
      queueMicrotask(() => expect(() => signals.send("SIGTERM")).toThrow("exit 143"));
      return stop;
    };
    await runCli(["fingerprint", dir, "--json"], { ...c.io, signals });
    expect(signals.exits).toEqual([143]);
    expect(c.err()).toBe(
      "interrupted (SIGTERM): nothing was changed (it only reads); run the same command again\n",
    );
    const report = c.out().slice(0, c.out().indexOf("\n}\n") + 2);
    expect(JSON.parse(report)).toEqual({
      ok: false,
      interrupted: "SIGTERM",
      error: { code: null, message: expect.stringMatching(/^interrupted \(SIGTERM\): /) },
      leaves: "nothing was changed (it only reads); run the same command again",
    });
    expect(signals.listening()).toBe(false);
  });

  it("a short command that writes says what it leaves", async () => {
    const signals = testSignals();
    const c = captureIo();
    const listen = signals.listen.bind(signals);
    signals.listen = (onSignal) => {
      const stop = listen(onSignal);
      queueMicrotask(() => expect(() => signals.send("SIGINT")).toThrow("exit 130"));
      return stop;
    };
    const dir = join(await testdir("ckpt-cli-interrupt-"), "checkpoint_artifacts", "iter_000000001");
    await runCli(["artifact", "commit", dir], { ...c.io, signals });
    expect(signals.exits).toEqual([130]);
    expect(c.err()).toMatch(
      /^interrupted \(SIGINT\): the artifact is committed only if its manifest, written last and atomically, is there; /,
    );
  });

  it("the built ckpt ends a waiting command on SIGTERM with the line and exit 143", async () => {
    const root = await testdir("ckpt-cli-interrupt-");
    const child = spawn(process.execPath, [BIN, "mcp", "--root", root], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    // Once the server answers, it is running and listening for signals.
    const answered = new Promise<void>((resolve) =>
      child.stdout.on("data", (d) => {
        out += d;
        if (out.includes("\n")) resolve();
      }),
    );
    child.stdin.write(
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } })}\n`,
    );
    await answered;
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exit).toBe(143);
    expect(err).toContain(
      "interrupted (SIGTERM): nothing was changed (it only reads); run the same command again\n",
    );
    child.stdin.destroy();
  });
});

describe("publishLeaves", () => {
  const uri = "s3://b/p/checkpoint_artifacts/iter_000000300";
  const at = { declared: false, uploaded: 0, committed: false, receipted: false };
  it("says what an interrupted publish leaves at each step", () => {
    expect(publishLeaves(uri, at)).toBe(
      `nothing published; ${uri} holds no new objects; run the same command again to publish`,
    );
    expect(publishLeaves(uri, { ...at, declared: true, uploaded: 2 })).toMatch(
      /^nothing published: .* has no manifest .*the declaration and 2 complete payloads stay there and are reused/,
    );
    expect(publishLeaves(uri, { ...at, declared: true, committed: true })).toMatch(
      /is published \(manifest committed\) but the local receipt is not written/,
    );
    expect(publishLeaves(uri, { ...at, declared: true, committed: true, receipted: true })).toMatch(
      /not every local payload was released; run the same command again to release the rest$/,
    );
  });
});
