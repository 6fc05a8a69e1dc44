// @module-tag torch
// Two `ckpt materialize-hf` processes on one --out (real processes of the built CLI): one
// materializer at a time through <out>.lock, decisions taken under it.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import {
  makeHfFixture,
  makeModelArtifact,
  makeTempDir,
  materializeHfArgs,
  TORCH_FIXTURE_TIMEOUT_MS,
} from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, type RunResult, runNode } from "../helpers/crash.js";

let tmp: { dir: string; cleanup: () => Promise<void> };
let base = "";
let a = "";
let b = "";
// Large enough (about 150 MB of bf16) that a build holds the lock for a while.
const SIZE = ["--layers", "4", "--hidden", "1024", "--intermediate", "4096", "--vocab", "8192"];

beforeAll(async () => {
  tmp = await makeTempDir("ckpt-hf-concurrency-");
  const fixture = await makeHfFixture(join(tmp.dir, "fx"), "dense", 2, 61, SIZE);
  base = fixture.base;
  a = await makeModelArtifact(join(tmp.dir, "a"), fixture.expert(0));
  b = await makeModelArtifact(join(tmp.dir, "b"), fixture.expert(1));
}, TORCH_FIXTURE_TIMEOUT_MS);
afterAll(() => tmp.cleanup());

let n = 0;
const out = () => join(tmp.dir, "out", `t${n++}`);
const materialize = (ckptDir: string, dir: string, extra: string[] = []) =>
  runNode(cli(materializeHfArgs(ckptDir, base, dir, "--json", ...extra)));
const report = (r: RunResult) =>
  JSON.parse(r.stdout) as Record<string, unknown> & { error?: { code: string; message: string } };

async function whenLocked(dir: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    try {
      await stat(join(`${dir}.lock`, "holder.json"));
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  throw new Error("the first materializer never took the lock");
}

describe("two materializers on one --out", () => {
  it("two identical simultaneous requests both exit 0: one builds, the other waits and skips", async () => {
    const dir = out();
    const results = await Promise.all([materialize(a, dir), materialize(a, dir)]);
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    const reports = results.map(report);
    expect(reports.map((r) => r.action).sort()).toEqual(["built", "skipped"]);
    const skipped = reports.find((r) => r.action === "skipped")!;
    expect(skipped.lock_waited_for).toMatch(/^pid \d+ on host .+, holding it since /);
  }, 120_000);

  it("a differing request waits for the build, then is refused on its marker", async () => {
    const dir = out();
    const first = materialize(a, dir);
    await whenLocked(dir);
    const second = await materialize(b, dir);
    expect((await first).code).toBe(0);
    expect(second.code).toBe(1);
    expect(report(second).error).toMatchObject({ code: "MATERIALIZE_OUTPUT_MISMATCH" });
    // The output is the first request's.
    const marker = JSON.parse(await readFile(join(dir, ".materialized"), "utf8"));
    expect(marker.source.source).toBe(join(a, "model.pt"));
  }, 120_000);

  it("a holder still there after --lock-wait-seconds is refused by name, and nothing is touched", async () => {
    const dir = out();
    const first = materialize(a, dir);
    await whenLocked(dir);
    const holder = JSON.parse(await readFile(join(`${dir}.lock`, "holder.json"), "utf8"));
    // Freeze the holder so it certainly still holds the lock (well within the 10 s staleness).
    process.kill(holder.pid, "SIGSTOP");
    try {
      const second = await materialize(a, dir, ["--lock-wait-seconds", "0"]);
      expect(second.code).toBe(1);
      expect(report(second).error).toMatchObject({ code: "MATERIALIZE_LOCKED" });
      expect(report(second).error!.message).toContain(`pid ${holder.pid} on host ${holder.host}`);
      await expect(stat(dir)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      process.kill(holder.pid, "SIGCONT");
    }
    expect((await first).code).toBe(0);
    expect(report(await materialize(a, dir)).action).toBe("skipped");
  }, 120_000);
});
