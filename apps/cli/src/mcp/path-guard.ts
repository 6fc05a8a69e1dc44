import { realpath, stat } from "node:fs/promises";
import { resolve } from "node:path";
import { isInside } from "@ckpt/manifest";
import { McpPathError, UsageError } from "../errors.js";

/**
 * Percent-encoded dots, separators, NUL and percent signs: ckpt paths are never URL-encoded, so a
 * path holding one is an attempt to smuggle `..` or `/` past a decoder somewhere downstream.
 */
const ENCODED_META = /%(?:2e|2f|5c|00|25)/i;
/** C0 controls and DEL: no checkpoint path holds one; NUL would also cut the path short in C. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const MAX_PATH_LENGTH = 4096;

/**
 * Why a requested path is refused before anything is resolved on disk, or undefined when its text
 * is acceptable and its lexical form (`..` collapsed against the root) stays inside one of
 * `roots` (the root as given and its real path). Pure.
 */
export function lexicalRefusal(requested: unknown, roots: readonly string[]): string | undefined {
  if (typeof requested !== "string") return "the path is not a string";
  if (requested.length === 0) return "the path is empty";
  if (requested.length > MAX_PATH_LENGTH) return `the path is longer than ${MAX_PATH_LENGTH} characters`;
  if (requested.includes("\u0000")) return "the path holds a NUL byte";
  if (CONTROL_CHARACTER.test(requested)) return "the path holds a control character";
  if (ENCODED_META.test(requested)) return "the path holds a percent-encoded dot, separator, NUL or percent";
  if (requested.includes("\\")) return "the path holds a backslash";
  const lexical = resolve(roots[0]!, requested);
  if (!roots.some((root) => isInside(root, lexical))) return `it names ${lexical}, outside the root`;
  return undefined;
}

/** What resolving the path on disk found: its real path, or the errno that stopped realpath. */
export type Resolution = { readonly real: string } | { readonly errno: string };

/**
 * The verdict on a resolved path: inside (with the real path to use), missing, or refused with
 * why. A symlink loop or a path that cannot be resolved is refused: nothing under the root can be
 * proven. Pure.
 */
export function resolvedVerdict(
  realRoot: string,
  resolution: Resolution,
): { readonly real: string } | { readonly missing: true } | { readonly refusal: string } {
  if ("errno" in resolution) {
    if (resolution.errno === "ENOENT" || resolution.errno === "ENOTDIR") return { missing: true };
    if (resolution.errno === "ELOOP") return { refusal: "it leads into a symbolic link loop" };
    return { refusal: `it cannot be resolved (${resolution.errno})` };
  }
  if (!isInside(realRoot, resolution.real)) {
    return { refusal: `it resolves to ${resolution.real}, outside the root (through a symbolic link)` };
  }
  return { real: resolution.real };
}

/** The root a server serves: as given (absolute) and with every symbolic link resolved. */
export interface GuardedRoot {
  readonly root: string;
  readonly realRoot: string;
}

/**
 * The real path of `requested` (relative to the root, or absolute) when it exists inside the root
 * after `..` and every symbolic link are resolved; otherwise `MCP_PATH_REFUSED` (an escape, a
 * loop, a NUL byte, an encoded separator, ...) or `MCP_PATH_NOT_FOUND`. Callers use the returned
 * real path, so no link is followed again after the check.
 */
export async function resolveInsideRoot(guarded: GuardedRoot, requested: unknown): Promise<string> {
  const shown = typeof requested === "string" ? JSON.stringify(requested) : String(requested);
  const early = lexicalRefusal(requested, [guarded.root, guarded.realRoot]);
  if (early !== undefined) throw refused(shown, guarded, early);
  const target = resolve(guarded.root, requested as string);
  const resolution: Resolution = await realpath(target).then(
    (real) => ({ real }),
    (error: NodeJS.ErrnoException) => ({ errno: error.code ?? "EUNKNOWN" }),
  );
  const verdict = resolvedVerdict(guarded.realRoot, resolution);
  if ("refusal" in verdict) throw refused(shown, guarded, verdict.refusal);
  if ("missing" in verdict) {
    throw new McpPathError(
      "MCP_PATH_NOT_FOUND",
      `path ${shown}: nothing exists at ${target}. Pass a path under ${guarded.root} (the \`list\` tool shows what is there).`,
    );
  }
  return verdict.real;
}

function refused(shown: string, guarded: GuardedRoot, why: string): McpPathError {
  return new McpPathError(
    "MCP_PATH_REFUSED",
    `path ${shown} refused: ${why}. Pass a path inside ${guarded.root}, relative to it or absolute.`,
  );
}

/** The served root (`--root`), refused (exit 2) unless it is an existing directory. */
export async function guardedRoot(root: string): Promise<GuardedRoot> {
  const absolute = resolve(root);
  const isDirectory = await stat(absolute).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDirectory)
    throw new UsageError(`--root ${root}: not an existing directory; pass the directory to serve.`);
  return { root: absolute, realRoot: await realpath(absolute) };
}
