// The built bundles carry their package.json's version (tsup's define): the manager records it as
// its producer and `ckpt --version` prints it.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { MANAGER_VERSION } from "@ckpt/trainer-checkpoint-manager";
import { describe, expect, it } from "vitest";
import { CLI_BIN, REPO_ROOT } from "../helpers/crash.js";

const run = promisify(execFile);

async function versionOf(dir: string): Promise<string> {
  return JSON.parse(await readFile(join(REPO_ROOT, dir, "package.json"), "utf8")).version;
}

describe("versions in the built packages", () => {
  it("MANAGER_VERSION is @ckpt/trainer-checkpoint-manager's package.json version", async () => {
    expect(MANAGER_VERSION).toBe(await versionOf("packages/trainer-checkpoint-manager"));
  });

  it("ckpt --version prints apps/cli's package.json version", async () => {
    const { stdout } = await run(process.execPath, [CLI_BIN, "--version"]);
    expect(stdout).toBe(`${await versionOf("apps/cli")}\n`);
  });
});
