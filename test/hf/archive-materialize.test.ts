// @module-tag torch
// @module-tag s3
// `ckpt materialize-hf --artifact-uri` against the real S3 server (Ceph RGW): the remote
// manifest's model descriptor decides the skip; the artifact is fetched (digest-checked) only for
// a build; staging defaults to <out>.stage and only what the run created is removed.
import { access, mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { publishArtifact } from "@ckpt/archive-publisher";
import { openStore } from "@ckpt/object-store";
import {
  createTestBucket,
  makeHfFixture,
  makeModelArtifact,
  makeTempDir,
  materializeHfArgs,
  s3TestEnv,
  TORCH_FIXTURE_TIMEOUT_MS,
  testCredentials,
} from "@ckpt/test-utils";
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
});
