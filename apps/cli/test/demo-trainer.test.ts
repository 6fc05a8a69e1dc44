import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { inCI, TORCH_PYTHON, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { freshState, makeTask, PARAM_SPECS, trainStep, validationLoss } from "../src/demo/model.js";
import { readTrainState, writeComponents } from "../src/demo/state-files.js";

const task = makeTask(11, 101);

describe("the demo trainer", () => {
  it("learns: the validation loss falls over 100 AdamW steps", () => {
    const state = freshState(1);
    const before = validationLoss(state.params, task);
    for (let i = 0; i < 100; i++) trainStep(state, task);
    expect(state.step).toBe(100);
    expect(validationLoss(state.params, task)).toBeLessThan(before * 0.7);
  });

  it("resumes exactly: training restored from optim.pt continues bit for bit like an uninterrupted run", async () => {
    const dir = await testdir("ckpt-demo-trainer-");
    const straight = freshState(1);
    for (let i = 0; i < 30; i++) trainStep(straight, task);

    const first = freshState(1);
    for (let i = 0; i < 20; i++) trainStep(first, task);
    const targets = {
      model: join(dir, "model.pt"),
      optim: join(dir, "optim.pt"),
      trainer: join(dir, "trainer.pt"),
    };
    await writeComponents(targets, first, { taskSeed: 11, dataSeed: 101 });
    const restored = await readTrainState(targets.optim, 20);
    for (let i = 0; i < 10; i++) trainStep(restored, task);

    for (const spec of PARAM_SPECS) {
      expect(Buffer.from(restored.params.get(spec.name)!.buffer)).toEqual(
        Buffer.from(straight.params.get(spec.name)!.buffer),
      );
    }
  });

  it("writes a model.pt that PyTorch loads as {'net': bf16 state_dict} with Hugging Face names", {
    tags: ["torch"],
  }, async (ctx) => {
    if (!existsSync(TORCH_PYTHON)) {
      if (inCI) throw new Error(`${TORCH_PYTHON} with torch is required in CI`);
      ctx.skip();
    }
    const dir = await testdir("ckpt-demo-trainer-");
    const state = freshState(1);
    trainStep(state, task);
    const model = join(dir, "model.pt");
    await writeComponents({ model }, state, { taskSeed: 11, dataSeed: 101 });
    const out = execFileSync(
      TORCH_PYTHON,
      [
        "-c",
        "import sys,torch,json; sd=torch.load(sys.argv[1])['net']; print(json.dumps({k:[str(v.dtype),list(v.shape)] for k,v in sd.items()}))",
        model,
      ],
      { encoding: "utf8" },
    );
    const loaded = JSON.parse(out) as Record<string, [string, number[]]>;
    expect(Object.keys(loaded)).toEqual(PARAM_SPECS.map((s) => s.name));
    for (const spec of PARAM_SPECS) expect(loaded[spec.name]).toEqual(["torch.bfloat16", [...spec.shape]]);
  });
});
