// The one step that puts ckpt and ckpt-trainer on PATH (tools/install-bin.sh), and the bash
// completion `ckpt completion` prints, driven as bash drives it (COMP_WORDS, COMP_CWORD).
import { execFile } from "node:child_process";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../helpers/crash.js";

const run = promisify(execFile);
let prefix = "";
let env: NodeJS.ProcessEnv = {};

beforeAll(async () => {
  prefix = await testdir("ckpt-install-bin-");
  await run("bash", [join(REPO_ROOT, "tools", "install-bin.sh"), prefix]);
  // Only the temporary prefix and node's own directory on PATH: nothing else can answer for ckpt.
  env = { PATH: `${join(prefix, "bin")}:${join(process.execPath, "..")}:/usr/bin:/bin`, HOME: prefix };
});

async function versionOf(dir: string): Promise<string> {
  return JSON.parse(await readFile(join(REPO_ROOT, dir, "package.json"), "utf8")).version;
}

/** What bash completes for the last of `words` (the word being typed), through `ckpt completion`. */
async function complete(words: string[]): Promise<string[]> {
  const script = [
    "source <(ckpt completion)",
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
    `COMP_CWORD=${words.length - 1}`,
    "_ckpt_yargs_completions",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's own expansion, not a template
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join("\n");
  const { stdout } = await run("bash", ["-c", script], { env });
  return stdout.split("\n").filter((w) => w !== "");
}

describe("tools/install-bin.sh", () => {
  it("puts runnable ckpt and ckpt-trainer in <prefix>/bin", async () => {
    const ckpt = await run("ckpt", ["--version"], { env });
    expect(ckpt.stdout).toBe(`${await versionOf("apps/cli")}\n`);
    const trainer = await run("ckpt-trainer", ["--version"], { env });
    expect(trainer.stdout).toBe(`${await versionOf("apps/trainer-binding")}\n`);
    // ckpt-trainer finds its shipped Python client through the link.
    const python = await run("ckpt-trainer", ["python-path"], { env });
    await expect(readFile(join(python.stdout.trim(), "ckpt_trainer_client.py"), "utf8")).resolves.toContain(
      "ckpt",
    );
  });

  it("refuses, naming the fix, when the apps are not built", async () => {
    const fake = await testdir("ckpt-install-unbuilt-");
    await mkdir(join(fake, "tools"));
    await copyFile(join(REPO_ROOT, "tools", "install-bin.sh"), join(fake, "tools", "install-bin.sh"));
    const failed = await run("bash", [join(fake, "tools", "install-bin.sh"), join(fake, "prefix")]).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed).toMatchObject({ code: 1, stderr: expect.stringContaining("build first: pnpm build") });
  });
});

describe("ckpt completion (bash)", () => {
  it("completes a command name, a subcommand and a flag", async () => {
    expect(await complete(["ckpt", "artif"])).toEqual(["artifact"]);
    expect(await complete(["ckpt", "artifact", "pu"])).toEqual(["publish"]);
    expect(await complete(["ckpt", "verify", "--fin"])).toEqual(["--finite"]);
  });
});
