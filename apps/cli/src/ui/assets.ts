// The page's files: plain HTML, CSS and JavaScript with no build step of their own. The CLI's build
// copies src/ui/static/ to dist/ui/ (tsup.config.ts), beside the bundle that serves them.
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UiAssetsError } from "../errors.js";

/** Served paths and what they answer; nothing else is read from disk for a request. */
const FILES = {
  "/index.html": "text/html; charset=utf-8",
  "/app.js": "text/javascript; charset=utf-8",
  "/style.css": "text/css; charset=utf-8",
} as const;

export interface UiAssets {
  readonly dir: string;
  readonly files: ReadonlyMap<string, { readonly type: string; readonly body: Buffer }>;
}

/**
 * The page's files, read once at start: from `ui/` beside the built bundle (dist/bin.js), or from
 * `static/` beside this module when it runs from source (tests).
 */
export async function loadUiAssets(): Promise<UiAssets> {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const dir of [join(here, "ui"), join(here, "static")]) {
    const files = new Map<string, { type: string; body: Buffer }>();
    for (const [path, type] of Object.entries(FILES)) {
      const body = await readFile(join(dir, path)).catch(() => undefined);
      if (body !== undefined) files.set(path, { type, body });
    }
    if (files.size === Object.keys(FILES).length) return { dir, files };
  }
  throw new UiAssetsError(
    `the web view's files (index.html, app.js, style.css) are not in ${join(here, "ui")}: the installed ckpt is incomplete. Reinstall it, or rebuild apps/cli (pnpm build).`,
  );
}
