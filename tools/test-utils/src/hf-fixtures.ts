import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cp, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * The interpreter the torch-tagged tests run: Debian's, which has torch 1.13 and numpy (the `python3`
 * on PATH cannot import torch). CKPT_TEST_PYTHON names another, e.g. a missing one to prove the fast
 * lane (`pnpm test:unit`) runs no Python.
 */
export const TORCH_PYTHON = process.env.CKPT_TEST_PYTHON ?? "/usr/bin/python3";
/** tools/fixtures/make_hf_fixtures.py: small Hugging Face bases and trainer expert checkpoints. */
export const HF_FIXTURE_GENERATOR = join(import.meta.dirname, "..", "..", "fixtures", "make_hf_fixtures.py");
/** Starting torch on a busy shared machine takes seconds; tests that generate fixtures allow this. */
export const TORCH_FIXTURE_TIMEOUT_MS = 120_000;

export interface HfFixture {
  readonly dir: string;
  /** The sharded Hugging Face base directory. */
  readonly base: string;
  /** `experts/expert_<i>/model.pt`. */
  expert(i: number): string;
}

/** Runs the fixture generator with real torch (interface: tools/fixtures/README.md). */
export async function makeHfFixture(
  dir: string,
  kind: "dense" | "moe",
  experts: number,
  seed: number,
  extra: readonly string[] = [],
): Promise<HfFixture> {
  const args = ["--out", dir, "--kind", kind, "--experts", String(experts), "--seed", String(seed), ...extra];
  await promisify(execFile)(TORCH_PYTHON, [HF_FIXTURE_GENERATOR, ...args], { maxBuffer: 16 * 1024 * 1024 });
  return { dir, base: join(dir, "base"), expert: (i) => join(dir, "experts", `expert_${i}`, "model.pt") };
}

/**
 * A committed consolidated artifact `<root>/iter_<9 digits>` holding a copy of `modelPt` and its
 * native manifest (written here as plain JSON: test-utils depends on no ckpt package).
 */
export async function makeModelArtifact(
  root: string,
  modelPt: string,
  options: { iteration?: number; digest?: boolean } = {},
): Promise<string> {
  const iteration = options.iteration ?? 100;
  const dir = join(root, `iter_${String(iteration).padStart(9, "0")}`);
  await mkdir(dir, { recursive: true });
  await cp(modelPt, join(dir, "model.pt"));
  const bytes = await readFile(join(dir, "model.pt"));
  const model = {
    kind: "file",
    name: "model",
    path: "model.pt",
    ...(options.digest === false ? {} : { sha256: createHash("sha256").update(bytes).digest("hex") }),
    size: bytes.length,
  };
  const manifest = {
    format: "consolidated",
    iteration,
    logical_components: ["model"],
    physical_components: [model],
    producer: "ckpt-test/1",
    schema: "posttrain.checkpoint-artifact.v1",
  };
  await writeFile(join(dir, ".posttrain-checkpoint-artifact.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return dir;
}

/**
 * The `ckpt materialize-hf` words of a test run on a small fixture: the source (an artifact
 * directory, or a URI given as `--artifact-uri`), the base and the output, with the tensor-count
 * floor off (fixtures are small); `extra` follows (`--json`, `--force`, `--credentials f`, ...).
 */
export function materializeHfArgs(source: string, base: string, out: string, ...extra: string[]): string[] {
  return [
    "materialize-hf",
    source.includes("://") ? "--artifact-uri" : "--ckpt-dir",
    source,
    "--base",
    base,
    "--out",
    out,
    "--min-tensors",
    "0",
    ...extra,
  ];
}
