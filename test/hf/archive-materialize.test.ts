// @module-tag torch
// @module-tag s3
// `ckpt materialize-hf --artifact-uri` against the real S3 server (Ceph RGW): the remote
// manifest's model descriptor decides the skip; the artifact is fetched (digest-checked) only for
// a build; staging defaults to <out>.stage and only what the run created is removed. A direct
// object-store primary's DCP artifact (torch 2's shards, committed with their digests as the ranks'
// data processes commit them) is refused before anything is fetched: the build converts model.pt.
import { access, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { publishArtifact } from "@ckpt/archive-publisher";
import { sha256Hex } from "@ckpt/manifest";
import { openStore } from "@ckpt/object-store";
import {
  createTestBucket,
  DCP_FIXTURE_TIMEOUT_MS,
  makeDcpFixtures,
  makeHfFixture,
  makeModelArtifact,
  makeTempDir,
  materializeHfArgs,
  s3TestEnv,
  TORCH_FIXTURE_TIMEOUT_MS,
  testCredentials,
  torch2Python,
} from "@ckpt/test-utils";
import { CheckpointManager, parseManagerConfig } from "@ckpt/trainer-checkpoint-manager";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, type RunResult, runNode } from "../helpers/crash.js";

let tmp: { dir: string; cleanup: () => Promise<void> };
let bucket: { bucket: string; cleanup: () => Promise<void> };
let base = "";
let uri = "";
let credentials = "";

beforeAll(async () => {
  tmp = await makeTempDir("ckpt-hf-archive-");
  const env = s3TestEnv();
  bucket = await createTestBucket(env, "materialize");
  credentials = join(tmp.dir, "credentials.json");
  await writeFile(credentials, JSON.stringify(testCredentials(env)));
  const fixture = await makeHfFixture(join(tmp.dir, "fx"), "moe", 1, 71);
  base = fixture.base;
  const artifact = await makeModelArtifact(join(tmp.dir, "run", "checkpoint_artifacts"), fixture.expert(0), {
    iteration: 300,
  });
  uri = `s3://${bucket.bucket}/proj/grp/run/20260901120000/checkpoint_artifacts/iter_000000300`;
  await publishArtifact(artifact, await openStore(uri, { credentials: testCredentials(env) }));
}, TORCH_FIXTURE_TIMEOUT_MS);
afterAll(async () => {
  await bucket?.cleanup();
  await tmp?.cleanup();
});

const materialize = (out: string, extra: string[] = []) =>
  runNode(cli(materializeHfArgs(uri, base, out, "--credentials", credentials, "--json", ...extra)));
const report = (r: RunResult) => JSON.parse(r.stdout);
const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

describe("materialize-hf from a real S3 archive", () => {
  it("fetches into <out>.stage to build, removes it, and skips on the descriptor without fetching", async () => {
    const out = join(tmp.dir, "out1", "teacher");
    const built = await materialize(out);
    expect(built.code, built.stderr).toBe(0);
    expect(report(built)).toMatchObject({
      action: "built",
      marker: { source: { source: uri }, tensors_verified: true },
      staging: { dir: join(`${out}.stage`, "iter_000000300") },
    });
    expect(await exists(`${out}.stage`)).toBe(false);
    const again = await materialize(out);
    expect(report(again), again.stdout).toMatchObject({ action: "skipped", staging: null });
    expect(await readdir(join(out, ".."))).toEqual(["teacher"]);
  }, 120_000);

  it("--keep-staged keeps what it fetched; a later run leaves a staging directory it did not create", async () => {
    const out = join(tmp.dir, "out2", "teacher");
    const stage = join(tmp.dir, "stage2");
    expect((await materialize(out, ["--stage-dir", stage, "--keep-staged"])).code).toBe(0);
    expect(await exists(join(stage, "iter_000000300", "model.pt"))).toBe(true);
    // A forced rebuild reuses the kept staging (its files still match) and leaves it in place.
    const forced = await materialize(out, ["--stage-dir", stage, "--force"]);
    expect(report(forced)).toMatchObject({ action: "built", staging: { removed: [] } });
    expect(await exists(join(stage, "iter_000000300", "model.pt"))).toBe(true);
  }, 120_000);

  it("a staging root holding other files is kept; only the artifact directory this run created goes", async () => {
    const out = join(tmp.dir, "out3", "teacher");
    const stage = join(tmp.dir, "stage3");
    await mkdir(stage, { recursive: true });
    await writeFile(join(stage, "someone-elses.txt"), "keep");
    const r = await materialize(out, ["--stage-dir", stage]);
    expect(report(r)).toMatchObject({
      action: "built",
      staging: { removed: [join(stage, "iter_000000300")] },
    });
    expect(await readdir(stage)).toEqual(["someone-elses.txt"]);
  }, 120_000);

  it(
    "refuses a direct-primary DCP artifact by name before fetching anything",
    async () => {
      const env = s3TestEnv();
      const dcp = join(tmp.dir, "dcp");
      await makeDcpFixtures(dcp, torch2Python(), [2]);
      const manager = await CheckpointManager.open({
        config: parseManagerConfig({
          checkpoint_format: "dcp",
          save_every: 1,
          checkpoint_components: ["model"],
          checkpoint_store: { backend: "object_store", bucket: bucket.bucket },
        }).config,
        outputRoot: join(tmp.dir, "direct"),
        project: "direct",
        group: "grp",
        name: "run",
        termination: { signals: false, sentinelPath: null },
        credentials: testCredentials(env),
      });
      let dir = "";
      try {
        const session = await manager.beginSave(3, manager.planSave(3, { cadence: true })!);
        const model = await openStore(session.targets.model!.replace(/\/+$/, ""), {
          credentials: testCredentials(env),
        });
        const inventory = [];
        for (const name of await readdir(join(dcp, "ranks2"))) {
          const bytes = await readFile(join(dcp, "ranks2", name));
          await model.put(name, bytes);
          inventory.push({ path: `model/${name}`, size: bytes.byteLength, sha256: sha256Hex(bytes) });
        }
        await manager.commitSave(session, { inventory });
        dir = session.dir;
      } finally {
        await manager.finalize();
      }
      const out = join(tmp.dir, "out-dcp", "teacher");
      const r = await runNode(cli(materializeHfArgs(dir, base, out, "--credentials", credentials, "--json")));
      expect(r.code, r.stderr).toBe(1);
      expect(`${r.stdout}${r.stderr}`).toMatch(/MATERIALIZE_SOURCE_NOT_ARTIFACT/);
      expect(`${r.stdout}${r.stderr}`).toMatch(/is a dcp artifact.*dcp_to_torch_save/);
      expect(await exists(`${out}.stage`)).toBe(false);
    },
    DCP_FIXTURE_TIMEOUT_MS,
  );
});
