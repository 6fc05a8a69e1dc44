import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The app's root: one level above `src/` (tests) and `dist/` (the built bin) alike. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The directory holding `ckpt_trainer_client.py` (shipped with the app). */
export const PYTHON_CLIENT_DIR = join(ROOT, "python");

/** The example trainer shipped with the app. */
export const EXAMPLE_TRAINER = join(ROOT, "examples", "train_mlp.py");

/** This app's version, reported by `hello`. */
export function serverVersion(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}
