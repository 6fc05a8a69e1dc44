// The command-line conventions, through the built `ckpt` (apps/cli/dist/bin.js): -h and
// `help <command>` on every command, suggestions for a mistyped command or flag, the exit codes in
// every help, and no AWS SDK Node-version warning in front of a store command's output.
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { commands } from "../src/commands/index.js";
import { type CommandEntry, isGroup } from "../src/commands/registry.js";

const BIN = resolve(import.meta.dirname, "..", "dist", "bin.js");

function ckpt(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; out: string; err: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH, ...env } },
      (error, out, err) => done({ code: error === null ? 0 : Number(error.code), out, err }),
    );
  });
}

/** Every command and group as the words that name it, found from the registry. */
function everyCommand(entries: readonly CommandEntry[], prefix: string[] = []): string[][] {
  return entries.flatMap((entry) => {
    const words = [...prefix, entry.command.split(" ")[0]!];
    return isGroup(entry) ? [words, ...everyCommand(entry.subcommands, words)] : [words];
  });
}

describe("help on every command", () => {
  it.each(everyCommand(commands).map((words) => [words.join(" "), words]))(
    "ckpt %s: -h and help <command> print its help with its exit codes",
    async (_, words) => {
      const name = `ckpt ${(words as string[]).join(" ")}`;
      const [short, viaHelp] = await Promise.all([
        ckpt([...(words as string[]), "-h"]),
        ckpt(["help", ...(words as string[])]),
      ]);
      for (const run of [short, viaHelp]) {
        expect(run.code).toBe(0);
        expect(run.out.startsWith(name)).toBe(true);
        expect(run.out).toMatch(/\n\nExit codes: 0 [\s\S]*; 2 bad usage[\s\S]*\.\n$/);
      }
      expect(viaHelp.out).toBe(short.out);
    },
  );

  it("a command's own exit codes are in its help (prune-verified's 3, doctor object-store's 1)", async () => {
    const prune = await ckpt(["artifact", "prune-verified", "-h"]);
    expect(prune.out).toContain("3 some path not released");
    const store = await ckpt(["help", "doctor", "object-store"]);
    expect(store.out).toContain("1 not qualified");
  });

  it("help for a mistyped command is refused with a suggestion (exit 2)", async () => {
    const top = await ckpt(["help", "artifct"]);
    expect(top.code).toBe(2);
    expect(top.err).toContain("Unknown command: artifct. Did you mean artifact?");
    const sub = await ckpt(["help", "artifact", "publsh"]);
    expect(sub.code).toBe(2);
    expect(sub.err).toContain("Did you mean publish?");
  });
});

describe("suggestions", () => {
  it("a mistyped command or subcommand gets a did-you-mean (exit 2)", async () => {
    const top = await ckpt(["fingerprnt", "x"]);
    expect(top.code).toBe(2);
    expect(top.err).toContain("Did you mean fingerprint?");
    const sub = await ckpt(["doctor", "storag", "x"]);
    expect(sub.code).toBe(2);
    expect(sub.err).toContain("Did you mean storage?");
  });

  it("a mistyped flag names the flag it is closest to, even when another check fails first", async () => {
    const known = await ckpt(["verify", "x", "--finit"]);
    expect(known.code).toBe(2);
    expect(known.err).toContain("Unknown option --finit: did you mean --finite?");
    // --josn swallows nothing here, yet yargs reports the missing <path> first: the hint still comes.
    const swapped = await ckpt(["verify", "--josn"]);
    expect(swapped.code).toBe(2);
    expect(swapped.err).toContain("did you mean --json?");
  });
});

describe("one vocabulary", () => {
  it.each([
    ["doctor store", ["doctor", "store", "-h"], ["doctor", "object-store", "-h"]],
    ["help doctor storage", ["help", "doctor", "storage"], ["help", "doctor", "volume"]],
    [
      "fetch --dst",
      ["artifact", "fetch", "--artifact-uri", "file:///no-such-archive/iter_000000001", "--dst", "stage"],
      [
        "artifact",
        "fetch",
        "--artifact-uri",
        "file:///no-such-archive/iter_000000001",
        "--stage-dir",
        "stage",
      ],
    ],
    [
      "resumed --attempt",
      ["resumed", "--attempt", "/no-such-attempt", "--reported-step", "0"],
      ["resumed", "--attempt-dir", "/no-such-attempt", "--reported-step", "0"],
    ],
    [
      "commit <artifact-dir>",
      ["artifact", "commit", "/no-such-artifact/iter_000000001"],
      ["artifact", "commit", "--artifact-dir", "/no-such-artifact/iter_000000001"],
    ],
  ])("%s: the earlier spelling runs the same as the current one", async (_, old, current) => {
    const [before, now] = await Promise.all([ckpt(old as string[]), ckpt(current as string[])]);
    expect(before).toEqual(now);
    // Each pair is seen doing something: a help, or a refusal naming what it was given.
    expect(`${now.out}${now.err}`).toMatch(/ckpt doctor object-store|ckpt doctor volume|no-such/);
  });

  it("materialize-hf takes the artifact directory as --artifact-dir too (publish's name), and still as --ckpt-dir", async () => {
    const dir = join(await testdir("ckpt-cli-vocabulary-"), "no-such-artifact");
    const materialize = (flag: string) =>
      ckpt(["materialize-hf", flag, dir, "--base", dir, "--out", join(dir, "out")]);
    const [old, shared] = await Promise.all([materialize("--ckpt-dir"), materialize("--artifact-dir")]);
    expect(shared).toEqual(old);
    expect(shared.code).toBe(2);
    expect(shared.err).toContain("no-such-artifact");
  });
});

describe("the AWS SDK's Node-version warning", () => {
  it("ckpt doctor store against a missing endpoint prints its verdict without the warning", async () => {
    const creds = join(await testdir("ckpt-cli-warning-"), "creds.json");
    await writeFile(
      creds,
      JSON.stringify({
        aws_access_key_id: "AKIDDOCTOR",
        aws_secret_access_key: "doctor-secret",
        endpoint_url: "http://127.0.0.1:1", // nothing listens
      }),
    );
    const run = await ckpt(["doctor", "store", "s3://no-such-bucket/p", "--credentials", creds]);
    expect(run.code).not.toBe(0);
    expect(`${run.out}${run.err}`).toContain("127.0.0.1:1");
    expect(run.err).not.toContain("NodeVersionSupportWarning");
    expect(run.err).not.toContain("(node:");
  });
});
