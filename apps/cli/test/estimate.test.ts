import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

describe("ckpt estimate", () => {
  it("7B bf16 AdamW: 14 GB of weights, 56 GB of fp32 moments, labelled as an estimate (JSON)", async () => {
    const c = captureIo();
    expect(await runCli(["estimate", "--params", "7B", "--iterations", "10", "--json"], c.io)).toBe(0);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({
      ok: true,
      estimate: true,
      params: 7e9,
      components: { model: 14e9, optimizer: 56e9, training_state: 8192 },
      artifact: false,
      written_over_run: 10 * (70e9 + 8192),
    });
    // The requested (default) setting first: keep_optim_last=1 over 10 saves.
    expect(report.retention[0]).toMatchObject({
      keep_optim_last: 1,
      keep_model_last: 0,
      checkpoints: 10,
      with_optimizer: 1,
    });
    expect(report.assumptions.length).toBeGreaterThan(3);
  });

  it("prints components, a retention table and the assumptions for humans", async () => {
    const c = captureIo();
    expect(
      await runCli(
        ["estimate", "--params", "1B", "--master-weights", "--keep-model-last", "2", "--optimizer", "sgd"],
        c.io,
      ),
    ).toBe(0);
    const out = c.out();
    expect(out.split("\n")[0]).toBe(
      "ESTIMATE (computed from tensor sizes, not measured) for 1,000,000,000 parameters",
    );
    expect(out).toMatch(/^optimizer\s+7\.5 GiB$/m); // one fp32 momentum + fp32 master copy = 8 bytes/param
    expect(out).toMatch(/^keep_model_last=2 keep_optim_last=1\s+2\s+1\s+/m);
    expect(out).toMatch(/^keep everything\s+all\s+all\s+grows 9\.3 GiB\/save/m);
    expect(out).toContain("assumptions:");
  });

  it("exits 2 for a parameter count or option it cannot read", async () => {
    for (const args of [
      ["--params", "seven"],
      ["--params", "7B", "--components", "model,weights"],
      ["--params", "7B", "--optimizer", "shampoo"],
      ["--params", "7B", "--keep-optim-last", "-1"],
    ]) {
      const c = captureIo();
      expect(await runCli(["estimate", ...args, "--json"], c.io)).toBe(2);
      expect(JSON.parse(c.out()).ok).toBe(false);
    }
  });
});
