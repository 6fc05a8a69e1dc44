import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { smallDisk, testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

describe("ckpt doctor object-store", () => {
  it("qualifies a file:// store: exit 0 and a JSON report of every check", async () => {
    const dir = await testdir();
    const c = captureIo();
    expect(await runCli(["doctor", "object-store", `file://${dir}/archive`, "--json"], c.io)).toBe(0);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({
      ok: true,
      qualified: true,
      uri: `file://${dir}/archive`,
      identity: { scheme: "file", endpoint: "local", bucket: `${dir}/archive`, prefix: "" },
    });
    expect(report.checks.map((x: { name: string }) => x.name)).toEqual([
      "conditional-create",
      "sha256-metadata",
      "ranged-get",
      "multipart-put",
      "multipart-conditional-create",
      "list",
      "delete",
    ]);
  });

  it("prints a table of checks and the verdict for humans", async () => {
    const c = captureIo();
    expect(await runCli(["doctor", "object-store", "memory://doctor-human/p"], c.io)).toBe(0);
    const lines = c.out().trimEnd().split("\n");
    expect(lines[0]).toBe("memory://doctor-human/p (endpoint doctor-human, bucket doctor-human, prefix p)");
    expect(lines[2]).toMatch(/^check\s+result\s+kind\s+time\s+detail$/);
    expect(lines[3]).toMatch(/^conditional-create\s+ok\s+required\s+\d+ ms\s+single PUT/);
    expect(lines.at(-1)).toBe("qualified: ckpt can publish archives to this store.");
  });

  it("exits 1 with the failed checks when the store cannot be qualified", async () => {
    const dir = await testdir();
    await writeFile(join(dir, "not-a-dir"), "x");
    const c = captureIo();
    expect(await runCli(["doctor", "object-store", `file://${dir}/not-a-dir/archive`], c.io)).toBe(1);
    expect(c.out()).toContain("FAIL");
    expect(c.out()).toMatch(/NOT qualified \(conditional-create, sha256-metadata, .*\)/);
  });

  it("exits 2 for a bad URI, naming it, in JSON and on stderr", async () => {
    const json = captureIo();
    expect(await runCli(["doctor", "object-store", "file://relative/dir", "--json"], json.io)).toBe(2);
    expect(JSON.parse(json.out())).toMatchObject({ ok: false, error: { code: "STORE_BAD_URI" } });
    const human = captureIo();
    expect(await runCli(["doctor", "object-store", "s3://user:hunter2pass@bucket/p"], human.io)).toBe(2);
    expect(human.err()).toContain("credentials do not belong in a URI");
    expect(human.err()).not.toContain("hunter2pass");
  });

  it("exits 2 for an unreadable credentials file without echoing its contents", async () => {
    const dir = await testdir();
    const path = join(dir, "creds.secret");
    await writeFile(path, '{"aws_secret_access_key": "topsecretvalue",');
    const c = captureIo();
    expect(
      await runCli(["doctor", "object-store", "s3://bucket/p", "--credentials", path, "--json"], c.io),
    ).toBe(2);
    const out = JSON.parse(c.out());
    expect(out.error).toMatchObject({
      code: "STORE_BAD_CREDENTIALS",
      message: expect.stringContaining(path),
    });
    expect(c.out()).not.toContain("topsecretvalue");
  });

  it("exits 2 for an unknown check and teaches with an example under --help", async () => {
    expect(await runCli(["doctor", "disk", "file:///tmp/x"], captureIo().io)).toBe(2);
    const group = captureIo();
    expect(await runCli(["doctor", "--help"], group.io)).toBe(0);
    expect(group.out()).toMatch(/ckpt doctor object-store <uri>[\s\S]*ckpt doctor volume <dir>/);
    const help = captureIo();
    expect(await runCli(["doctor", "object-store", "--help"], help.io)).toBe(0);
    expect(help.out()).toContain("ckpt doctor object-store s3://ckpt-archive/runs");
    expect(help.out()).toContain("--credentials");
  });

  it("takes the credentials from $CKPT_CREDENTIALS like every store command", async () => {
    const dir = await testdir();
    const path = join(dir, "creds.secret");
    await writeFile(path, '{"aws_secret_access_key": "topsecretvalue",');
    const c = captureIo({ env: { HOME: dir, CKPT_CREDENTIALS: path } });
    expect(await runCli(["doctor", "object-store", "s3://bucket/p", "--json"], c.io)).toBe(2);
    expect(JSON.parse(c.out()).error).toMatchObject({ code: "STORE_BAD_CREDENTIALS" });
  });
});

describe("ckpt doctor volume", () => {
  it("probes a local directory: every step ok, the tier and its promise, exit 0; --expect shared fails it", async () => {
    const dir = await testdir();
    const c = captureIo();
    expect(await runCli(["doctor", "volume", dir, "--json"], c.io)).toBe(0);
    const report = JSON.parse(c.out());
    expect(report).toMatchObject({
      ok: true,
      probe_ok: true,
      tier: "local",
      known: true,
      expect: "any",
      reasons: [],
    });
    expect(report.steps.map((s: { name: string }) => s.name)).toEqual([
      "write",
      "fsync-file",
      "rename",
      "fsync-dir",
      "read-back",
      "cleanup",
    ]);
    const shared = captureIo();
    expect(await runCli(["doctor", "volume", dir, "--expect", "shared"], shared.io)).toBe(1);
    expect(shared.out()).toMatch(
      /NOT sound:\n {2}- \S+ is local: other nodes cannot read what is written here/,
    );
  });

  it("prints the volume, one row per step and the promise for humans", async () => {
    const dir = await testdir();
    const c = captureIo();
    expect(await runCli(["doctor", "volume", dir], c.io)).toBe(0);
    const lines = c.out().trimEnd().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^${dir}: \\S+ mounted at /\\S* from \\S+ \\(mountinfo\\)$`));
    expect(lines[2]).toMatch(/^step\s+result\s+time\s+detail$/);
    expect(lines[3]).toMatch(/^write\s+ok\s+[\d.]+ ms\s+1048576 bytes to /);
    expect(lines.at(-1)).toBe("sound: ckpt's commit sequence holds on this volume.");
  });

  it("a real tmpfs is volatile: not sound (exit 1), and no power-cut promise is printed", async () => {
    const disk = await smallDisk(4 * 1024 * 1024);
    const c = captureIo();
    expect(await runCli(["doctor", "volume", disk], c.io)).toBe(1);
    expect(c.out()).toMatch(/^volatile: held in memory: .*not a power cut/m);
    expect(c.out()).not.toMatch(/power cut once fsync returns/);
    expect(c.out()).toMatch(/NOT sound:\n {2}- tmpfs is volatile: /);
  });

  it("a volume nothing can be written to fails with the step named (exit 1); a missing directory is exit 2", async () => {
    const c = captureIo();
    expect(await runCli(["doctor", "volume", "/proc"], c.io)).toBe(1);
    expect(c.out()).toMatch(/^write\s+FAIL/m);
    const missing = captureIo();
    expect(await runCli(["doctor", "volume", "/nonexistent/ckpt", "--json"], missing.io)).toBe(2);
    expect(JSON.parse(missing.out()).error.code).toBe("STORAGE_PROBE_NOT_A_DIRECTORY");
  });
});
