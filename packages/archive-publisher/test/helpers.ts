import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ARTIFACT_MANIFEST, MERGE_COMPLETE, sha256Hex } from "@ckpt/manifest";
import { createFileStore, createMemoryStore, createS3Store, type ObjectStore } from "@ckpt/object-store";
import { createTestBucket, s3TestEnv, testCredentials, testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe } from "vitest";
import { commitArtifact } from "../src/index.js";

/** Opens a fresh, empty destination on one backend; the same label opens the same destination again. */
export interface Backend {
  readonly name: "memory" | "file" | "s3";
  open(label: string): Promise<ObjectStore>;
}

/**
 * Runs the same scenarios against the memory store, a file:// root and the real S3 server the
 * shared global setup provides (one bucket per test file, one prefix per label).
 */
export function describeEachBackend(title: string, body: (backend: () => Backend) => void): void {
  for (const name of ["memory", "file", "s3"] as const) describeOn(title, name, body);
}

function describeOn(title: string, name: Backend["name"], body: (backend: () => Backend) => void): void {
  describe(`${title} (${name})`, { tags: name === "s3" ? ["s3"] : [] }, () => {
    let backend: Backend;
    let cleanup: () => Promise<void> = async () => {};
    beforeAll(async () => {
      const run = randomBytes(4).toString("hex");
      if (name === "memory") {
        backend = {
          name,
          open: async (label) =>
            createMemoryStore({ name: `pub-${run}`, prefix: `runs/checkpoint_artifacts/${label}` }),
        };
      } else if (name === "file") {
        const dir = await testdir("ckpt-pub-store-");
        backend = {
          name,
          open: async (label) => {
            const root = join(dir, label);
            await mkdir(root, { recursive: true });
            return createFileStore({ root });
          },
        };
      } else {
        const env = s3TestEnv();
        const made = await createTestBucket(env, "publisher");
        cleanup = made.cleanup;
        backend = {
          name,
          open: async (label) =>
            createS3Store({
              bucket: made.bucket,
              prefix: `runs/${run}/checkpoint_artifacts/${label}`,
              credentials: testCredentials(env),
              retry: { retries: 2, baseDelayMs: 20 },
              env: {},
            }),
        };
      }
    });
    afterAll(() => cleanup());
    body(() => backend);
  });
}

/** A temporary directory removed when the current test finishes. */
export { testdir as tempDir } from "@ckpt/test-utils";

/** Writes `files` (relative path → content) below `dir`. */
export async function writeTree(dir: string, files: Record<string, string | Uint8Array>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

/** Bytes that differ per seed, so different artifacts have different digests. */
export function payload(seed: string, size = 4096): Uint8Array {
  const out = new Uint8Array(size);
  const source = Buffer.from(seed);
  for (let i = 0; i < size; i++) out[i] = (source[i % source.length]! + i) & 0xff;
  return out;
}

/**
 * A merge output in `dir` (an `iter_000000300`): `model.pt` and `merge-diagnostics.json` (plus
 * `extra`), committed with the model only, then `.merge-complete.json` recording both and the
 * diagnostic as kept inside the artifact.
 */
export async function writeMergedArtifact(dir: string, extra: Record<string, string> = {}): Promise<void> {
  const model = payload("merged");
  const diag = '{"deltas": []}\n';
  await writeTree(dir, { "model.pt": model, "merge-diagnostics.json": diag, ...extra });
  const committed = await commitArtifact(dir, { format: "consolidated", components: ["model"] });
  const manifestBytes = await readFile(committed.manifestPath);
  await writeFile(
    join(dir, MERGE_COMPLETE.fileName),
    MERGE_COMPLETE.serialize({
      schema: "posttrain.merge-complete.v1",
      tool_version: "ckpt-merge/1",
      request: {
        mode: "avg",
        experts: [{ source: "/experts/a/model.pt", size: 1, sha256: sha256Hex("a") }],
        base: null,
        lam: null,
        iteration: 300,
      },
      files: [
        {
          path: ARTIFACT_MANIFEST.fileName,
          size: manifestBytes.byteLength,
          sha256: sha256Hex(manifestBytes),
        },
        { path: "model.pt", size: model.byteLength, sha256: sha256Hex(model) },
      ],
      diagnostics: {
        location: "artifact",
        path: "merge-diagnostics.json",
        size: diag.length,
        sha256: sha256Hex(diag),
      },
    }),
  );
}
