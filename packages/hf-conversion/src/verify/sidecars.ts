import { messageOf } from "@ckpt/errors";
import { join } from "node:path";
import { canonicalJson, hashFile, type JsonValue, readBoundedFile } from "@ckpt/manifest";

import { MAX_SIDECAR_TEXT_BYTES, parseSidecarJson, type SidecarFile } from "../preflight/base.js";
import type { UnifiedTemplatePlan } from "../preflight/templates.js";

async function readJsonObject(path: string): Promise<{ [key: string]: JsonValue }> {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(
    await readBoundedFile(path, MAX_SIDECAR_TEXT_BYTES),
  );
  const value = parseSidecarJson(text, path);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error("not a JSON object");
  return value;
}

function withoutTemplate(value: { [key: string]: JsonValue }): string {
  const { chat_template: _template, ...rest } = value;
  return canonicalJson(rest);
}

/**
 * Checks the copies of the base's files in `dir`: each byte-identical to the base's (by digest),
 * except under unified templates the two template files, checked by rule instead: `chat_template`
 * is the canonical processor template and every other key equals the base file's. Returns the
 * problems found (empty when all agree).
 */
export async function checkSidecars(
  dir: string,
  baseDir: string,
  sidecars: readonly SidecarFile[],
  options: {
    /** Check the unified template files by rule. */
    unified?: Pick<UnifiedTemplatePlan, "canonical" | "files">;
    /** Check these files against recorded digests instead of the base's (an existing output's marker). */
    recorded?: ReadonlyMap<string, string>;
  } = {},
): Promise<string[]> {
  const problems: string[] = [];
  const { unified, recorded } = options;
  const ruled = new Set(unified?.files.map((f) => f.path) ?? []);
  for (const file of sidecars) {
    const path = join(dir, ...file.path.split("/"));
    const recordedSha = recorded?.get(file.path);
    if (recordedSha !== undefined) {
      const digest = await hashFile(path).catch(() => undefined);
      if (digest?.sha256 !== recordedSha)
        problems.push(`${file.path}: differs from the digest its marker records`);
      continue;
    }
    if (ruled.has(file.path)) {
      try {
        const [written, original] = await Promise.all([
          readJsonObject(path),
          readJsonObject(join(baseDir, ...file.path.split("/"))),
        ]);
        if (written.chat_template !== unified!.canonical) {
          problems.push(`${file.path}: chat_template is not the processor's template in canonical form`);
        } else if (withoutTemplate(written) !== withoutTemplate(original)) {
          problems.push(`${file.path}: keys other than chat_template differ from the base's`);
        }
      } catch (error) {
        problems.push(`${file.path}: cannot be checked (${messageOf(error)})`);
      }
      continue;
    }
    try {
      const digest = await hashFile(path);
      if (digest.size !== file.size || digest.sha256 !== file.sha256) {
        problems.push(
          `${file.path}: differs from the base's copy (${digest.size} bytes, expected ${file.size})`,
        );
      }
    } catch (error) {
      problems.push(`${file.path}: ${messageOf(error)}`);
    }
  }
  return problems;
}
