import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { colorAllowed } from "../src/io.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { runnableCommands } from "./helpers/registry.js";

/** Every runnable command as the words that name it (`["artifact", "publish"]`). */
const ALL = runnableCommands().map((name) => name.split(" "));

describe("every command keeps the CLI contract (new commands are picked up from the registry)", () => {
  it("the registry lists the operator commands", () => {
    expect(ALL.map((w) => w.join(" "))).toEqual(
      expect.arrayContaining([
        "verify",
        "fingerprint",
        "estimate",
        "doctor object-store",
        "doctor volume",
        "inspect",
      ]),
    );
  });

  it("ckpt --version prints apps/cli/package.json's version", async () => {
    const { version } = JSON.parse(await readFile(join(import.meta.dirname, "..", "package.json"), "utf8"));
    const c = captureIo();
    expect(await runCli(["--version"], c.io)).toBe(0);
    expect(c.out()).toBe(`${version}\n`);
  });

  it.each(ALL.map((words) => [words.join(" "), words]))(
    "ckpt %s --help: usage, --json, --quiet and an example",
    async (_, words) => {
      const c = captureIo();
      expect(await runCli([...(words as string[]), "--help"], c.io)).toBe(0);
      const help = c.out();
      expect(help).toContain(`ckpt ${(words as string[]).join(" ")}`);
      expect(help).toContain("--json");
      expect(help).toContain("--quiet");
      expect(help).toContain("Examples:");
      // An example is a runnable command line of this very command.
      const examples = help.slice(help.indexOf("Examples:")).split("\n").slice(1);
      expect(examples.some((line) => line.trim().startsWith(`ckpt ${(words as string[]).join(" ")}`))).toBe(
        true,
      );
    },
  );
});

describe("global behaviour", () => {
  it("--quiet draws no progress even on a terminal; without it progress goes to stderr only", async () => {
    const dir = await testdir("ckpt-cli-contract-");
    await writeFile(join(dir, "model.safetensors"), "W".repeat(1 << 16));
    const drawn = captureIo({ interactive: true });
    expect(await runCli(["fingerprint", dir], drawn.io)).toBe(0);
    expect(drawn.err()).toContain("\r\x1b[2Khash [");
    expect(drawn.out()).not.toContain("\r");
    const quiet = captureIo({ interactive: true });
    expect(await runCli(["fingerprint", dir, "--quiet"], quiet.io)).toBe(0);
    expect(quiet.err()).toBe("");
    expect(quiet.out()).toBe("");
    const notTty = captureIo();
    expect(await runCli(["fingerprint", dir], notTty.io)).toBe(0);
    // Off a terminal stderr holds the statistics alone, no progress.
    expect(notTty.err()).toBe("ckpt.fingerprint.v1, full: 1 files, 64.0 KiB\n");
  });

  it("colour only on a terminal, never with NO_COLOR set to a value or TERM=dumb", () => {
    expect(colorAllowed(true, {})).toBe(true);
    expect(colorAllowed(false, {})).toBe(false);
    expect(colorAllowed(true, { NO_COLOR: "1" })).toBe(false);
    expect(colorAllowed(true, { NO_COLOR: "" })).toBe(true);
    expect(colorAllowed(true, { TERM: "dumb" })).toBe(false);
  });

  it("under --json even a usage error is a JSON document on stdout (exit 2)", async () => {
    const c = captureIo();
    expect(await runCli(["verify", "--json"], c.io)).toBe(2);
    expect(JSON.parse(c.out())).toMatchObject({ ok: false, error: { code: "CLI_USAGE" } });
    expect(c.err()).toBe("");
  });

  it("a refusal names its error code on stderr, the key of docs/troubleshooting.md", async () => {
    const dir = await testdir("ckpt-cli-code-");
    const c = captureIo();
    expect(await runCli(["verify", join(dir, "not-there")], c.io)).toBe(2);
    expect(c.err()).toMatch(
      /^ckpt: .*not-there.*\nckpt: error code VERIFY_PATH_MISSING \(docs\/troubleshooting\.md\)\n$/s,
    );
    const usage = captureIo();
    expect(await runCli(["verify"], usage.io)).toBe(2);
    expect(usage.err()).not.toContain("error code");
  });
});
