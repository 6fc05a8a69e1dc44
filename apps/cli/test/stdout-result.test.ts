import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { runnableCommands } from "./helpers/registry.js";
import { torchModel } from "./helpers/torch-model.js";

/** Commands that make something: stdout is that thing alone, the statistics go to stderr. */
const MAKERS = [
  "artifact commit",
  "artifact publish",
  "artifact fetch",
  "fingerprint",
  "store download",
  "store copy",
  "merge",
  "materialize-hf",
];
/** Commands whose short report is the result: stdout is that report (materialize-hf runs in its own test). */
const REPORTERS = [
  "artifact verify",
  "artifact prune-verified",
  "inspect",
  "verify",
  "doctor object-store",
  "doctor volume",
  "estimate",
  "demo",
  "evidence",
  "run status",
  "resumable",
  "gc",
  "drill",
  "resumed",
];
/**
 * Commands that serve until stopped: `ckpt mcp` speaks MCP over stdio (--print-config is its
 * report); `ckpt ui`'s stdout is its URL line (test/ui.test.ts checks it).
 */
const SERVERS = ["mcp", "ui"];

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";

/**
 * Runs `ckpt <args>` as text, then `ckpt <jsonArgs> --json` (the same by default); returns both
 * stdouts, and stderr of the first.
 */
async function twice(args: string[], env: NodeJS.ProcessEnv, jsonArgs = args) {
  const text = captureIo({ env });
  expect(await runCli(args, text.io), `ckpt ${args.join(" ")}: ${text.err()}`).toBe(0);
  const json = captureIo({ env });
  expect(await runCli([...jsonArgs, "--json"], json.io), json.out()).toBe(0);
  return { out: text.out(), err: text.err(), json: JSON.parse(json.out()) as Record<string, unknown> };
}

describe("stdout carries only the result", () => {
  it("every command is either a maker (result alone on stdout) or a reporter", () => {
    expect([...MAKERS, ...REPORTERS, ...SERVERS].sort()).toEqual(runnableCommands().sort());
  });

  it("each maker's success path prints exactly what it made on stdout; --json prints one JSON document", async () => {
    const root = await testdir("ckpt-cli-stdout-");
    const env = { HOME: root };
    const dir = join(root, "run", "checkpoint_artifacts", "iter_000000300");
    const other = join(root, "other", "checkpoint_artifacts", "iter_000000300");
    await torchModel(join(dir, "model.pt"), 0);
    await torchModel(join(other, "model.pt"), 0);

    // A committed artifact is never committed again: the JSON run commits a twin.
    const commitArgs = (d: string) => [
      "artifact",
      "commit",
      d,
      "--components",
      "model",
      "--iteration",
      "300",
    ];
    const commit = await twice(commitArgs(dir), env, commitArgs(other));
    expect(commit.out).toBe(`${dir}\n`);
    expect(commit.err).toMatch(/^committed /);

    const bucket = `file://${root}/archive`;
    const uri = `${bucket}/${PREFIX.replace("checkpoints", "checkpoint_artifacts")}/iter_000000300`;
    const publish = await twice(
      ["artifact", "publish", "--artifact-dir", dir, "--upload-prefix", PREFIX, "--bucket", bucket],
      env,
    );
    expect(publish.out).toBe(`${uri}\n`);
    expect(publish.err).toMatch(/^published /);

    const stage = join(root, "stage");
    const fetch = await twice(["artifact", "fetch", "--artifact-uri", uri, "--stage-dir", stage], env);
    expect(fetch.out).toBe(`${join(stage, "iter_000000300")}\n`);
    expect(fetch.err).toMatch(/files verified\n$/);

    const fingerprint = await twice(["fingerprint", dir], env);
    expect(fingerprint.out).toMatch(/^[0-9a-f]{64}\n$/);
    expect(fingerprint.json.fingerprint).toBe(fingerprint.out.trim());

    const local = join(root, "downloaded");
    const download = await twice(["store", "download", uri, local], env);
    expect(download.out).toBe(`${local}\n`);
    expect(download.err).toMatch(/downloaded/);

    const copyUri = `file://${root}/copy`;
    const copy = await twice(["store", "copy", uri, copyUri], env);
    expect(copy.out).toBe(`${copyUri}\n`);
    expect(copy.err).toMatch(/copied/);

    const experts = [join(root, "e1", "model.pt"), join(root, "e2", "model.pt")];
    await torchModel(experts[0]!, 1);
    await torchModel(experts[1]!, 2);
    const merged = join(root, "merged", "checkpoint_artifacts", "iter_000000300", "model.pt");
    const merge = await twice(
      ["merge", "--mode", "avg", "--experts", experts.join(","), "--out", merged],
      env,
    );
    expect(merge.out).toBe(`${merged}\n`);
    expect(merge.err).toMatch(/^merged: /);
  });
});
