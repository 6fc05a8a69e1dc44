import { cpSync, readFileSync } from "node:fs";
import { defineConfig } from "tsup";
import { packageBuild } from "../../tools/build/tsup.base";
import { troubleshootingEntries } from "../../tools/docs/error-codes.mjs";

const base = packageBuild({ bin: "src/bin.ts" });

export default defineConfig({
  ...base,
  // import.meta.url in the CommonJS build too: `ckpt ui` finds its page beside the bundle (src/ui/assets.ts).
  shims: true,
  define: {
    ...base.define,
    // The code registry `ckpt mcp`'s explain tool answers from (src/mcp/codes.ts), read from the
    // page that documents every code, so a build never ships remedies other than the docs'.
    __CKPT_TROUBLESHOOTING__: JSON.stringify(
      troubleshootingEntries(readFileSync("../../docs/troubleshooting.md", "utf8")),
    ),
  },
  // `ckpt ui`'s page is plain HTML, CSS and JavaScript: shipped as files in dist/ui/, unbundled.
  onSuccess: async () => {
    cpSync("src/ui/static", "dist/ui", { recursive: true });
  },
});
