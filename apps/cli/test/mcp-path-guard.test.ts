// The path guard of `ckpt mcp`: the pure decisions on text and on resolved paths, and the
// realpath-based executor on a real tree with symbolic links out of the root, loops and `..`.
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { isInside } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type GuardedRoot,
  guardedRoot,
  lexicalRefusal,
  resolvedVerdict,
  resolveInsideRoot,
} from "../src/mcp/path-guard.js";

describe("path guard decisions (pure)", () => {
  it("isInside: the root itself and below, never a sibling sharing its prefix", () => {
    expect(isInside("/srv/ckpt", "/srv/ckpt")).toBe(true);
    expect(isInside("/srv/ckpt", "/srv/ckpt/a/b")).toBe(true);
    expect(isInside("/srv/ckpt", "/srv/ckpt-other")).toBe(false);
    expect(isInside("/srv/ckpt", "/srv")).toBe(false);
    expect(isInside("/srv/ckpt", "/")).toBe(false);
    expect(isInside("/srv/ckpt", "/srv/ckpt/..x")).toBe(true);
  });

  it.each([
    [42, "not a string"],
    ["", "empty"],
    ["a\u0000b", "NUL"],
    ["a\nb", "control character"],
    ["%2e%2e/etc", "percent-encoded"],
    ["..%2Fetc", "percent-encoded"],
    ["%252e%252e", "percent-encoded"],
    ["..\\..\\etc", "backslash"],
    ["../x", "outside the root"],
    ["a/../../x", "outside the root"],
    ["/etc/passwd", "outside the root"],
    ["/srv/ckpt/../ckpt-other", "outside the root"],
    ["x".repeat(5000), "longer than"],
  ])("refuses %j (%s) before touching the disk", (path, why) => {
    expect(lexicalRefusal(path, ["/srv/ckpt"])).toContain(why);
  });

  it("accepts relative, absolute-inside and `..` that stays inside; either form of the root", () => {
    for (const ok of [".", "run/a", "run/../run/a", "/srv/ckpt/run", "./run/", "100%done"]) {
      expect(lexicalRefusal(ok, ["/srv/ckpt"]), ok).toBeUndefined();
    }
    expect(lexicalRefusal("/real/ckpt/run", ["/srv/ckpt", "/real/ckpt"])).toBeUndefined();
  });

  it("judges the resolved path: outside through a link, loops and unresolvable are refused; missing is missing", () => {
    expect(resolvedVerdict("/srv/ckpt", { real: "/srv/ckpt/a" })).toEqual({ real: "/srv/ckpt/a" });
    expect(resolvedVerdict("/srv/ckpt", { real: "/etc" })).toMatchObject({
      refusal: expect.stringContaining("outside the root"),
    });
    expect(resolvedVerdict("/srv/ckpt", { errno: "ELOOP" })).toMatchObject({
      refusal: expect.stringContaining("loop"),
    });
    expect(resolvedVerdict("/srv/ckpt", { errno: "EACCES" })).toMatchObject({
      refusal: expect.stringContaining("EACCES"),
    });
    expect(resolvedVerdict("/srv/ckpt", { errno: "ENOENT" })).toEqual({ missing: true });
  });
});

describe("resolveInsideRoot on a real tree", () => {
  let base = "";
  let guarded: GuardedRoot;
  beforeAll(async () => {
    base = await testdir("ckpt-mcp-guard-");
    const root = join(base, "root");
    await mkdir(join(root, "run", "a"), { recursive: true });
    await mkdir(join(base, "outside"));
    await writeFile(join(base, "outside", "secret"), "not yours");
    await symlink("/", join(root, "to-slash"));
    await symlink("../outside", join(root, "sneaky"));
    await symlink("run/a", join(root, "shortcut"));
    await symlink("loop-b", join(root, "loop-a"));
    await symlink("loop-a", join(root, "loop-b"));
    // The root reached through a link: paths under either spelling are inside.
    await symlink("root", join(base, "root-link"));
    guarded = await guardedRoot(join(base, "root-link"));
  });

  it("returns the real path inside the root, through an inner link too", async () => {
    const real = join(base, "root", "run", "a");
    expect(await resolveInsideRoot(guarded, "run/a")).toBe(real);
    expect(await resolveInsideRoot(guarded, "shortcut")).toBe(real);
    expect(await resolveInsideRoot(guarded, join(base, "root", "run", "a"))).toBe(real);
    expect(await resolveInsideRoot(guarded, join(base, "root-link", "run", "..", "run", "a"))).toBe(real);
  });

  it.each(["to-slash", "to-slash/etc", "sneaky", "sneaky/secret", "loop-a", "loop-a/x", "../outside/secret"])(
    "refuses %s with MCP_PATH_REFUSED",
    async (path) => {
      await expect(resolveInsideRoot(guarded, path)).rejects.toMatchObject({
        code: "MCP_PATH_REFUSED",
        kind: "input",
      });
    },
  );

  it("a missing path inside the root is MCP_PATH_NOT_FOUND; a missing --root is a usage error", async () => {
    await expect(resolveInsideRoot(guarded, "run/b")).rejects.toMatchObject({ code: "MCP_PATH_NOT_FOUND" });
    await expect(guardedRoot(join(base, "nope"))).rejects.toMatchObject({ code: "CLI_USAGE" });
    await expect(guardedRoot(join(base, "outside", "secret"))).rejects.toMatchObject({ code: "CLI_USAGE" });
  });
});
