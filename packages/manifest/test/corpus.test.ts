import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { open, symlink } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  UPLOADED_MARKER,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
  LATEST_POINTER,
} from "../src/index.js";

const CORPUS = join(import.meta.dirname, "corpus");
/** A hostile record must be refused quickly: parsing is linear and every size is capped. */
const MAX_CASE_MS = 1500;

const READERS: Record<string, (path: string) => Promise<unknown>> = {
  "artifact-manifest": ARTIFACT_MANIFEST.read,
  "archive-declaration": ARCHIVE_DECLARATION.read,
  uploaded: UPLOADED_MARKER.read,
  staged: STAGED_RECORD.read,
  "merge-complete": MERGE_COMPLETE.read,
  materialized: MATERIALIZED_MARKER.read,
  "overlay-source": OVERLAY_SOURCE.read,
  "control-manifest": CONTROL_MANIFEST.read,
  "multi-role-success": MULTI_ROLE_SUCCESS.read,
  "latest-pointer": LATEST_POINTER.read,
};

type Expected = Record<string, { record: string; code: string; note: string }>;
const expected: Expected = JSON.parse(readFileSync(join(CORPUS, "expected.json"), "utf8"));

async function refusal(read: (path: string) => Promise<unknown>, path: string) {
  const started = performance.now();
  let caught: unknown;
  try {
    await read(path);
  } catch (error) {
    caught = error;
  }
  return {
    error: caught as { code?: string; message?: string } | undefined,
    ms: performance.now() - started,
  };
}

describe("hostile record corpus", () => {
  it("has at least 40 cases, each with a known reader", () => {
    expect(Object.keys(expected).length).toBeGreaterThanOrEqual(40);
    for (const c of Object.values(expected)) expect(Object.keys(READERS)).toContain(c.record);
  });

  it.each(Object.entries(expected))("%s is refused with its code", async (file, c) => {
    const path = join(CORPUS, file);
    const { error, ms } = await refusal(READERS[c.record]!, path);
    expect(error, `${file} (${c.note}) was accepted`).toBeDefined();
    expect(error?.code, `${file}: ${error?.message}`).toBe(c.code);
    expect(error?.message).toContain(file);
    expect(ms).toBeLessThan(MAX_CASE_MS);
  });
});

describe("files that must be refused without being read", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await testdir("ckpt-corpus-");
  });

  it("refuses a 1 GiB sparse 'manifest' by its size, fast", async () => {
    const path = join(dir, ".posttrain-checkpoint-artifact.json");
    const handle = await open(path, "w");
    await handle.truncate(1024 ** 3);
    await handle.close();
    const { error, ms } = await refusal(ARTIFACT_MANIFEST.read, path);
    expect(error).toMatchObject({ code: "RECORD_TOO_LARGE" });
    expect(error?.message).toContain(path);
    expect(ms).toBeLessThan(200);
  });

  it("refuses a FIFO planted under a record name instead of blocking on it", async () => {
    const path = join(dir, ".staged.json");
    execFileSync("mkfifo", [path]);
    const { error, ms } = await refusal(STAGED_RECORD.read, path);
    expect(error).toMatchObject({ code: "RECORD_NOT_A_FILE" });
    expect(ms).toBeLessThan(MAX_CASE_MS);
  });

  it.each(Object.entries(READERS))(
    "%s: a link to /dev/zero under its name is refused, not read unbounded",
    { timeout: 5000 },
    async (record, read) => {
      const path = join(dir, `${record}-zero`);
      await symlink("/dev/zero", path);
      const { error } = await refusal(read, path);
      expect(error).toMatchObject({ code: "RECORD_NOT_A_FILE" });
      expect(error?.message).toContain(path);
    },
  );
});
