import { sha256Hex } from "@ckpt/manifest";

/** The file whose `chat_template` a processor (AutoProcessor) renders with. */
export const PROCESSOR_TEMPLATE_FILE = "chat_template.json";
/** The file whose `chat_template` a tokenizer (AutoTokenizer, vLLM) renders with. */
export const TOKENIZER_CONFIG_FILE = "tokenizer_config.json";
/** Sidecars a loader prefers over the two JSON templates. */
export const JINJA_TEMPLATE_FILE = "chat_template.jinja";
export const TEMPLATE_DIR = "additional_chat_templates";
export const PROCESSOR_CONFIG_FILE = "processor_config.json";

/** Where a JSON value sits in a document: `[start, end)` in UTF-16 code units. */
interface Span {
  readonly start: number;
  readonly end: number;
}

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);

/**
 * Finds the value of top-level `key` in the text of a JSON object, by scanning (strings, escapes
 * and nesting), so the value can be replaced with every other byte kept. The text must already
 * have been validated as a JSON object. Returns undefined when the key is absent.
 */
export function findTopLevelValue(text: string, key: string): Span | undefined {
  // Index after the string whose opening quote is at `from`.
  const stringEnd = (from: number): number => {
    let j = from + 1;
    while (j < text.length) {
      const c = text[j]!;
      if (c === "\\") j += 2;
      else if (c === '"') return j + 1;
      else j++;
    }
    throw new SyntaxError("unterminated string");
  };
  // Index after the value starting at `from`.
  const valueEnd = (from: number): number => {
    if (text[from] === '"') return stringEnd(from);
    let j = from;
    if (text[from] !== "{" && text[from] !== "[") {
      while (j < text.length && !",}]".includes(text[j]!) && !WHITESPACE.has(text[j]!)) j++;
      return j;
    }
    let depth = 0;
    while (j < text.length) {
      const c = text[j]!;
      if (c === '"') {
        j = stringEnd(j);
        continue;
      }
      if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    throw new SyntaxError("unterminated container");
  };
  let i = 0;
  const skip = () => {
    while (i < text.length && WHITESPACE.has(text[i]!)) i++;
  };
  skip();
  if (text[i] !== "{") throw new SyntaxError("not a JSON object");
  i++;
  for (;;) {
    skip();
    if (text[i] === "}" || i >= text.length) return undefined;
    const keyEnd = stringEnd(i);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    i = keyEnd;
    skip();
    i++; // the colon
    skip();
    const start = i;
    const end = valueEnd(i);
    if (name === key) return { start, end };
    i = end;
    skip();
    if (text[i] === ",") i++;
  }
}

/** `text` with the top-level `key`'s value replaced by the JSON string `value`; undefined when absent. */
export function replaceTopLevelString(text: string, key: string, value: string): string | undefined {
  const span = findTopLevelValue(text, key);
  if (span === undefined) return undefined;
  return text.slice(0, span.start) + JSON.stringify(value) + text.slice(span.end);
}

function splitLines(text: string): string[] {
  return text === "" ? [] : text.split("\n");
}

/**
 * A unified diff of one hunk, without context lines, between `before` and `after`: everything
 * from the first line that differs to the last one. Empty when the texts are equal.
 */
export function oneHunkDiff(before: string, after: string, label: string): string {
  if (before === after) return "";
  const a = splitLines(before);
  const b = splitLines(after);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  const removed = a.slice(head, a.length - tail);
  const added = b.slice(head, b.length - tail);
  const range = (count: number) => `${count === 0 ? head : head + 1},${count}`;
  return [
    `--- a/${label}`,
    `+++ b/${label}`,
    `@@ -${range(removed.length)} +${range(added.length)} @@`,
    ...removed.map((l) => `-${l}`),
    ...added.map((l) => `+${l}`),
    "",
  ].join("\n");
}

/** What `--unified-chat-template` writes: both template files, their digests and the diff. */
export interface UnifiedTemplatePlan {
  readonly canonical: string;
  /** The base's processor template, as shipped. */
  readonly processorTemplateSha256: string;
  /** The two rewritten files, each the base file with only `chat_template` replaced. */
  readonly files: readonly { readonly path: string; readonly bytes: Uint8Array; readonly sha256: string }[];
  /** One hunk: the tokenizer's template as shipped -> the canonical template. */
  readonly diff: string;
}

/**
 * Plans the unified templates from the base's two JSON files (already validated as objects with
 * string `chat_template`s) and the processor template's canonical form
 * (`canonicalTemplate`). Pure.
 */
export function planUnifiedTemplates(
  processorText: string,
  processorTemplate: string,
  tokenizerText: string,
  tokenizerTemplate: string,
  canonical: string,
): UnifiedTemplatePlan {
  const encoder = new TextEncoder();
  const rewrite = (path: string, text: string) => {
    const replaced = replaceTopLevelString(text, "chat_template", canonical);
    if (replaced === undefined) throw new Error(`${path} has no chat_template (checked by the preflight)`);
    const bytes = encoder.encode(replaced);
    return { path, bytes, sha256: sha256Hex(bytes) };
  };
  return {
    canonical,
    processorTemplateSha256: sha256Hex(processorTemplate),
    files: [rewrite(PROCESSOR_TEMPLATE_FILE, processorText), rewrite(TOKENIZER_CONFIG_FILE, tokenizerText)],
    diff: oneHunkDiff(tokenizerTemplate, canonical, `${TOKENIZER_CONFIG_FILE}:chat_template`),
  };
}
