// preflightBase on inputs made here (no generated fixture), so they run in the fast lane.
import { testdir } from "@ckpt/test-utils";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { preflightBase } from "../src/index.js";

describe("preflightBase refuses, in the one REFUSED family, naming the file", () => {
  it("refuses a base that is not a directory as unusable input", async () => {
    const file = join(await testdir("ckpt-hf-preflight-"), "config.json");
    await writeFile(file, "{}\n");
    const error = await preflightBase(file, {
      unifiedChatTemplate: false,
    }).catch((e) => e);
    expect(error).toMatchObject({ code: "MATERIALIZE_BASE_UNREADABLE", kind: "input" });
  });
});
