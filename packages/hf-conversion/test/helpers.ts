import { cp, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

export {
  type HfFixture as Fixture,
  makeHfFixture as makeFixture,
  TORCH_FIXTURE_TIMEOUT_MS as PYTHON_TIMEOUT,
} from "@ckpt/test-utils";

import { makeModelArtifact } from "@ckpt/test-utils";
import type { MaterializeRequest } from "../src/index.js";

/** A scratch directory for this test file (made in its beforeAll), removed when it ends. */

/** A committed consolidated artifact `<root>/iter_<n>` holding a copy of `modelPt` and its native manifest. */
export function makeArtifact(root: string, modelPt: string, iteration = 100): Promise<string> {
  return makeModelArtifact(root, modelPt, { iteration });
}

/** A request to materialize the local artifact `ckptDir` over `base` into `out` (no tensor floor, 5 s lock wait). */
export function request(
  ckptDir: string,
  base: string,
  out: string,
  extra: Partial<MaterializeRequest> = {},
): MaterializeRequest {
  return { source: { kind: "local", ckptDir }, base, out, minTensors: 0, lockWaitSeconds: 5, ...extra };
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
