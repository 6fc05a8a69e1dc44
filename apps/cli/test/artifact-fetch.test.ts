import { readFile, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { openStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { publishFixture } from "./helpers/archive-fixture.js";
import { captureIo } from "./helpers/capture.js";

let dir = "";
beforeEach(async () => {
  dir = await testdir("ckpt-cli-fetch-");
});

describe("ckpt artifact fetch", () => {
  it("prints the staged path and stages verified files from a file:// archive", async () => {
    const archive = join(dir, "archive", "checkpoint_artifacts", "iter_000000300");
    const uri = `file://${archive}`;
    const { model } = await publishFixture(await openStore(uri));
    const dst = join(dir, "stage");
    const c = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dst], c.io)).toBe(0);
    expect(c.out()).toBe(`${join(dst, "iter_000000300")}\n`);
    expect(new Uint8Array(await readFile(join(dst, "iter_000000300", "model.pt")))).toEqual(model);
    const again = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dst, "--json"], again.io)).toBe(
      0,
    );
    expect(JSON.parse(again.out())).toMatchObject({
      ok: true,
      up_to_date: true,
      staged_dir: join(dst, "iter_000000300"),
    });
  });

  it("prints nothing with --quiet, and the staged path first otherwise", async () => {
    const uri = "memory://cli-fetch-quiet/run/checkpoint_artifacts/iter_000000300";
    await publishFixture(await openStore(uri));
    const c = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dir, "--quiet"], c.io)).toBe(0);
    expect(c.out()).toBe("");
    const loud = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dir], loud.io)).toBe(0);
    expect(loud.out()).toBe(`${join(dir, "iter_000000300")}\n`);
    expect(loud.err()).toBe("already staged and verified\n");
  });

  it("exits 1 with READER_STAGE_FOREIGN over someone else's directory", async () => {
    const uri = "memory://cli-fetch-foreign/run/checkpoint_artifacts/iter_000000300";
    await publishFixture(await openStore(uri));
    await mkdir(join(dir, "iter_000000300"));
    await writeFile(join(dir, "iter_000000300", "mine.txt"), "x");
    const c = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dir, "--json"], c.io)).toBe(1);
    expect(JSON.parse(c.out()).error.code).toBe("READER_STAGE_FOREIGN");
    expect(await readFile(join(dir, "iter_000000300", "mine.txt"), "utf8")).toBe("x");
  });

  it("a --dst that is a file is a coded error with the fix, not a raw ENOTDIR (exit 2)", async () => {
    const archive = join(dir, "archive", "checkpoint_artifacts", "iter_000000300");
    const uri = `file://${archive}`;
    await publishFixture(await openStore(uri));
    const file = join(dir, "not-a-dir");
    await writeFile(file, "x");
    const c = captureIo();
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", file, "--json"], c.io)).toBe(2);
    const { error } = JSON.parse(c.out());
    expect(error.code).toBe("CLI_NOT_A_DIRECTORY");
    expect(error.message).toContain(file);
    expect(error.message).toMatch(/a file stands where a directory is needed.*Pass a directory/);
  });

  it("names the endpoint of a refused connection", async () => {
    const creds = join(dir, "creds.json");
    await writeFile(
      creds,
      JSON.stringify({
        aws_access_key_id: "AKIDEXAMPLE",
        aws_secret_access_key: "do-not-print-me",
        endpoint_url: "http://127.0.0.1:9",
      }),
    );
    const c = captureIo();
    const uri = "s3://bkt/p/checkpoint_artifacts/iter_000000300";
    expect(
      await runCli(
        ["artifact", "fetch", "--artifact-uri", uri, "--dst", join(dir, "st"), "--credentials", creds],
        c.io,
      ),
    ).toBe(1);
    expect(c.err()).toContain("ECONNREFUSED reaching http://127.0.0.1:9");
    expect(c.err()).not.toContain("do-not-print-me");
  }, 60_000);

  it("explains file:// for a --bucket that is a plain path (exit 2)", async () => {
    const c = captureIo();
    const args = [
      "artifact",
      "publish",
      "--artifact-dir",
      join(dir, "checkpoint_artifacts", "iter_000000300"),
    ];
    expect(
      await runCli([...args, "--upload-prefix", "p/g/n/1/checkpoints", "--bucket", "/plain/path"], c.io),
    ).toBe(2);
    expect(c.err()).toContain("--bucket /plain/path is a path, not a bucket name");
    expect(c.err()).toContain("file:///plain/path");
  });

  it("exits 2 for a malformed URI", async () => {
    const c = captureIo();
    expect(
      await runCli(["artifact", "fetch", "--artifact-uri", "s3://user:pw@bkt/x", "--dst", dir], c.io),
    ).toBe(2);
    expect(c.err()).not.toContain("pw@");
  });

  it("draws progress on a terminal only", async () => {
    const uri = "memory://cli-fetch-tty/run/checkpoint_artifacts/iter_000000300";
    await publishFixture(await openStore(uri));
    const c = captureIo({ interactive: true });
    expect(await runCli(["artifact", "fetch", "--artifact-uri", uri, "--dst", dir], c.io)).toBe(0);
    expect(c.err()).toContain("fetch [");
  });
});
