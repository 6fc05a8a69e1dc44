import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { parseExports, type S3TestEnv } from "./s3-env.js";

const run = promisify(execFile);
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const script = join(repoRoot, "tools/s3-server/ceph-s3.sh");

/** A port the kernel reports free right now (the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("no port"));
      });
    });
  });
}

function envFromProcess(): S3TestEnv | undefined {
  const e = process.env;
  if (!e.AWS_ENDPOINT_URL || !e.AWS_ACCESS_KEY_ID || !e.AWS_SECRET_ACCESS_KEY || !e.CKPT_TEST_S3_BUCKET) {
    return undefined;
  }
  return {
    endpoint: e.AWS_ENDPOINT_URL,
    accessKeyId: e.AWS_ACCESS_KEY_ID,
    secretAccessKey: e.AWS_SECRET_ACCESS_KEY,
    region: e.AWS_REGION ?? "us-east-1",
    bucket: e.CKPT_TEST_S3_BUCKET,
  };
}

/**
 * The S3 tests need a real server. When the environment names one (CI runs
 * `eval "$(tools/s3-server/ceph-s3.sh start)"` first) it is used; otherwise a private Ceph
 * instance is started here on free ports and stopped after the run, so no test is skipped.
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = envFromProcess();
  if (given !== undefined) {
    project.provide("s3Env", given);
    return undefined;
  }
  const dir = `/tmp/ckpt-test-ceph-${process.pid}`;
  const env = {
    ...process.env,
    CEPH_S3_DIR: dir,
    CEPH_S3_PORT: String(await freePort()),
    CEPH_S3_MON_PORT: String(await freePort()),
  };
  const { stdout } = await run(script, ["start"], { env, timeout: 300_000 });
  project.provide("s3Env", parseExports(stdout));
  return async () => {
    await run(script, ["stop"], { env, timeout: 60_000 });
  };
}
