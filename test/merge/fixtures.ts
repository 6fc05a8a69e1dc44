// Inputs for the merge suites, made by the HF fixture generator with real PyTorch.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { TORCH_PYTHON } from "@ckpt/test-utils";
import { REPO_ROOT } from "../helpers/crash.js";

/** The torch interpreter (test-utils' TORCH_PYTHON). */
export const PYTHON = TORCH_PYTHON;
export const runProcess = promisify(execFile);

/**
 * A dense HF base (sharded safetensors + index) and three bf16 experts (`torch.save({"net": ...})`)
 * under `out`, from tools/fixtures/make_hf_fixtures.py; `dims` are its size flags.
 */
export async function makeDenseFixture(
  out: string,
  seed: number,
  dims: Readonly<Record<"layers" | "hidden" | "intermediate" | "vocab", number>>,
): Promise<{ experts: string[]; base: string }> {
  const flags = Object.entries(dims).flatMap(([name, value]) => [`--${name}`, String(value)]);
  await runProcess(PYTHON, [
    join(REPO_ROOT, "tools/fixtures/make_hf_fixtures.py"),
    ...["--out", out, "--kind", "dense", "--experts", "3", "--seed", String(seed), ...flags],
  ]);
  return {
    experts: [0, 1, 2].map((i) => join(out, "experts", `expert_${i}`, "model.pt")),
    base: join(out, "base"),
  };
}
