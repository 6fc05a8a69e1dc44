// @module-tag torch
// materialize-hf's --json report has snake_case keys only (the other commands: json-keys.test.ts);
// its base model is made by torch.
import { join } from "node:path";
import {
  makeHfFixture,
  makeModelArtifact,
  materializeHfArgs,
  TORCH_FIXTURE_TIMEOUT_MS,
  testdir,
} from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { runCli } from "../src/run.js";
import { captureIo } from "./helpers/capture.js";
import { nonSnakeKeys } from "./helpers/json-keys.js";

describe("--json keys", () => {
  it(
    "materialize-hf's report, built then skipped, has snake_case keys only",
    async () => {
      const root = await testdir("ckpt-cli-json-keys-hf-");
      const fixture = await makeHfFixture(join(root, "fx"), "dense", 1, 7);
      const artifact = await makeModelArtifact(join(root, "a"), fixture.expert(0), { iteration: 300 });
      for (const action of ["built", "skipped"]) {
        const c = captureIo();
        const args = materializeHfArgs(artifact, fixture.base, join(root, "out"), "--json");
        expect(await runCli(args, c.io), c.out()).toBe(0);
        const report = JSON.parse(c.out()) as { action: string };
        expect(report.action).toBe(action);
        expect(nonSnakeKeys(report)).toEqual([]);
      }
    },
    TORCH_FIXTURE_TIMEOUT_MS,
  );
});
