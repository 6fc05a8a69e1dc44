// One vocabulary for `--json`: every command's report has snake_case keys only, whatever the
// library report behind it calls its fields. The commands come from the registry, so a new one
// fails here until it is given a fixture run below.
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it, vi } from "vitest";
import { prepareDemoDir } from "../src/demo/directory.js";
import { train } from "../src/demo/train.js";
import { snakeCaseKey, snakeCaseKeys } from "../src/json.js";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { nonSnakeKeys, nonSnakeKeysInCkptDocuments } from "./helpers/json-keys.js";
import { runnableCommands } from "./helpers/registry.js";
import { torchModel } from "./helpers/torch-model.js";

/** Every report the CLI hands its JSON writer, as the command built it (before any key is converted). */
const written = vi.hoisted(() => [] as unknown[]);
vi.mock("../src/json.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../src/json.js")>();
  return {
    ...original,
    jsonReport: (report: unknown) => {
      written.push(report);
      return original.jsonReport(report);
    },
  };
});

const PREFIX = "vlm/grpo/run-a/20260901120000/checkpoints";

/**
 * materialize-hf needs a Hugging Face base model made by torch: json-keys-materialize.test.ts;
 * ui serves until stopped, its endpoints' keys are checked by ui.test.ts.
 */
const ELSEWHERE = ["materialize-hf", "ui"];

describe("--json keys", () => {
  it("the converter: camelCase identifiers become snake_case at any depth; names and values stay", () => {
    expect(snakeCaseKey("hashedBytes")).toBe("hashed_bytes");
    expect(snakeCaseKey("fingerprintBefore")).toBe("fingerprint_before");
    expect(snakeCaseKey("sha256")).toBe("sha256");
    expect(snakeCaseKey("model.layers.0.selfAttn.weight")).toBe("model.layers.0.selfAttn.weight");
    expect(snakeCaseKey("BF16")).toBe("BF16");
    expect(
      snakeCaseKeys({
        ok: true,
        mountPoint: "/",
        steps: [{ durationMs: 1, name: "openRead" }],
        at: new Date(0),
      }),
    ).toEqual({
      ok: true,
      mount_point: "/",
      steps: [{ duration_ms: 1, name: "openRead" }],
      at: "1970-01-01T00:00:00.000Z",
    });
  });

  it("a posttrain.* record keeps its specification's keys; a ckpt.* document must declare snake_case ones", () => {
    const manifest = { schema: "posttrain.checkpoint-artifact.v1", iterDir: "kept as written" };
    expect(snakeCaseKeys({ manifestPath: "m", manifest })).toEqual({ manifest_path: "m", manifest });
    const drill = { schema: "ckpt.drill.v1", fingerprintBefore: null };
    expect(nonSnakeKeys(drill)).toEqual(["$.fingerprintBefore"]);
    expect(nonSnakeKeysInCkptDocuments({ stagedDir: "s", manifest, report: drill })).toEqual([
      "$.report.fingerprintBefore",
    ]);
  });

  it("every command's --json report has snake_case keys only", async () => {
    const root = await testdir("ckpt-cli-json-keys-");
    const env = { HOME: root };
    const dir = join(root, "run", "checkpoint_artifacts", "iter_000000300");
    await torchModel(join(dir, "model.pt"), 0);
    const experts = [join(root, "e1", "model.pt"), join(root, "e2", "model.pt")];
    await torchModel(experts[0]!, 1);
    await torchModel(experts[1]!, 2);
    const bucket = `file://${root}/archive`;
    const uri = `${bucket}/${PREFIX.replace("checkpoints", "checkpoint_artifacts")}/iter_000000300`;
    // A run attempt written for real by the checkpoint manager (the demo trainer).
    const { attemptDir } = await train({
      outputRoot: join(root, "runs"),
      name: "keys",
      steps: 20,
      saveEvery: 10,
      keepOptimLast: 1,
      keepModelLast: 0,
      initSeed: 1,
      taskSeed: 2,
      dataSeed: 3,
    });
    const checkpoint = join(attemptDir, "checkpoints", "iter_000000020");
    const demoDir = join(root, "demo");
    await prepareDemoDir(demoDir);

    // In order: publish needs the commit, fetch and the store commands the publish.
    const runs: Record<string, string[]> = {
      "artifact commit": ["artifact", "commit", dir, "--components", "model", "--iteration", "300"],
      "artifact publish": [
        "artifact",
        "publish",
        "--artifact-dir",
        dir,
        "--upload-prefix",
        PREFIX,
        "--bucket",
        bucket,
      ],
      "artifact verify": ["artifact", "verify", "--artifact-dir", dir],
      "artifact fetch": ["artifact", "fetch", "--artifact-uri", uri, "--stage-dir", join(root, "stage")],
      "artifact prune-verified": ["artifact", "prune-verified", "--paths", dir, "--dry-run"],
      "store download": ["store", "download", uri, join(root, "downloaded")],
      "store copy": ["store", "copy", uri, `file://${root}/copy`],
      inspect: ["inspect", join(dir, "model.pt"), "--sha256"],
      verify: ["verify", checkpoint],
      fingerprint: ["fingerprint", dir],
      merge: [
        "merge",
        "--mode",
        "avg",
        "--experts",
        experts.join(","),
        "--out",
        join(root, "merged", "checkpoint_artifacts", "iter_000000300", "model.pt"),
      ],
      "doctor object-store": ["doctor", "object-store", `file://${root}/qualify`],
      "doctor volume": ["doctor", "volume", root],
      estimate: ["estimate", "--params", "7B", "--iterations", "10"],
      demo: ["demo", "--dir", demoDir, "--clean", "--dry-run"],
      evidence: ["evidence", attemptDir],
      "run status": ["run", "status", attemptDir],
      resumable: ["resumable", checkpoint],
      gc: ["gc", root],
      resumed: ["resumed", "--attempt-dir", attemptDir, "--reported-step", "20"],
      drill: ["drill", checkpoint],
      mcp: ["mcp", "--root", root, "--print-config"],
    };
    expect([...Object.keys(runs), ...ELSEWHERE].sort()).toEqual(runnableCommands().sort());

    for (const [name, args] of Object.entries(runs)) {
      written.length = 0;
      const c = captureIo({ env });
      const code = await runCli([...args, "--json"], c.io);
      // Each run is a success path, so the keys checked are the report's, not a failure's.
      expect(code, `ckpt ${name}: ${c.out()}${c.err()}`).toBe(0);
      const report = JSON.parse(c.out()) as unknown;
      expect(nonSnakeKeys(report), `ckpt ${name} --json`).toEqual([]);
      // ckpt's own documents are snake_case as built, not only as printed (MCP and the web view serve them raw).
      expect(written, `ckpt ${name} --json`).toHaveLength(1);
      expect(nonSnakeKeysInCkptDocuments(written[0]), `ckpt ${name}: its ckpt.* documents`).toEqual([]);
    }
  }, 120_000);
});
