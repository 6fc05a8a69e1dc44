import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error plain ESM tool without type declarations
import { checkUnit, importsOf, pictureProblems, readWorkspace } from "../tools/layers.mjs";

type Unit = Parameters<typeof checkUnit>[0];

function unit(name: string, overrides: Partial<Record<string, unknown>> = {}): Unit {
  return {
    dir: `packages/${name}`,
    name: `@ckpt/${name}`,
    kind: "package",
    deps: {},
    devDeps: {},
    sources: [],
    ...overrides,
  };
}

describe("layer check", () => {
  it("finds static, dynamic and require imports", () => {
    const text = `import { a } from "@ckpt/manifest";\nexport { b } from "./b.js";\nconst c = await import("@ckpt/tensors");\nconst d = require("node:fs");`;
    expect(importsOf(text)).toEqual(["@ckpt/manifest", "./b.js", "@ckpt/tensors", "node:fs"]);
  });

  it("accepts an allowed, declared edge", () => {
    const sound = unit("tensors", {
      deps: { "@ckpt/manifest": "workspace:^" },
      sources: [
        { file: "packages/tensors/src/a.ts", text: 'import { x } from "@ckpt/manifest";', isTest: false },
      ],
    });
    expect(checkUnit(sound)).toEqual([]);
  });

  it("refuses an import that points up the picture", () => {
    const upward = unit("manifest", {
      deps: { "@ckpt/tensors": "workspace:^" },
      sources: [
        { file: "packages/manifest/src/a.ts", text: 'import { x } from "@ckpt/tensors";', isTest: false },
      ],
    });
    const problems = checkUnit(upward);
    expect(problems.some((p: string) => p.includes("may not depend on @ckpt/tensors"))).toBe(true);
    expect(problems.some((p: string) => p.includes("may not import @ckpt/tensors"))).toBe(true);
  });

  it("refuses undeclared imports, deep imports, dist paths and non-workspace ranges", () => {
    const bad = unit("archive-reader", {
      deps: { "@ckpt/object-store": "^0.1.0" },
      sources: [
        { file: "packages/archive-reader/src/a.ts", text: 'import "@ckpt/manifest";', isTest: false },
        {
          file: "packages/archive-reader/src/b.ts",
          text: 'import "@ckpt/object-store/src/file";',
          isTest: false,
        },
        {
          file: "packages/archive-reader/test/c.test.ts",
          text: 'import "../../tensors/dist/index.js";',
          isTest: true,
        },
      ],
    });
    const problems = checkUnit(bad).join("\n");
    expect(problems).toContain("must use the workspace: protocol");
    expect(problems).toContain("without declaring it");
    expect(problems).toContain("import only a package's public entry");
    expect(problems).toContain("reaches into another package's files");
  });

  it("allows test-utils in tests only", () => {
    const leak = unit("manifest", {
      devDeps: { "@ckpt/test-utils": "workspace:*" },
      sources: [
        { file: "packages/manifest/src/a.ts", text: 'import "@ckpt/test-utils";', isTest: false },
        { file: "packages/manifest/src/a.test.ts", text: 'import "@ckpt/test-utils";', isTest: true },
      ],
    });
    const problems = checkUnit(leak);
    expect(problems).toHaveLength(2);
    expect(problems.every((p: string) => p.startsWith("packages/manifest/src/a.ts"))).toBe(true);
  });

  it("refuses a declared workspace dependency that no file imports", () => {
    const unused = unit("retention", {
      deps: { "@ckpt/manifest": "workspace:^", "@ckpt/archive-reader": "workspace:^" },
      devDeps: { "@ckpt/test-utils": "workspace:*" },
      sources: [
        { file: "packages/retention/src/a.ts", text: 'import { x } from "@ckpt/manifest";', isTest: false },
      ],
    });
    expect(checkUnit(unused)).toEqual([
      "packages/retention/package.json: dependencies declares @ckpt/archive-reader, which no file of @ckpt/retention imports",
      "packages/retention/package.json: devDependencies declares @ckpt/test-utils, which no file of @ckpt/retention imports",
    ]);
  });

  it("does not count an import quoted in a string (a test's fixture source) as an import", () => {
    const text = [
      "const fixture = 'import { x } from \"@ckpt/tensors\";';",
      "const other = \"export * from '../../manifest/dist/index.js'\";",
      'import { y } from "@ckpt/manifest";',
    ].join("\n");
    expect(importsOf(text)).toEqual(["@ckpt/manifest"]);
  });

  it("lets the integration tests declare test-utils and the packages they only run, nothing unused", () => {
    const tests = unit("integration-tests", {
      dir: "test",
      kind: "tests",
      deps: {
        "@ckpt/test-utils": "workspace:*",
        "@ckpt/cli": "workspace:^",
        "@ckpt/trainer-binding": "workspace:^",
        "@ckpt/trainer-checkpoint-manager": "workspace:^",
        "@ckpt/merge": "workspace:^",
      },
      sources: [
        { file: "test/a/b.test.ts", text: 'import { testdir } from "@ckpt/test-utils";', isTest: false },
      ],
    });
    expect(checkUnit(tests)).toEqual([
      "test/package.json: dependencies declares @ckpt/merge, which no file of @ckpt/integration-tests imports",
    ]);
  });

  it("keeps test-utils free of workspace packages", () => {
    const helpers = unit("test-utils", {
      dir: "tools/test-utils",
      kind: "test-utils",
      deps: { "@ckpt/manifest": "workspace:^" },
      sources: [{ file: "tools/test-utils/src/a.ts", text: 'import "@ckpt/manifest";', isTest: false }],
    });
    const problems = checkUnit(helpers).join("\n");
    expect(problems).toContain("may not depend on @ckpt/manifest");
    expect(problems).toContain("may not import @ckpt/manifest");
  });

  it("holds for the real workspace, the integration tests and test-utils included", () => {
    const units = readWorkspace(resolve(import.meta.dirname, ".."));
    expect(units.map((u: Unit) => u.dir)).toEqual(expect.arrayContaining(["test", "tools/test-utils"]));
    expect(units.length).toBeGreaterThanOrEqual(13);
    expect(units.flatMap(checkUnit)).toEqual([]);
  });
  describe("the picture against the workspace", () => {
    const root = resolve(import.meta.dirname, "..");
    const units = readWorkspace(root);
    const doc = readFileSync(resolve(root, "docs/architecture.md"), "utf8");

    it("holds: every allowed edge is declared and the docs table lists exactly the allowed edges", () => {
      expect(pictureProblems(units, doc)).toEqual([]);
    });

    it("names an allowed edge that no package declares", () => {
      const merge = units.find((u: Unit) => u.name === "@ckpt/merge");
      const { "@ckpt/tensors": _dropped, ...deps } = merge.deps;
      const without = units.map((u: Unit) => (u === merge ? { ...u, deps } : u));
      expect(pictureProblems(without, doc)).toEqual([
        "tools/layers.mjs: the picture allows merge -> tensors, which packages/merge/package.json does not declare; remove the edge here and in docs/architecture.md",
      ]);
    });

    it("names a docs row that differs from tools/layers.mjs, and a missing row", () => {
      const drifted = doc
        .replace(
          "| `merge` | `errors`, `progress`, `manifest`, `tensors` |",
          "| `merge` | `errors`, `manifest`, `tensors`, `archive-reader` |",
        )
        .replace(/^\| `verify` \|.*\n/m, "");
      const problems = pictureProblems(units, drifted).join("\n");
      expect(problems).toContain("the row for merge lists errors, manifest, tensors, archive-reader");
      expect(problems).toContain("the edge table has no row for verify");
    });
  });
});
