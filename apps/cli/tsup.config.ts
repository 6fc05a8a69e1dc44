import { readFileSync } from "node:fs";
import { defineConfig } from "tsup";
import { packageBuild } from "../../tools/build/tsup.base";
import { troubleshootingEntries } from "../../tools/docs/error-codes.mjs";

const base = packageBuild({ bin: "src/bin.ts" });

export default defineConfig({
  ...base,
  define: {
    ...base.define,
    // The code registry `ckpt mcp`'s explain tool answers from (src/mcp/codes.ts), read from the
    // page that documents every code, so a build never ships remedies other than the docs'.
    __CKPT_TROUBLESHOOTING__: JSON.stringify(
      troubleshootingEntries(readFileSync("../../docs/troubleshooting.md", "utf8")),
    ),
  },
});
