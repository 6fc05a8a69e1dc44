#!/usr/bin/env node
// Creates a workspace package with the house shape: package.json with an exports map,
// one-line tsup/vitest configs that use tools/build, tsconfig, README and src/index.ts.
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
    ".": { types: "./dist/index.d.ts", import: "./dist/index.js", require: "./dist/index.cjs" },
    "./package.json": "./package.json",
  },
  files: ["dist"],
  engines: { node: ">=20.19" },
  scripts: {
    build: "tsup",
    test: "vitest run",
    "test:unit": "vitest run --mode unit",
    typecheck: "tsc --noEmit -p tsconfig.json",
    lint: "biome check .",
  },
  dependencies: {},
  devDependencies: {},
};
write("package.json", `${JSON.stringify(pkg, null, 2)}\n`);
write(
  "tsconfig.json",
  `${JSON.stringify({ extends: "../../tools/build/tsconfig.base.json", include: ["src", "test"] }, null, 2)}\n`,
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
write("src/index.ts", "export {};\n");
console.log(`created ${dir}`);
