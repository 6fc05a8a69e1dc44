import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { detectVerifyKind, VERIFY_REPORT_PROBLEM_CODES, verifyPath } from "../src/index.js";

describe("detectVerifyKind", () => {
  it("tells a kind from the name and the records in a directory, first match wins", async () => {
    const root = await testdir();
    const at = async (rel: string, files: string[] = []) => {
      await mkdir(join(root, rel), { recursive: true });
      for (const f of files) await writeFile(join(root, rel, f), "x");
      return detectVerifyKind(join(root, rel));
    };
    expect(await at("checkpoint_artifacts/iter_000000001")).toBe("artifact");
    expect(await at("a", [".staged.json", ".posttrain-checkpoint-artifact.json"])).toBe("stage");
    expect(await at("b", ["_SUCCESS"])).toBe("checkpoint");
    expect(await at("c", [".metadata"])).toBe("dcp");
    expect(await at("d", ["model.safetensors"])).toBe("hf");
    expect(await at("checkpoints/iter_000000002")).toBe("checkpoint");
    await writeFile(join(root, "w.safetensors"), "x");
    expect(await detectVerifyKind(join(root, "w.safetensors"))).toBe("safetensors");
    await writeFile(join(root, "blob"), new Uint8Array([0x50, 0x4b, 3, 4]));
    expect(await detectVerifyKind(join(root, "blob"))).toBe("torch");
  });

  it("a missing path and a path of no known kind are input errors with their codes", async () => {
    const root = await testdir();
    await expect(detectVerifyKind(join(root, "nothing"))).rejects.toMatchObject({
      code: "VERIFY_PATH_MISSING",
      kind: "input",
    });
    await mkdir(join(root, "empty"));
    await expect(verifyPath(join(root, "empty"))).rejects.toMatchObject({
      code: "VERIFY_UNKNOWN_KIND",
      kind: "input",
      subject: join(root, "empty"),
    });
  });
});

describe("verifyPath", () => {
  it("judges as the kind it is told; every problem code is in the closed set", async () => {
    const dir = join(await testdir(), "run");
    await mkdir(dir);
    const report = await verifyPath(dir, { kind: "checkpoint" });
    expect(report).toMatchObject({ schema: "ckpt.verify-report.v1", kind: "checkpoint", ok: false });
    expect(report.problems.map((p) => p.code)).toEqual([
      "VERIFY_COMPONENT_MISSING",
      "VERIFY_COMPONENT_MISSING",
    ]);
    for (const p of report.problems) expect(VERIFY_REPORT_PROBLEM_CODES).toContain(p.code);
  });
});
