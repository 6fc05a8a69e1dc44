import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import fc from "fast-check";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { assertSafeRelativePath, pathProblem, resolveInside } from "../src/paths/safe.js";

describe("pathProblem", () => {
  it.each([
    ["model.pt"],
    ["model/__0_0.distcp"],
    [".posttrain/generations/g1/trainer.pt"],
    ["..hidden/x"],
    ["a..b"],
    ["模型/权重.pt"],
  ])("accepts %j", (path) => {
    expect(pathProblem(path)).toBeUndefined();
  });

  it.each([
    ["", "PATH_EMPTY"],
    ["../x", "PATH_TRAVERSAL"],
    ["a/../../x", "PATH_TRAVERSAL"],
    ["a/..", "PATH_TRAVERSAL"],
    ["/abs", "PATH_ABSOLUTE"],
    ["a\\b", "PATH_BACKSLASH"],
    ["..\\x", "PATH_BACKSLASH"],
    ["a\u0000b", "PATH_NUL"],
    ["a\nb", "PATH_CONTROL_CHAR"],
    ["a//b", "PATH_EMPTY_SEGMENT"],
    ["a/", "PATH_EMPTY_SEGMENT"],
    ["./a", "PATH_DOT_SEGMENT"],
    ["a/./b", "PATH_DOT_SEGMENT"],
    [".", "PATH_DOT_SEGMENT"],
    ["x".repeat(256), "PATH_TOO_LONG"],
    [`${"abc/".repeat(1100)}x`, "PATH_TOO_LONG"],
  ])("refuses %j as %s", (path, code) => {
    expect(pathProblem(path)?.code).toBe(code);
    expect(() => assertSafeRelativePath(path, "rec.json field files[0].path")).toThrow(
      expect.objectContaining({ code, message: expect.stringContaining("rec.json field files[0].path") }),
    );
  });

  it("never accepts a path that normalizes outside its root", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("a", "..", ".", "", "b\\c", "/"), { maxLength: 6 }).map((s) => s.join("/")),
        (path) => {
          if (pathProblem(path) !== undefined) return;
          const resolved = join("/root", path);
          expect(resolved.startsWith("/root/")).toBe(true);
        },
      ),
    );
  });

  it("refuses a non-string with its own code", () => {
    expect(() => assertSafeRelativePath(42 as unknown as string, "ctx")).toThrow(
      expect.objectContaining({ code: "PATH_NOT_STRING" }),
    );
  });
});

describe("resolveInside", () => {
  let root: string;
  let outside: string;
  beforeAll(async () => {
    root = await testdir("ckpt-resolve-");
    outside = await testdir("ckpt-outside-");
    await mkdir(join(root, "model"));
    await writeFile(join(root, "model", ".metadata"), "x");
    await writeFile(join(outside, "secret"), "s");
    await symlink(outside, join(root, "escape"));
    await symlink(join(outside, "secret"), join(root, "link-to-secret"));
    await symlink(join(root, "model"), join(root, "alias"));
  });

  it("joins existing and not-yet-existing paths inside the root", async () => {
    expect(await resolveInside(root, "model/.metadata")).toBe(join(root, "model", ".metadata"));
    expect(await resolveInside(root, "new/dir/file")).toBe(join(root, "new", "dir", "file"));
    expect(await resolveInside(root, "alias/.metadata")).toBe(join(root, "alias", ".metadata"));
  });

  it("refuses a path that leaves the root through a symlinked directory or file", async () => {
    await expect(resolveInside(root, "escape/secret")).rejects.toMatchObject({ code: "PATH_ESCAPES_ROOT" });
    await expect(resolveInside(root, "escape/not-yet/file")).rejects.toMatchObject({
      code: "PATH_ESCAPES_ROOT",
    });
    await expect(resolveInside(root, "link-to-secret")).rejects.toMatchObject({ code: "PATH_ESCAPES_ROOT" });
  });

  it("names a missing root", async () => {
    await expect(resolveInside(join(root, "nope"), "a")).rejects.toMatchObject({ code: "PATH_ROOT_MISSING" });
  });

  it("refuses unsafe relative paths before touching the disk", async () => {
    await expect(resolveInside("/nonexistent-root-ckpt", "../etc/passwd")).rejects.toMatchObject({
      code: "PATH_TRAVERSAL",
    });
  });
});
