// checkHfDirectory on directories made here (no generated fixture), so they run in the fast lane.
import { testdir } from "@ckpt/test-utils";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkHfDirectory } from "../src/index.js";

describe("checkHfDirectory", () => {
  it("reports a directory with no weights as HF_INDEX_MISSING", async () => {
    const dir = join(await testdir("ckpt-hf-check-"), "empty");
    await mkdir(dir);
    expect(await checkHfDirectory(dir)).toMatchObject({ ok: false, layout: "none" });
    expect((await checkHfDirectory(dir)).problems.map((p) => p.code)).toEqual(["HF_INDEX_MISSING"]);
  });
});
