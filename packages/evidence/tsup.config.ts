import { defineConfig } from "tsup";
import { packageBuild } from "../../tools/build/tsup.base";

export default defineConfig(packageBuild());
