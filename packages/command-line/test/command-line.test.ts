import { CkptError } from "@ckpt/errors";
import { describe, expect, it } from "vitest";
import {
  closestMatch,
  describeFailure,
  exitCodesEpilogue,
  expandHelpCommand,
  failureLines,
  flagSuggestions,
  runCommandLine,
} from "../src/index.js";

class DemoError extends CkptError<"CLI_USAGE" | "DEMO_REFUSED"> {}

const program = {
  name: "demo",
  version: "9.9.9",
  summary: "A program for the conventions.",
  width: 100,
  usageError: (message: string) => new DemoError("CLI_USAGE", message, { kind: "input" }),
};

function run(argv: string[]): Promise<string> {
  return runCommandLine(argv, program, (parser) => {
    parser.option("json", { type: "boolean" }).command(
      "fetch <uri>",
      "Fetch a thing",
      (y) => y.option("dry-run", { type: "boolean" }).epilogue(exitCodesEpilogue({ 3: "partly done" })),
      () => undefined,
    );
  });
}

describe("suggestions", () => {
  it("closestMatch takes typos (a swap counts once), not unrelated words", () => {
    expect(closestMatch("josn", ["json", "quiet"])).toBe("json");
    expect(closestMatch("publsh", ["commit", "publish"])).toBe("publish");
    expect(closestMatch("zzz", ["json", "quiet"])).toBeUndefined();
  });

  it("flagSuggestions names only unknown flags close to a known one", () => {
    expect(
      flagSuggestions(["x", "--josn", "--json", "--no-dryrun", "--zzzz", "--", "--jsn"], ["json", "dry-run"]),
    ).toEqual([
      "Unknown option --josn: did you mean --json?",
      "Unknown option --no-dryrun: did you mean --dry-run?",
    ]);
  });
});

describe("help, version and exit codes", () => {
  it("exitCodesEpilogue lays a command's codes over the standard ones, in order", () => {
    expect(exitCodesEpilogue({ 3: "partly done", 1: "not proven" })).toBe(
      "Exit codes: 0 ok; 1 not proven; 2 bad usage or unusable input; 3 partly done.",
    );
  });

  it("help <command> and -h print the command's help, with its exit codes", async () => {
    expect(expandHelpCommand(["help", "fetch"])).toEqual(["fetch", "--help"]);
    const viaHelp = await run(["help", "fetch"]);
    expect(viaHelp).toBe(await run(["fetch", "-h"]));
    expect(viaHelp).toMatch(/^demo fetch <uri>/);
    expect(viaHelp).toContain(
      "Exit codes: 0 ok; 1 failed or refused; 2 bad usage or unusable input; 3 partly done.",
    );
    expect(await run(["--version"])).toBe("9.9.9");
  });

  it("a mistyped command, help topic or flag is a usage error with a suggestion", async () => {
    await expect(run(["fetc", "x"])).rejects.toThrow("Did you mean fetch?");
    await expect(run(["help", "fetc"])).rejects.toThrow("Unknown command: fetc. Did you mean fetch?");
    await expect(run(["fetch", "x", "--dryrun"])).rejects.toMatchObject({
      code: "CLI_USAGE",
      message: expect.stringContaining("did you mean --dry-run?"),
    });
  });

  it("completion prints a bash script that asks the program for completions", async () => {
    const script = await run(["completion"]);
    expect(script).toContain("demo --get-yargs-completions");
    expect(await run(["--get-yargs-completions", "demo", "fe"])).toContain("fetch");
  });
});

describe("failures", () => {
  it("a coded error keeps its code; input exits 2, anything else 1; uncoded is INTERNAL", () => {
    expect(describeFailure(new DemoError("DEMO_REFUSED", "no", { kind: "refused" }))).toEqual({
      exitCode: 1,
      code: "DEMO_REFUSED",
      message: "no",
    });
    expect(describeFailure(program.usageError("bad")).exitCode).toBe(2);
    expect(describeFailure(new Error("boom"))).toEqual({
      exitCode: 1,
      code: "INTERNAL",
      message: "internal error: boom",
    });
  });

  it("failureLines name the error code, or where usage is explained", () => {
    expect(failureLines("demo", { exitCode: 1, code: "DEMO_REFUSED", message: "no" })).toEqual([
      "demo: no",
      "demo: error code DEMO_REFUSED (docs/troubleshooting.md)",
    ]);
    expect(failureLines("demo", { exitCode: 2, code: "CLI_USAGE", message: "bad" })).toEqual([
      "demo: bad",
      "Run `demo --help` for usage.",
    ]);
  });
});
