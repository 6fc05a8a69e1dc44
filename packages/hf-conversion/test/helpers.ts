import { execFile } from "node:child_process";
import { cp, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { ARTIFACT_MANIFEST_FILE, hashFile, serializeArtifactManifest } from "@ckpt/manifest";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll } from "vitest";

const run = promisify(execFile);

/** Debian's interpreter with torch 1.13 (the `python3` on PATH cannot import torch). */
export const PYTHON = "/usr/bin/python3";
export const GENERATOR = join(
  import.meta.dirname,
  "..",
  "..",
  "..",
  "tools",
  "fixtures",
  "make_hf_fixtures.py",
);

export interface Fixture {
  readonly dir: string;
  readonly base: string;
  expert(i: number): string;
}

/** A scratch directory for this test file, removed after it. */
export async function scratchDir(prefix = "ckpt-hf-"): Promise<string> {
  const { dir, cleanup } = await makeTempDir(prefix);
  afterAll(cleanup);
  return dir;
}

/** Runs tools/fixtures/make_hf_fixtures.py with real torch into `dir`. */
export async function makeFixture(
  dir: string,
  kind: "dense" | "moe",
  experts: number,
  seed: number,
  extra: readonly string[] = [],
): Promise<Fixture> {
  await run(PYTHON, [
    GENERATOR,
    "--out",
    dir,
    "--kind",
    kind,
    "--experts",
    String(experts),
    "--seed",
    String(seed),
    ...extra,
  ]);
  return { dir, base: join(dir, "base"), expert: (i) => join(dir, "experts", `expert_${i}`, "model.pt") };
}

/** A committed consolidated artifact `<root>/iter_<n>` holding a copy of `modelPt` and its native manifest. */
export async function makeArtifact(
  root: string,
  modelPt: string,
  iteration = 100,
  withDigest = true,
): Promise<string> {
  const dir = join(root, `iter_${String(iteration).padStart(9, "0")}`);
  await mkdir(dir, { recursive: true });
  await cp(modelPt, join(dir, "model.pt"));
  const digest = await hashFile(join(dir, "model.pt"));
  await writeFile(
    join(dir, ARTIFACT_MANIFEST_FILE),
    serializeArtifactManifest({
      schema: "posttrain.checkpoint-artifact.v1",
      iteration,
      format: "consolidated",
      logical_components: ["model"],
      physical_components: [
        {
          name: "model",
          kind: "file",
          path: "model.pt",
          size: digest.size,
          ...(withDigest ? { sha256: digest.sha256 } : {}),
        },
      ],
      producer: "ckpt-test/1",
    }),
  );
  return dir;
}

/** Copies a directory tree (a base to damage in a test). */
export async function copyTree(from: string, to: string): Promise<string> {
  await cp(from, to, { recursive: true });
  return to;
}

/** Every file below `dir` with its bytes, for byte-identity checks (relative POSIX paths, sorted). */
export async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string, rel: string) => {
    for (const entry of (await readdir(d, { withFileTypes: true })).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const path = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) await walk(join(d, entry.name), path);
      else out.set(path, (await readFile(join(d, entry.name))).toString("base64"));
    }
  };
  await walk(dir, "");
  return out;
}

export const PYTHON_TIMEOUT = 120_000;
