import type { LogicalComponent } from "@ckpt/manifest";
import type { FootprintEstimate, OptimizerName, StateDType, WeightDType } from "@ckpt/retention";
import { formatBytes, table } from "../render.js";
import type { CkptCommand } from "./registry.js";

interface EstimateArgs {
  params: string;
  dtype: WeightDType;
  optimizer: OptimizerName;
  "state-dtype": StateDType;
  "master-weights": boolean;
  ema: boolean;
  components?: string;
  "keep-optim-last": number;
  "keep-model-last": number;
  iterations?: number;
}

// Choices are listed here so `--help` stays free of library imports; the library validates them too.
const WEIGHT_DTYPES = ["bf16", "fp16", "fp32", "fp8"] as const;
const OPTIMIZERS = ["adamw", "adam", "sgd", "lion", "adagrad", "rmsprop", "adafactor", "none"] as const;

function setting(r: FootprintEstimate["retention"][number]): string {
  if (r.keepOptimLast === 0 && r.keepModelLast === 0) return "keep everything";
  const model = r.keepModelLast === 0 ? "all" : String(r.keepModelLast);
  const optim = r.keepOptimLast === 0 ? "all" : String(r.keepOptimLast);
  return `keep_model_last=${model} keep_optim_last=${optim}`;
}

const bytesOrGrowth = (value: number | null, growth: number) =>
  value === null ? `grows ${formatBytes(growth)}/save` : formatBytes(value);

/** Components, the per-checkpoint total, one row per retention setting, then the assumptions. */
function renderEstimate(e: FootprintEstimate): string {
  const components = Object.entries(e.components).map(([name, bytes]) => [name, formatBytes(bytes)]);
  const lines = [
    `ESTIMATE (computed from tensor sizes, not measured) for ${e.params.toLocaleString("en-US")} parameters` +
      (e.artifact ? " — a partial plan: these are artifacts" : ""),
    "",
    table(
      ["component", "bytes"],
      [...components, ["per checkpoint", formatBytes(e.perCheckpoint)]],
      new Set([1]),
    ),
    "",
    table(
      ["retention", "checkpoints", "with optimizer", "disk after a save", "peak while saving"],
      e.retention.map((r) => [
        e.artifact ? "none (artifacts are never pruned)" : setting(r),
        r.checkpoints === null ? "all" : String(r.checkpoints),
        r.withOptimizer === null ? "all" : String(r.withOptimizer),
        bytesOrGrowth(r.bytesAfterSave, r.growthPerSave),
        bytesOrGrowth(r.peakBytes, r.growthPerSave),
      ]),
      new Set([1, 2, 3, 4]),
    ),
  ];
  if (e.writtenOverRun !== null) lines.push("", `written over the run: ${formatBytes(e.writtenOverRun)}`);
  lines.push("", "assumptions:", ...e.assumptions.map((a) => `  - ${a}`));
  return lines.join("\n");
}

export const estimateCommand: CkptCommand<EstimateArgs> = {
  command: "estimate",
  describe:
    "Estimate checkpoint bytes per component, per checkpoint and per retention setting (disk, not GPU memory)",
  builder: (yargs) =>
    yargs
      .option("params", {
        type: "string",
        demandOption: true,
        describe: "Model parameters: 7B, 350M, 1.5e9, ...",
      })
      .option("dtype", {
        choices: WEIGHT_DTYPES,
        default: "bf16" as const,
        describe: "dtype of the saved weights",
      })
      .option("optimizer", {
        choices: OPTIMIZERS,
        default: "adamw" as const,
        describe: "Optimizer whose per-parameter state optim.pt holds (adamw/adam: two moments)",
      })
      .option("state-dtype", {
        choices: ["fp32", "bf16"] as const,
        default: "fp32" as const,
        describe: "dtype of the optimizer's per-parameter state",
      })
      .option("master-weights", {
        type: "boolean",
        default: false,
        describe: "The optimizer also saves an fp32 master copy of the weights (mixed precision)",
      })
      .option("ema", {
        type: "boolean",
        default: false,
        describe: "model.pt also holds a maintained EMA copy",
      })
      .option("components", {
        type: "string",
        describe:
          "Component plan, comma-separated: model,optimizer,training_state (default: all three; optim means optimizer)",
      })
      .option("keep-optim-last", {
        type: "number",
        default: 1,
        describe: "Checkpoints that keep optimizer state (0: all); 1 is the local-primary default",
      })
      .option("keep-model-last", { type: "number", default: 0, describe: "Checkpoints kept at all (0: all)" })
      .option("iterations", {
        type: "number",
        describe: "Saves over the run (bounds settings that keep everything)",
      })
      .example("ckpt estimate --params 7B", "bf16 weights, AdamW fp32 moments, the default retention")
      .example(
        "ckpt estimate --params 70B --master-weights --keep-model-last 3 --iterations 200 --json",
        "mixed precision with an fp32 master copy; three checkpoints kept over 200 saves; as JSON",
      )
      .example(
        "ckpt estimate --params 7B --components model --iterations 50",
        "model-only artifacts, which retention never prunes",
      ),
  async run(args) {
    const { estimateFootprint, parseParamCount } = await import("@ckpt/retention");
    const estimate = estimateFootprint({
      params: parseParamCount(args.params),
      dtype: args.dtype,
      optimizer: args.optimizer,
      stateDtype: args["state-dtype"],
      masterWeights: args["master-weights"],
      ema: args.ema,
      ...(args.components === undefined
        ? {}
        : { components: args.components.split(",").map((c) => c.trim()) as LogicalComponent[] }),
      keepOptimLast: args["keep-optim-last"],
      keepModelLast: args["keep-model-last"],
      ...(args.iterations === undefined ? {} : { iterations: args.iterations }),
    });
    return { exitCode: 0, report: { ok: true, ...estimate }, human: renderEstimate(estimate) };
  },
};
