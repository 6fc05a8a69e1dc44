import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { createProgress } from "../src/progress.js";
import { resolveStoreDefaults } from "../src/store-options.js";
import { captureIo } from "./helpers/capture.js";

async function home(config?: string): Promise<string> {
  const dir = await testdir("ckpt-cli-home-");
  if (config !== undefined) {
    await mkdir(join(dir, ".config", "ckpt"), { recursive: true });
    await writeFile(join(dir, ".config", "ckpt", "config.json"), config);
  }
  return dir;
}

describe("--bucket and --credentials defaults", () => {
  it("prefers the flag, then the environment, then the config file", async () => {
    const HOME = await home(JSON.stringify({ bucket: "from-file", credentials: "/file/creds.json" }));
    const fileOnly = captureIo({ env: { HOME } });
    expect(resolveStoreDefaults({}, fileOnly.io)).toEqual({
      bucket: "from-file",
      credentials: "/file/creds.json",
    });
    const withEnv = captureIo({ env: { HOME, CKPT_BUCKET: "from-env" } });
    expect(resolveStoreDefaults({}, withEnv.io)).toEqual({
      bucket: "from-env",
      credentials: "/file/creds.json",
    });
    expect(resolveStoreDefaults({ bucket: "flag", credentials: "/flag.json" }, withEnv.io)).toEqual({
      bucket: "flag",
      credentials: "/flag.json",
    });
  });

  it("has no default at all without flag, environment or config file", async () => {
    const HOME = await home();
    expect(resolveStoreDefaults({}, captureIo({ env: { HOME } }).io)).toEqual({
      bucket: undefined,
      credentials: undefined,
    });
  });

  it("refuses a malformed config file by name, as a usage error", async () => {
    const HOME = await home("{ not json");
    expect(() => resolveStoreDefaults({}, captureIo({ env: { HOME } }).io)).toThrow(
      expect.objectContaining({ code: "CLI_USAGE", message: expect.stringContaining("config.json") }),
    );
    const typed = await home(JSON.stringify({ bucket: 7 }));
    expect(() => resolveStoreDefaults({}, captureIo({ env: { HOME: typed } }).io)).toThrow(
      /"bucket" must be a string/,
    );
  });

  it("refuses a CKPT_CONFIG that names a missing file", async () => {
    const HOME = await home();
    const io = captureIo({ env: { HOME, CKPT_CONFIG: join(HOME, "missing.json") } }).io;
    expect(() => resolveStoreDefaults({}, io)).toThrow(/missing\.json/);
  });
});

describe("progress display", () => {
  it("draws on an interactive stderr and clears the line when finished", () => {
    const { io, err, out } = captureIo({ interactive: true });
    const progress = createProgress(io, "upload");
    progress.update(512, 1024, "model.pt");
    progress.update(1024, 1024);
    progress.finish();
    expect(err()).toContain("upload [");
    expect(err()).toContain("1.0 KiB/1.0 KiB");
    expect(err().endsWith("\r\x1b[2K")).toBe(true);
    expect(out()).toBe("");
  });

  it("stays silent when stderr is not a terminal or --quiet is given", () => {
    const piped = captureIo({ interactive: false });
    createProgress(piped.io, "upload").update(1, 2);
    const quiet = captureIo({ interactive: true });
    createProgress(quiet.io, "upload", { quiet: true }).update(1, 2);
    expect(piped.err() + quiet.err()).toBe("");
  });
});
