import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";

async function hfDir(): Promise<string> {
  const dir = await testdir("ckpt-cli-fingerprint-");
  await writeFile(join(dir, "config.json"), '{"hidden_size": 8}\n');
  await writeFile(join(dir, "model.safetensors"), "W".repeat(4096));
  return dir;
}

describe("ckpt fingerprint", () => {
  it("prints the digest first, the same on every run; --json lists every file", async () => {
    const dir = await hfDir();
    const a = captureIo();
    const b = captureIo();
    expect(await runCli(["fingerprint", dir], a.io)).toBe(0);
    expect(await runCli(["fingerprint", dir], b.io)).toBe(0);
    const digest = a.out().trimEnd();
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(b.out()).toBe(`${digest}\n`);
    expect(a.err()).toBe("ckpt.fingerprint.v1, full: 2 files, 4.0 KiB\n");
    const j = captureIo();
    expect(await runCli(["fingerprint", dir, "--json"], j.io)).toBe(0);
    expect(JSON.parse(j.out())).toMatchObject({
      ok: true,
      fingerprint: digest,
      mode: "full",
      files: [
        { path: "config.json", size: 19 },
        { path: "model.safetensors", size: 4096 },
      ],
    });
  });

  it("--fast identifies weight files by size: a changed weight byte keeps it, a changed config does not", async () => {
    const dir = await hfDir();
    const run = async (...args: string[]) => {
      const c = captureIo();
      expect(await runCli(["fingerprint", dir, ...args], c.io)).toBe(0);
      return c.out().split("\n")[0];
    };
    const [full, fast] = [await run(), await run("--fast")];
    expect(fast).not.toBe(full);
    await writeFile(join(dir, "model.safetensors"), `X${"W".repeat(4095)}`);
    expect(await run("--fast")).toBe(fast);
    expect(await run()).not.toBe(full);
    await writeFile(join(dir, "config.json"), '{"hidden_size": 9}\n');
    expect(await run("--fast")).not.toBe(fast);
  });

  it("refuses a symlink leading outside (exit 1, PATH_ESCAPES_ROOT) and a non-directory (exit 2)", async () => {
    const dir = await hfDir();
    await mkdir(join(dir, "tokenizer"));
    await symlink("/etc/hostname", join(dir, "tokenizer", "vocab.txt"));
    const escaped = captureIo();
    expect(await runCli(["fingerprint", dir, "--json"], escaped.io)).toBe(1);
    expect(JSON.parse(escaped.out()).error.code).toBe("PATH_ESCAPES_ROOT");
    const file = captureIo();
    expect(await runCli(["fingerprint", join(dir, "config.json"), "--json"], file.io)).toBe(2);
    expect(JSON.parse(file.out()).error.code).toBe("FINGERPRINT_NOT_A_DIRECTORY");
  });
});
