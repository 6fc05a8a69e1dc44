#!/usr/bin/env node
// Creates a workspace package with the house shape: package.json with an exports map (ESM and
// CJS, each with its own declarations), one-line tsup/vitest configs that use tools/build,
// tsconfig, README, CHANGELOG and src/index.ts. test/build/new-package.test.ts keeps it in step with
// the real packages.
// Usage: node tools/new-package.mjs packages/<name> "<one-line contract>" [--app]
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const [dir, contract = "", flag] = process.argv.slice(2);
if (!dir || !/^(packages|apps)\/[a-z][a-z0-9-]*$/.test(dir)) {
  console.error('usage: node tools/new-package.mjs packages/<name>|apps/<name> "<contract>" [--app]');
  process.exit(2);
}
if (existsSync(dir)) {
  console.error(`${dir} exists already; not touching it`);
  process.exit(1);
}
const name = basename(dir);
const isApp = flag === "--app";
const write = (rel, text) => {
  mkdirSync(join(dir, rel, ".."), { recursive: true });
  writeFileSync(join(dir, rel), text);
};
const pkg = {
  name: `@ckpt/${name}`,
  version: "0.1.0",
  description: contract,
  license: "Apache-2.0",
  type: "module",
  ...(isApp ? { private: true } : {}),
  main: "./dist/index.cjs",
  module: "./dist/index.js",
  types: "./dist/index.d.ts",
  exports: {
    ".": {
      import: { types: "./dist/index.d.ts", default: "./dist/index.js" },
      require: { types: "./dist/index.d.cts", default: "./dist/index.cjs" },
    },
    "./package.json": "./package.json",
  },
  files: ["dist"],
  engines: { node: ">=20.19" },
  scripts: {
    build: "tsup",
    test: "vitest run",
    "test:unit": "vitest run --mode unit",
    typecheck: "tsc --noEmit -p tsconfig.json",
    // A published package also proves its package.json and types resolve for every consumer.
    lint: isApp ? "biome check ." : "biome check . && publint --strict && attw --pack .",
  },
  dependencies: {},
  devDependencies: {},
};
write("package.json", `${JSON.stringify(pkg, null, 2)}\n`);
write(
  "tsconfig.json",
  '{\n  "extends": "../../tools/build/tsconfig.base.json",\n  "include": ["src", "test"]\n}\n',
);
write(
  "tsup.config.ts",
  'import { defineConfig } from "tsup";\nimport { packageBuild } from "../../tools/build/tsup.base";\n\nexport default defineConfig(packageBuild());\n',
);
write(
  "vitest.config.ts",
  'import { packageTests } from "../../tools/build/vitest.shared.ts";\n\nexport default packageTests(import.meta.dirname);\n',
);
write("README.md", `# @ckpt/${name}\n\n${contract}\n`);
if (!isApp) write("CHANGELOG.md", `# @ckpt/${name}\n`);
write("src/index.ts", "export {};\n");
console.log(`created ${dir}`);
