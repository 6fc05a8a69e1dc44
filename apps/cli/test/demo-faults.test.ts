// Each fault mode of `ckpt demo`, run through the built CLI (the demo's trainer is a real child
// process of the ckpt command), judged by the resume decision in its JSON report.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import type { DemoReport } from "../src/demo/run-demo.js";

const bin = resolve(import.meta.dirname, "..", "dist", "bin.js");
let scratch = "";
beforeAll(async () => {
  if (!existsSync(bin))
    throw new Error(`${bin} is missing: build the CLI first (pnpm turbo run build --filter @ckpt/cli...)`);
  scratch = await testdir("ckpt-demo-faults-");
});

function demo(args: string[]): Promise<{ code: number; report: DemoReport; stderr: string }> {
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      [bin, "demo", "--json", ...args],
      { maxBuffer: 1 << 24 },
      (error, stdout, stderr) => {
        const code = error ? ((error as { code?: number }).code ?? 1) : 0;
        try {
          done({ code, report: JSON.parse(stdout) as DemoReport, stderr });
        } catch {
          fail(new Error(`ckpt demo printed no JSON report (exit ${code}): ${stderr}`));
        }
      },
    );
  });
}

const STEP_IDS = [
  "base",
  "train",
  "fault",
  "resume",
  "publish",
  "verify",
  "fetch",
  "prune",
  "experts",
  "merge",
  "materialize",
];

describe("ckpt demo --fault", () => {
  it("kill: the trainer is SIGKILLed inside the save of 60; resume takes the last complete checkpoint, 40", async () => {
    const { code, report } = await demo(["--dir", join(scratch, "kill"), "--fault", "kill"]);
    expect(report.steps.filter((s) => s.status !== "ok")).toEqual([]);
    expect(report.resume?.fault.what).toMatch(
      /SIGKILLed the trainer \(pid \d+\) inside the save of iteration 60/,
    );
    expect(report.resume?.decision).toMatchObject({ kind: "checkpoint", iteration: 40 });
    expect(report.resume?.load).toEqual({ ok: true });
    expect(report.resume?.continued_to).toBe(80);
    expect(code).toBe(0);
  }, 120_000);

  it("clean: nothing injected; resume continues from 60", async () => {
    const { code, report } = await demo(["--dir", join(scratch, "clean"), "--fault", "clean"]);
    expect(report.resume?.decision).toMatchObject({ kind: "checkpoint", iteration: 60 });
    expect(report.resume?.continued_to).toBe(80);
    expect(code).toBe(0);

    // The --json report's shape (schema ckpt.demo-report.v1).
    expect(report.schema).toBe("ckpt.demo-report.v1");
    expect(report).toMatchObject({ ok: true, complete: true, fault: "clean" });
    expect(report.steps.map((s) => s.id)).toEqual(STEP_IDS);
    for (const step of report.steps) {
      expect(step).toMatchObject({ status: "ok", title: expect.any(String), summary: expect.any(String) });
      expect(step.ms).toBeGreaterThanOrEqual(0);
    }
    expect(report.wall_ms).toBeGreaterThan(0);
    expect(report.inventory.length).toBeGreaterThan(3);
    for (const row of report.inventory) {
      expect(row.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(row.bytes).toBeGreaterThan(0);
      expect(existsSync(join(report.dir, row.where))).toBe(true);
    }
  }, 120_000);

  it("short: model.pt cut in half; the manager refuses to resume from an incomplete checkpoint", async () => {
    const { report } = await demo(["--dir", join(scratch, "short"), "--fault", "short"]);
    expect(report.resume?.fault).toMatchObject({ mode: "short" });
    expect(report.resume?.fault.size_after).toBeLessThan(report.resume!.fault.size_before!);
    expect(report.resume?.decision).toMatchObject({ kind: "refused", code: "MANAGER_RESUME_INCOMPLETE" });
    expect(report.resume?.decision.reason).toContain("model.pt");
  }, 120_000);

  it("torn: optim.pt half zeroed at the same size; resume hashes it against its description and refuses before loading", async () => {
    const { report } = await demo(["--dir", join(scratch, "torn"), "--fault", "torn"]);
    expect(report.resume?.fault).toMatchObject({ mode: "torn" });
    expect(report.resume?.fault.size_after).toBe(report.resume!.fault.size_before);
    expect(report.resume?.decision).toMatchObject({
      kind: "refused",
      code: "MANAGER_RESUME_IDENTITY_MISMATCH",
    });
    expect(report.resume?.decision.reason).toContain("VERIFY_DIGEST_MISMATCH optim.pt");
  }, 120_000);
});
