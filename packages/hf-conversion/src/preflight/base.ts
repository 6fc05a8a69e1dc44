import { messageOf } from "@ckpt/errors";
import { readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  canonicalJson,
  hashFile,
  type JsonValue,
  ManifestError,
  parseStrictJson,
  readBoundedFile,
  sha256Hex,
} from "@ckpt/manifest";
import { type DType, HF_INDEX_FILE } from "@ckpt/tensors";
import { type HfDirectoryInspection, type HfShardLayout, inspectHfDirectory } from "../check/hf-directory.js";
import { type HfConversionErrorCode, refusal } from "../errors.js";
import { canonicalTemplate } from "./reasoning-template.js";
import {
  JINJA_TEMPLATE_FILE,
  PROCESSOR_CONFIG_FILE,
  PROCESSOR_TEMPLATE_FILE,
  planUnifiedTemplates,
  TEMPLATE_DIR,
  TOKENIZER_CONFIG_FILE,
  type UnifiedTemplatePlan,
} from "./templates.js";

/** Largest JSON or Jinja sidecar read whole: real tokenizer.json files are tens of MiB. */
export const MAX_SIDECAR_TEXT_BYTES = 256 * 1024 * 1024;
/** Weights and foreign indexes are never copied from the base: the output carries its own shards. */
const WEIGHT_FILE = /\.(safetensors|bin|pt|pth|ckpt|h5|msgpack|onnx|gguf)$|\.index\.json$/;
const CONFIG_FILE = "config.json";
const UTF8_BOM = [0xef, 0xbb, 0xbf];

/** A base file the output gets a copy of (config.json, tokenizer and processor files, templates). */
export interface SidecarFile {
  /** Relative to the base directory, POSIX separators. */
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly kind: "json" | "jinja" | "other";
}

/** One tensor of the base's layout: what the output must hold under that key, and where. */
export interface BaseTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly shard: string;
}

/** Everything the build needs from the base, read and checked before anything is written. */
export interface BasePreflight {
  /** Absolute base directory. */
  readonly dir: string;
  /** SHA-256 over the base's layout and sidecars (docs/hf-conversion.md, "Identity"). */
  readonly fingerprint: string;
  readonly inspection: HfDirectoryInspection;
  /** Shards in index order, each with its tensors in data order. */
  readonly shards: readonly HfShardLayout[];
  readonly tensors: ReadonlyMap<string, BaseTensor>;
  /** Files the output receives, sorted by path; config.json among them. */
  readonly sidecars: readonly SidecarFile[];
  /** Entries of the base that are not copied (subdirectories, weights outside the index). */
  readonly ignored: readonly string[];
  /** Present under `--unified-chat-template`. */
  readonly unified: UnifiedTemplatePlan | undefined;
  /** config.json ties the output embedding to the input one (`tie_word_embeddings`, or its text_config's). */
  readonly tiedEmbeddings: boolean;
}

/** Whether a model config ties its word embeddings: its own `tie_word_embeddings`, else its text model's. */
function tiesWordEmbeddings(config: { [key: string]: JsonValue } | undefined): boolean {
  const text = config?.text_config;
  const own = config?.tie_word_embeddings;
  if (typeof own === "boolean") return own;
  return isObject(text ?? null) && (text as { [key: string]: JsonValue }).tie_word_embeddings === true;
}

interface Problem {
  readonly code: HfConversionErrorCode;
  readonly file: string;
  readonly found: string;
  readonly consequence: string;
}

const COPY = "the build would copy it into the output, where loaders read it";

/** Decodes strict UTF-8; a byte-order mark is refused by name. */
function decodeStrict(bytes: Uint8Array): { text?: string; problem?: string } {
  if (UTF8_BOM.every((b, i) => bytes[i] === b)) return { problem: "starts with a UTF-8 byte-order mark" };
  try {
    return { text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    const at = firstInvalidUtf8(bytes);
    return { problem: `is not valid UTF-8 (first bad byte at offset ${at})` };
  }
}

function firstInvalidUtf8(bytes: Uint8Array): number {
  // Binary search on the longest decodable prefix: good enough to name a position.
  let lo = 0;
  let hi = bytes.length;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    try {
      decoder.decode(bytes.subarray(0, mid), { stream: true });
      decoder.decode();
      lo = mid;
    } catch {
      hi = mid - 1;
    }
  }
  return lo;
}

async function readText(path: string): Promise<{ bytes?: Uint8Array; problem?: string }> {
  try {
    return { bytes: await readBoundedFile(path, MAX_SIDECAR_TEXT_BYTES) };
  } catch (error) {
    if (error instanceof ManifestError) {
      if (error.code === "RECORD_TOO_LARGE")
        return { problem: `is larger than ${MAX_SIDECAR_TEXT_BYTES} bytes` };
      if (error.code === "RECORD_NOT_A_FILE") return { problem: "is not a regular file" };
    }
    return { problem: `cannot be read (${messageOf(error)})` };
  }
}

interface Entry {
  readonly path: string;
  readonly absolute: string;
  readonly kind: "file" | "dir" | "other";
}

async function listEntries(dir: string, prefix = ""): Promise<Entry[]> {
  const names = (await readdir(dir)).sort();
  const out: Entry[] = [];
  for (const name of names) {
    const absolute = join(dir, name);
    let kind: Entry["kind"] = "other";
    try {
      // Followed: a base in the Hugging Face cache is a directory of symbolic links into blobs/.
      const info = await stat(absolute);
      kind = info.isFile() ? "file" : info.isDirectory() ? "dir" : "other";
    } catch {
      kind = "other";
    }
    out.push({ path: prefix === "" ? name : `${prefix}/${name}`, absolute, kind });
  }
  return out;
}

/**
 * The one JSON reading of a sidecar, wherever one is read (preflight, the staged build's check):
 * strict JSON, with integers beyond 2^53 approximated, since sidecars are copied byte for byte and
 * never rewritten from the parsed value (transformers writes `model_max_length: 1e30` as an integer).
 */
export function parseSidecarJson(text: string, name: string): JsonValue {
  return parseStrictJson(text, { name, maxLength: MAX_SIDECAR_TEXT_BYTES, approximateLargeIntegers: true });
}

function isObject(value: JsonValue): value is { [key: string]: JsonValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Reads and checks the base alone, before anything is written: the weights directory
 * ({@link inspectHfDirectory}: index, weight_map, every shard's header and keys), every JSON
 * sidecar (strict UTF-8 without a byte-order mark, strict JSON, an object), `chat_template.json`'s
 * non-empty `chat_template`, every Jinja template (strict UTF-8), the template directory (regular
 * files only; refused whatever it holds under `unifiedChatTemplate`), and under
 * `unifiedChatTemplate` every template sidecar a loader would prefer. Every problem is collected
 * and the first is thrown as a `REFUSED: ...` {@link HfConversionError}.
 */
export async function preflightBase(
  baseDir: string,
  options: { unifiedChatTemplate: boolean },
): Promise<BasePreflight> {
  const dir = resolve(baseDir);
  let entries: Entry[];
  try {
    const info = await stat(dir);
    if (!info.isDirectory()) throw new Error("not a directory");
    entries = await listEntries(dir);
  } catch (error) {
    throw refusal(
      "MATERIALIZE_BASE_UNREADABLE",
      `the base ${dir} cannot be listed (${messageOf(error)})`,
      "the build reads its layout, config and sidecars from there",
      "Point --base at a Hugging Face model directory.",
      { file: dir, kind: "input" },
    );
  }
  const problems: Problem[] = [];
  const problem = (code: HfConversionErrorCode, file: string, found: string, consequence: string) =>
    problems.push({ code, file, found, consequence });

  const inspection = await inspectHfDirectory(dir);
  if (inspection.layout !== "sharded" || inspection.problems.some((p) => p.code === "HF_INDEX_MISSING")) {
    problem(
      "MATERIALIZE_BASE_INDEX",
      HF_INDEX_FILE,
      `the base has no ${HF_INDEX_FILE}`,
      "the build lays the output's shards out like the base's index",
    );
  }
  for (const p of inspection.problems) {
    if (p.code === "HF_INDEX_MISSING") continue;
    const isIndex = p.code === "HF_INDEX_INVALID" || p.code === "HF_WEIGHT_MAP_INVALID";
    problem(
      isIndex ? "MATERIALIZE_BASE_INDEX" : "MATERIALIZE_BASE_SHARD",
      p.file,
      `${p.file} of the base: ${p.message} [${p.code}]`,
      isIndex
        ? "the build lays the output's shards out like this index"
        : "the build opens every shard the index lists and gives the output the same layout",
    );
  }

  const indexShards = new Set(inspection.index?.shards ?? []);
  const sidecarEntries: Entry[] = [];
  const ignored: string[] = [];
  let templateDirEntries: Entry[] | undefined;
  for (const entry of entries) {
    const name = entry.path;
    if (name.startsWith(".") || name === HF_INDEX_FILE || indexShards.has(name)) continue;
    if (entry.kind === "dir") {
      if (name === TEMPLATE_DIR) templateDirEntries = await listEntries(entry.absolute, TEMPLATE_DIR);
      else ignored.push(`${name}/`);
      continue;
    }
    if (WEIGHT_FILE.test(name)) {
      ignored.push(name);
      continue;
    }
    if (entry.kind !== "file") {
      problem("MATERIALIZE_BASE_SIDECAR", name, `${name} of the base is not a readable regular file`, COPY);
      continue;
    }
    sidecarEntries.push(entry);
  }
  if (!entries.some((e) => e.path === CONFIG_FILE && e.kind === "file")) {
    problem(
      "MATERIALIZE_BASE_SIDECAR",
      CONFIG_FILE,
      `the base has no ${CONFIG_FILE}`,
      "the build copies config.json from the base, and loaders need it",
    );
  }
  if (templateDirEntries !== undefined) {
    if (options.unifiedChatTemplate) {
      problem(
        "MATERIALIZE_BASE_TEMPLATE",
        TEMPLATE_DIR,
        `the base has ${TEMPLATE_DIR}/ (${templateDirEntries.length} entries), which loaders prefer over the JSON templates`,
        "--unified-chat-template would rewrite the two JSON templates while a loader kept rendering with these",
      );
    }
    for (const entry of templateDirEntries) {
      if (entry.kind === "file") sidecarEntries.push(entry);
      else
        problem(
          "MATERIALIZE_BASE_TEMPLATE",
          entry.path,
          `${entry.path} of the base is not a regular file`,
          "the build copies the template directory, whose entries loaders read as template files",
        );
    }
  }

  // Read, decode and hash every sidecar.
  const sidecars: SidecarFile[] = [];
  const texts = new Map<string, string>();
  const jsons = new Map<string, { [key: string]: JsonValue }>();
  for (const entry of sidecarEntries) {
    const kind: SidecarFile["kind"] = entry.path.endsWith(".json")
      ? "json"
      : entry.path.endsWith(".jinja")
        ? "jinja"
        : "other";
    if (kind === "other") {
      try {
        const digest = await hashFile(entry.absolute);
        sidecars.push({ path: entry.path, size: digest.size, sha256: digest.sha256, kind });
      } catch (error) {
        problem(
          "MATERIALIZE_BASE_SIDECAR",
          entry.path,
          `${entry.path} of the base cannot be read (${messageOf(error)})`,
          COPY,
        );
      }
      continue;
    }
    const read = await readText(entry.absolute);
    if (read.problem !== undefined) {
      problem("MATERIALIZE_BASE_SIDECAR", entry.path, `${entry.path} of the base ${read.problem}`, COPY);
      continue;
    }
    const bytes = read.bytes!;
    sidecars.push({ path: entry.path, size: bytes.length, sha256: sha256Hex(bytes), kind });
    const decoded = decodeStrict(bytes);
    if (decoded.problem !== undefined) {
      problem(
        "MATERIALIZE_BASE_SIDECAR",
        entry.path,
        `${entry.path} of the base ${decoded.problem}`,
        `${COPY} as strict UTF-8 ${kind === "json" ? "JSON" : "template text"}`,
      );
      continue;
    }
    texts.set(entry.path, decoded.text!);
    if (kind !== "json") continue;
    let value: JsonValue;
    try {
      value = parseSidecarJson(decoded.text!, entry.path);
    } catch (error) {
      problem(
        "MATERIALIZE_BASE_SIDECAR",
        entry.path,
        `${entry.path} of the base is not valid JSON (${messageOf(error)})`,
        COPY,
      );
      continue;
    }
    if (!isObject(value)) {
      problem(
        "MATERIALIZE_BASE_SIDECAR",
        entry.path,
        `${entry.path} of the base is JSON but not an object`,
        `${COPY}, and loaders index it as an object`,
      );
      continue;
    }
    jsons.set(entry.path, value);
  }
  const processor = jsons.get(PROCESSOR_TEMPLATE_FILE);
  if (processor !== undefined) {
    const template = processor.chat_template;
    if (typeof template !== "string" || template === "") {
      problem(
        "MATERIALIZE_BASE_TEMPLATE",
        PROCESSOR_TEMPLATE_FILE,
        `${PROCESSOR_TEMPLATE_FILE} of the base has no non-empty chat_template string`,
        "the build would ship it, and the processor loads its template from there",
      );
    }
  }

  let unified: UnifiedTemplatePlan | undefined;
  if (options.unifiedChatTemplate) {
    unified = planUnified(texts, jsons, problem);
  }
  sidecars.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));

  if (problems.length > 0) {
    const first = problems[0]!;
    const more =
      problems.length > 1
        ? ` (${problems.length - 1} more: ${problems
            .slice(1, 4)
            .map((p) => p.file)
            .join(", ")}${problems.length > 4 ? ", ..." : ""})`
        : "";
    throw refusal(
      first.code,
      first.found,
      first.consequence,
      `Fix the base ${dir}, or use another --base${more}.`,
      {
        file: join(dir, first.file),
        problems: problems.map((p) => `REFUSED: ${p.found}; ${p.consequence}`),
      },
    );
  }

  const tensors = new Map<string, BaseTensor>();
  for (const shard of inspection.shardLayouts) {
    for (const t of shard.tensors)
      tensors.set(t.name, { name: t.name, dtype: t.dtype, shape: t.shape, shard: shard.file });
  }
  const indexBytes = inspection.indexBytes!;
  const fingerprint = sha256Hex(
    canonicalJson({
      index: { size: indexBytes.length, sha256: sha256Hex(indexBytes) },
      shards: inspection.shardLayouts.map((s) => ({
        path: s.file,
        size: s.size,
        header_sha256: s.headerSha256,
      })),
      sidecars: sidecars.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
    }),
  );
  return {
    dir,
    fingerprint,
    inspection,
    shards: inspection.shardLayouts,
    tensors,
    sidecars,
    ignored,
    unified,
    tiedEmbeddings: tiesWordEmbeddings(jsons.get("config.json")),
  };
}

/** The unified-template checks and plan; records problems instead of throwing. */
function planUnified(
  texts: ReadonlyMap<string, string>,
  jsons: ReadonlyMap<string, { [key: string]: JsonValue }>,
  problem: (code: HfConversionErrorCode, file: string, found: string, consequence: string) => void,
): UnifiedTemplatePlan | undefined {
  const consequence =
    "--unified-chat-template would write the processor's template into both JSON template files";
  const processor = jsons.get(PROCESSOR_TEMPLATE_FILE);
  const tokenizer = jsons.get(TOKENIZER_CONFIG_FILE);
  const processorTemplate = processor?.chat_template;
  const tokenizerTemplate = tokenizer?.chat_template;
  if (processor === undefined) {
    if (!texts.has(PROCESSOR_TEMPLATE_FILE))
      problem(
        "MATERIALIZE_BASE_TEMPLATE",
        PROCESSOR_TEMPLATE_FILE,
        `the base has no ${PROCESSOR_TEMPLATE_FILE}`,
        `${consequence}, and that file holds it`,
      );
    return undefined;
  }
  if (tokenizer === undefined) {
    if (!texts.has(TOKENIZER_CONFIG_FILE))
      problem(
        "MATERIALIZE_BASE_TEMPLATE",
        TOKENIZER_CONFIG_FILE,
        `the base has no ${TOKENIZER_CONFIG_FILE}`,
        `${consequence}, and the tokenizer reads its template there`,
      );
    return undefined;
  }
  if (typeof tokenizerTemplate !== "string") {
    problem(
      "MATERIALIZE_BASE_TEMPLATE",
      TOKENIZER_CONFIG_FILE,
      `${TOKENIZER_CONFIG_FILE} of the base has no chat_template string`,
      `${consequence}, replacing the tokenizer's template there`,
    );
    return undefined;
  }
  if (typeof processorTemplate !== "string" || processorTemplate === "") return undefined; // already refused
  const rendered = canonicalTemplate(processorTemplate);
  if ("problem" in rendered) {
    problem(
      "MATERIALIZE_BASE_TEMPLATE",
      PROCESSOR_TEMPLATE_FILE,
      `the chat_template of ${PROCESSOR_TEMPLATE_FILE} of the base cannot be brought to its canonical form: ${rendered.problem}`,
      consequence,
    );
    return undefined;
  }
  const canonical = rendered.text;
  const jinja = texts.get(JINJA_TEMPLATE_FILE);
  if (jinja !== undefined && jinja !== canonical) {
    problem(
      "MATERIALIZE_BASE_TEMPLATE",
      JINJA_TEMPLATE_FILE,
      `the base has ${JINJA_TEMPLATE_FILE}, which loaders prefer over the JSON templates, and it differs from the processor's template`,
      `${consequence} while a loader kept rendering with ${JINJA_TEMPLATE_FILE}`,
    );
  }
  const processorConfig = jsons.get(PROCESSOR_CONFIG_FILE);
  if (
    processorConfig !== undefined &&
    "chat_template" in processorConfig &&
    processorConfig.chat_template !== canonical
  ) {
    problem(
      "MATERIALIZE_BASE_TEMPLATE",
      PROCESSOR_CONFIG_FILE,
      `${PROCESSOR_CONFIG_FILE} of the base carries a chat_template, which the processor prefers, and it differs from the processor's template`,
      `${consequence} while the processor kept rendering with that one`,
    );
  }
  return planUnifiedTemplates(
    texts.get(PROCESSOR_TEMPLATE_FILE)!,
    processorTemplate,
    texts.get(TOKENIZER_CONFIG_FILE)!,
    tokenizerTemplate,
    canonical,
  );
}
