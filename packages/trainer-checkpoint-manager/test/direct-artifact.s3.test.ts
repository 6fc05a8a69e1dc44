// @module-tag s3
// @module-tag torch
// A direct-primary artifact made of real DCP (written by torch 2's DCP, uploaded as the ranks'
// data processes do, committed with their inventory) is fetched like a published one: the
// declaration proves every shard, and a shard overwritten in the bucket is refused by digest.
import { randomBytes } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fetchArtifact } from "@ckpt/archive-reader";
import { sha256Hex } from "@ckpt/manifest";
import { openStore } from "@ckpt/object-store";
import {
  createTestBucket,
  DCP_FIXTURE_TIMEOUT_MS,
  makeDcpFixtures,
  s3TestEnv,
  testCredentials,
  torch2Python,
} from "@ckpt/test-utils";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openManager, tempRoot } from "./helpers.js";

let bucket = "";
let cleanup: () => Promise<void> = async () => {};
let dcpDir = "";
const credentials = () => testCredentials(s3TestEnv());

beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(s3TestEnv(), "direct-artifact"));
  const out = await tempRoot();
  await makeDcpFixtures(out, torch2Python(), [1]);
  dcpDir = join(out, "ranks1");
}, DCP_FIXTURE_TIMEOUT_MS);
afterAll(async () => {
  await cleanup();
});

it("ckpt artifact fetch accepts a direct artifact of real DCP by its declaration, and refuses a damaged shard", async () => {
  const root = await tempRoot();
  const config = {
    checkpoint_format: "dcp",
    save_every: 1,
    checkpoint_components: ["model"],
    checkpoint_store: { backend: "object_store", bucket },
  };
  const { manager } = await openManager(root, config, {
    project: "direct-fetch",
    credentials: credentials(),
  });
  const session = await manager.beginSave(3, manager.planSave(3, { cadence: true })!);
  const model = await openStore(session.targets.model!.replace(/\/+$/, ""), { credentials: credentials() });
  const inventory = [];
  for (const name of await readdir(dcpDir)) {
    const bytes = await readFile(join(dcpDir, name));
    await model.put(name, bytes);
    inventory.push({ path: `model/${name}`, size: bytes.byteLength, sha256: sha256Hex(bytes) });
  }
  await manager.commitSave(session, { inventory });
  await manager.finalize();

  const artifact = await openStore(session.dir, { credentials: credentials() });
  const fetched = await fetchArtifact(artifact, await tempRoot());
  for (const entry of inventory) {
    const staged = await readFile(join(fetched.stagedDir, entry.path));
    expect(sha256Hex(staged)).toBe(entry.sha256);
  }
  const shard = inventory.find((e) => e.path.endsWith(".distcp"))!;
  await artifact.put(shard.path, randomBytes(shard.size));
  await expect(fetchArtifact(artifact, await tempRoot())).rejects.toMatchObject({
    code: "READER_DOWNLOAD_MISMATCH",
  });
});
