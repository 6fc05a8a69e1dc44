import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { openStore } from "@ckpt/object-store";
import { testdir } from "@ckpt/test-utils";
import { beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { publishFixture } from "./helpers/archive-fixture.js";
import { captureIo } from "./helpers/capture.js";

let dir = "";
beforeEach(async () => {
  dir = await testdir("ckpt-cli-verify-");
});

async function published(name: string) {
  const store = await openStore(`memory://${name}/proj/checkpoint_artifacts/iter_000000300`);
  const fixture = await publishFixture(store);
  const iterDir = join(dir, "iter_000000300");
  await mkdir(iterDir);
  await writeFile(join(iterDir, ".uploaded"), fixture.receipt(store.identity));
  return { store, iterDir };
}

describe("ckpt artifact verify", () => {
  it("exits 0 when every recorded object is live, naming the destination", async () => {
    const { iterDir } = await published("cli-verify-ok");
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir], c.io)).toBe(0);
    expect(c.out()).toContain(
      "verified 2 objects at memory://cli-verify-ok/proj/checkpoint_artifacts/iter_000000300",
    );
  });

  it("verifies a file:// archive from the receipt alone", async () => {
    const archive = join(dir, "archive", "checkpoint_artifacts", "iter_000000300");
    const store = await openStore(`file://${archive}`);
    const fixture = await publishFixture(store);
    const iterDir = join(dir, "iter_000000300");
    await mkdir(iterDir);
    await writeFile(join(iterDir, ".uploaded"), fixture.receipt(store.identity));
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir, "--json"], c.io)).toBe(0);
    expect(JSON.parse(c.out())).toMatchObject({
      ok: true,
      uri: `file://${archive}`,
      destination: { scheme: "file", bucket: archive },
    });
  });

  it("mentions what ckpt left beside the archive (one line, and leftovers in JSON) and points to ckpt gc", async () => {
    const archive = join(dir, "archive", "checkpoint_artifacts", "iter_000000300");
    const store = await openStore(`file://${archive}`);
    const fixture = await publishFixture(store);
    const iterDir = join(dir, "iter_000000300");
    await mkdir(iterDir);
    await writeFile(join(iterDir, ".uploaded"), fixture.receipt(store.identity));
    const clean = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir, "--json"], clean.io)).toBe(0);
    expect(JSON.parse(clean.out()).leftovers).toEqual({ count: 0, bytes: 0, gc: `ckpt gc ${archive}` });
    // What a publish interrupted mid-write leaves: a file store temporary.
    await writeFile(join(archive, ".ckpt-tmp.0123456789abcdef"), Buffer.alloc(3000));
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir, "--json"], c.io)).toBe(0);
    expect(JSON.parse(c.out()).leftovers).toEqual({ count: 1, bytes: 3000, gc: `ckpt gc ${archive}` });
    const human = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir], human.io)).toBe(0);
    expect(human.out().trimEnd().split("\n").at(-1)).toBe(
      `leftovers: 1 item (2.9 KiB) ckpt left beside the archive; \`ckpt gc ${archive}\` lists them, --apply removes them`,
    );
  });

  it("exits 1 and names the object when one is missing; --json carries the problems", async () => {
    const { store, iterDir } = await published("cli-verify-missing");
    await store.delete("model.pt");
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir, "--json"], c.io)).toBe(1);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({ ok: false, problems: [{ path: "model.pt", status: "missing" }] });
    const human = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", iterDir], human.io)).toBe(1);
    expect(human.out()).toMatch(/model\.pt\s+missing/);
  });

  it("exits 2 without a receipt and 1 for a legacy receipt", async () => {
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", dir], c.io)).toBe(2);
    expect(c.err()).toContain(".uploaded");
    await writeFile(join(dir, ".uploaded"), "uploaded\n");
    const legacy = captureIo();
    expect(await runCli(["artifact", "verify", "--artifact-dir", dir, "--json"], legacy.io)).toBe(1);
    expect(JSON.parse(legacy.out()).error.code).toBe("READER_LEGACY_RECEIPT");
  });

  it("recomputes the destination with the supplied credentials' endpoint and refuses another one, without secrets", async () => {
    const destination = {
      scheme: "s3",
      endpoint: "s3.archive.example.com",
      bucket: "ckpt-bkt",
      prefix: "p/checkpoint_artifacts/iter_000000300",
    } as const;
    const store = await openStore("memory://cli-verify-s3/x/iter_000000300");
    const fixture = await publishFixture(store);
    await writeFile(join(dir, ".uploaded"), fixture.receipt(destination));
    const creds = join(dir, "creds.json");
    await writeFile(
      creds,
      JSON.stringify({
        aws_access_key_id: "AKIDSECRETID",
        aws_secret_access_key: "very-secret-key",
        endpoint_url: "http://127.0.0.1:9",
        region_name: "us-east-1",
      }),
    );
    const c = captureIo();
    expect(
      await runCli(["artifact", "verify", "--artifact-dir", dir, "--credentials", creds, "--json"], c.io),
    ).toBe(1);
    const out = JSON.parse(c.out());
    expect(out.error.code).toBe("READER_RECEIPT_DESTINATION_MISMATCH");
    expect(out.error.message).toContain("s3.archive.example.com");
    expect(out.error.message).toContain("127.0.0.1:9");
    expect(c.out()).not.toContain("very-secret-key");
    expect(c.out()).not.toContain("AKIDSECRETID");
  });

  it("documents itself with examples", async () => {
    const c = captureIo();
    expect(await runCli(["artifact", "verify", "--help"], c.io)).toBe(0);
    expect(c.out()).toContain("--artifact-dir");
    expect(c.out()).toContain("Examples:");
  });
});
