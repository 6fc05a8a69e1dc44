import { join } from "node:path";
import { createMemoryStore, type ObjectStore, openStore } from "@ckpt/object-store";
import { createTestBucket, s3TestEnv, testCredentials, testdir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe } from "vitest";

/** Opens a fresh, empty store rooted at an artifact prefix below `name` (unique per call). */
export type MakeStore = (name?: string) => Promise<ObjectStore>;

let counter = 0;
function uniquePrefix(name: string): string {
  counter += 1;
  return `proj/group/run/20260901120000/checkpoint_artifacts/${name}-${counter}/iter_000000300`;
}

/**
 * Runs the same scenarios against the memory store, a `file://` directory and the real S3 server,
 * each time with a store opened at an artifact's prefix, as the reader is used in production.
 */
export function describeEachBackend(name: string, scenarios: (makeStore: MakeStore) => void): void {
  describe(`${name} [memory]`, () => {
    scenarios(async (label = "a") => createMemoryStore({ prefix: uniquePrefix(label) }));
  });

  describe(`${name} [file]`, () => {
    let root = "";
    beforeAll(async () => {
      root = await testdir("ckpt-reader-file-");
    });
    scenarios(async (label = "a") => openStore(`file://${join(root, uniquePrefix(label))}`));
  });

  describe(`${name} [s3]`, { tags: ["s3"] }, () => {
    let bucket = "";
    let cleanup: () => Promise<void> = async () => {};
    beforeAll(async () => {
      ({ bucket, cleanup } = await createTestBucket(s3TestEnv(), "reader"));
    });
    afterAll(() => cleanup());
    scenarios(async (label = "a") =>
      openStore(`s3://${bucket}/${uniquePrefix(label)}`, { credentials: testCredentials(s3TestEnv()) }),
    );
  });
}
