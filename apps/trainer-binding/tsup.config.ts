import { defineConfig } from "tsup";
import { packageBuild } from "../../tools/build/tsup.base";

// shims: import.meta.url in the CJS build, which locates the shipped Python client.
export default defineConfig({ ...packageBuild({ bin: "src/bin.ts" }), shims: true });
