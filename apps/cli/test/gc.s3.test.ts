// @module-tag s3
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  createTestBucket,
  openMultipartUploads,
  s3TestEnv,
  startIncompleteUpload,
  testCredentials,
  testdir,
} from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

const env = s3TestEnv();
let bucket = "";
let cleanup: () => Promise<void> = async () => {};
beforeAll(async () => {
  ({ bucket, cleanup } = await createTestBucket(env, "cli-gc"));
});
afterAll(() => cleanup());

interface Item {
  path: string;
  kind: string;
  bytes: number;
  ours: boolean;
  action: string;
  reason: string;
}

async function credentialsFile(): Promise<string> {
  const path = join(await testdir("ckpt-cli-gc-s3-"), "creds.json");
  await writeFile(path, JSON.stringify(testCredentials(env)));
  return path;
}

async function gc(args: string[], credentials: string) {
  const c = captureIo({ env: { HOME: "/nonexistent" } });
  const code = await runCli(["gc", ...args, "--credentials", credentials, "--json"], c.io);
  return { code, report: JSON.parse(c.out()) as { items: Item[] } & Record<string, unknown> };
}

describe("ckpt gc on S3", () => {
  it("lists an incomplete multipart upload under the prefix, aborts it with --apply, and leaves one outside", async () => {
    const credentials = await credentialsFile();
    const part = Buffer.alloc(5 * 1024 * 1024, 7);
    await startIncompleteUpload(env, bucket, "proj/run-a/iter_1/model.pt", part);
    await startIncompleteUpload(
      env,
      bucket,
      "proj/run-ab/model.pt",
      Buffer.from("outside: a sibling prefix"),
    );
    await startIncompleteUpload(env, bucket, "other/model.pt", Buffer.from("outside"));
    const uri = `s3://${bucket}/proj/run-a`;

    const listed = await gc([uri, "--older-than", "0s"], credentials);
    expect(listed.code).toBe(0);
    expect(listed.report).toMatchObject({ ok: true, dry_run: true, would_free_bytes: part.length });
    expect(listed.report.items).toEqual([
      expect.objectContaining({
        kind: "incomplete-upload",
        path: `${uri}/iter_1/model.pt`,
        bytes: part.length,
        ours: true,
        action: "would abort",
      }),
    ]);
    expect(await openMultipartUploads(env, bucket)).toEqual([
      "other/model.pt",
      "proj/run-a/iter_1/model.pt",
      "proj/run-ab/model.pt",
    ]);

    // The default age keeps an upload started a moment ago: it may still be running.
    const young = await gc([uri, "--apply"], credentials);
    expect(young.report.items[0]).toMatchObject({
      action: "kept",
      reason: expect.stringMatching(/in flight/),
    });
    expect(await openMultipartUploads(env, bucket)).toHaveLength(3);

    const applied = await gc([uri, "--apply", "--older-than", "0s"], credentials);
    expect(applied.report).toMatchObject({ ok: true, dry_run: false, freed_bytes: part.length });
    expect(applied.report.items[0]?.action).toBe("aborted");
    expect(await openMultipartUploads(env, bucket)).toEqual(["other/model.pt", "proj/run-ab/model.pt"]);
  });
});
