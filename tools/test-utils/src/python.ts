import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * The PyTorch 2 interpreter (torch 2.13 with torch.distributed.checkpoint, transformers,
 * safetensors): CKPT_PYTHON, by default the repository's `.venv`, which `tools/python/venv.sh`
 * builds from tools/python/requirements.txt (tools/test-all.sh runs it).
 */
export const TORCH2_PYTHON =
  process.env.CKPT_PYTHON ?? join(import.meta.dirname, "..", "..", "..", ".venv", "bin", "python");

/** TORCH2_PYTHON, or a failure that says how to build it (a missing stack fails, never skips). */
export function torch2Python(): string {
  if (!existsSync(TORCH2_PYTHON)) {
    throw new Error(
      `the PyTorch 2 test interpreter ${TORCH2_PYTHON} does not exist: run \`bash tools/python/venv.sh\` (or set CKPT_PYTHON)`,
    );
  }
  return TORCH2_PYTHON;
}
