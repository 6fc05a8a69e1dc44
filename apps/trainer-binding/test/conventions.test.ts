// ckpt-trainer keeps ckpt's command-line conventions (through the built dist/bin.js): the real
// --version, -h and `help <command>` on every command with its exit codes, suggestions, and the
// same failure rendering.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "dist", "bin.js");

function trainer(args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [BIN, ...args], (error, out, err) =>
      done({ code: error === null ? 0 : Number(error.code), out, err }),
    );
  });
}

describe("ckpt-trainer's conventions", () => {
  it("--version prints apps/trainer-binding/package.json's version", async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    expect(await trainer(["--version"])).toMatchObject({ code: 0, out: `${version}\n` });
  });

  it.each(["serve", "data", "slurm-template", "python-path"])(
    "ckpt-trainer %s: -h and help <command> print its help with its exit codes",
    async (command) => {
      const [short, viaHelp] = await Promise.all([trainer([command, "-h"]), trainer(["help", command])]);
      for (const run of [short, viaHelp]) {
        expect(run.code).toBe(0);
        expect(run.out.startsWith(`ckpt-trainer ${command}`)).toBe(true);
        expect(run.out).toMatch(/\n\nExit codes: 0 ok; 1 [\s\S]*; 2 bad usage[\s\S]*\.\n$/);
      }
      expect(viaHelp.out).toBe(short.out);
    },
  );

  it("a mistyped command or flag gets a suggestion and exits 2", async () => {
    const command = await trainer(["serv"]);
    expect(command.code).toBe(2);
    expect(command.err).toBe("ckpt-trainer: Did you mean serve?\nRun `ckpt-trainer --help` for usage.\n");
    const flag = await trainer(["slurm-template", "--grace-secnds", "900"]);
    expect(flag.code).toBe(2);
    expect(flag.err).toContain("Unknown option --grace-secnds: did you mean --grace-seconds?");
  });

  it("a refusal names its error code, as ckpt does", async () => {
    const run = await trainer(["slurm-template", "--grace-seconds", "5"]);
    expect(run.code).toBe(2);
    expect(run.err).toMatch(
      /\nckpt-trainer: error code TEMPLATE_OPTION_INVALID \(docs\/troubleshooting\.md\)\n$/,
    );
  });
});
