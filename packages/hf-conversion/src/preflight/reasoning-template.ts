import { Template } from "@huggingface/jinja";

/** The markers a reasoning model's template writes around the reasoning text (Qwen3, DeepSeek-R1). */
export const REASONING_OPEN = "<think>";
export const REASONING_CLOSE = "</think>";

/**
 * A node of @huggingface/jinja's parse tree, as far as this module reads and builds them (the
 * package exports the parser, not its node classes; its formatter dispatches on `type`).
 */
interface Node {
  type: string;
  [field: string]: unknown;
}

/** The canonical template, or why the processor's template cannot be brought to that form. */
export type CanonicalTemplate = { readonly text: string } | { readonly problem: string };

/**
 * The canonical form of a chat template (LF line endings first): its reasoning branch rendered
 * trimmed. The template is parsed by @huggingface/jinja (the engine huggingface.js renders chat
 * templates with, under the whitespace rules transformers uses); a *reasoning output* is an
 * output whose pieces (the operands of a `+`/`~` chain, or consecutive outputs of one block) are a
 * string holding `<think>`, one value, and a string holding `</think>`. The reasoning branch is the
 * innermost `{% if %}` block holding every reasoning output (the whole template when none does).
 * It is written again by the engine's formatter, every tag and output trimmed (`{%- -%}`,
 * `{{- -}}`, text as string literals) and every reasoning value piped through `trim`, in place of
 * its source; every other byte of the template stays. So whichever path a request takes (with or
 * without tools) the reasoning is emitted stripped of surrounding whitespace. A template without a
 * reasoning output is only given LF line endings. Idempotent. Pure.
 */
export function canonicalTemplate(template: string): CanonicalTemplate {
  const text = template.replace(/\r\n?/g, "\n");
  let program: Node;
  try {
    program = new Template(text).parsed as unknown as Node;
  } catch (error) {
    return { problem: `the Jinja engine cannot parse it (${(error as Error).message})` };
  }
  const total = reasoningOutputs(program);
  if (typeof total === "string") return { problem: total };
  if (total.length === 0) return { text };
  const blocks = ifBlocks(text);
  if (typeof blocks === "string") return { problem: blocks };
  // Innermost first: the shortest block whose outputs are all of the template's.
  const candidates = blocks.sort((a, b) => a.end - a.start - (b.end - b.start));
  for (const block of candidates) {
    const source = text.slice(block.start, block.end);
    let fragment: Template;
    try {
      fragment = new Template(source);
    } catch {
      continue; // not a block the engine reads alone; an enclosing one is tried next
    }
    const found = reasoningOutputs(fragment.parsed as unknown as Node);
    if (typeof found === "string" || found.length !== total.length) continue;
    const unsupported = generationTag(source);
    if (unsupported !== undefined) return { problem: unsupported };
    for (const output of found) output.trim();
    const lineStart = text.lastIndexOf("\n", block.start - 1) + 1;
    const indent = /^[ \t]*/.exec(text.slice(lineStart, block.start))![0];
    const formatted = fragment
      .format({ indent: 4 })
      .split("\n")
      .map((line, i) => (i === 0 ? line : indent + line))
      .join("\n");
    // The block's outer delimiters stay the source's, so the whitespace around it is handled as before.
    const rendered = block.open + formatted.slice("{%-".length, -"-%}".length) + block.close;
    return { text: text.slice(0, block.start) + rendered + text.slice(block.end) };
  }
  const unsupported = generationTag(text);
  if (unsupported !== undefined) return { problem: unsupported };
  const whole = new Template(text);
  for (const output of reasoningOutputs(whole.parsed as unknown as Node) as ReasoningOutput[]) output.trim();
  return { text: whole.format({ indent: 4 }) };
}

/** The engine drops transformers' `{% generation %}` tags when it parses, so a rewrite would lose them. */
function generationTag(source: string): string | undefined {
  return /{%[-+]?\s*(end)?generation\s*[-+]?%}/.test(source)
    ? "its reasoning branch holds a {% generation %} tag, which the rewrite cannot keep"
    : undefined;
}

interface ReasoningOutput {
  /** Pipes the reasoning value through `trim` (once: an already trimmed value stays). */
  trim(): void;
}

/** One piece of what a block emits, with how to replace it in the tree. */
interface Piece {
  readonly node: Node;
  readonly replace: (node: Node) => void;
}

const isOutput = (node: Node) =>
  !["If", "For", "Set", "Macro", "Break", "Continue", "Comment", "CallStatement", "FilterStatement"].includes(
    node.type,
  );

function isConcatenation(node: Node): boolean {
  const operator = node.operator as { value?: string } | undefined;
  return node.type === "BinaryExpression" && (operator?.value === "+" || operator?.value === "~");
}

/** The operands of a left-to-right `+`/`~` chain, each with a setter into its parent. */
function flatten(node: Node, replace: (node: Node) => void, into: Piece[]): void {
  if (!isConcatenation(node)) {
    into.push({ node, replace });
    return;
  }
  flatten(node.left as Node, (n) => (node.left = n), into);
  flatten(node.right as Node, (n) => (node.right = n), into);
}

const stringOf = (node: Node) => (node.type === "StringLiteral" ? (node.value as string) : undefined);

/** Every reasoning output of the tree, or a problem when one emits more than one value between the markers. */
function reasoningOutputs(root: Node): ReasoningOutput[] | string {
  const found: ReasoningOutput[] = [];
  let problem: string | undefined;
  const scanBody = (body: Node[]) => {
    let pieces: Piece[] = [];
    const flush = () => {
      const outputs = scanPieces(pieces);
      if (typeof outputs === "string") problem ??= outputs;
      else found.push(...outputs);
      pieces = [];
    };
    body.forEach((statement, i) => {
      if (isOutput(statement)) {
        flatten(statement, (n) => (body[i] = n), pieces);
        return;
      }
      flush();
      for (const key of ["body", "alternate", "defaultBlock"]) {
        const child = statement[key];
        if (Array.isArray(child)) scanBody(child as Node[]);
      }
    });
    flush();
  };
  scanBody(root.body as Node[]);
  return problem ?? found;
}

/** The reasoning outputs in one run of emitted pieces. */
function scanPieces(pieces: readonly Piece[]): ReasoningOutput[] | string {
  const found: ReasoningOutput[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const open = stringOf(pieces[i]!.node);
    if (open === undefined || !open.includes(REASONING_OPEN)) continue;
    if (open.lastIndexOf(REASONING_CLOSE) > open.lastIndexOf(REASONING_OPEN)) continue;
    let j = i + 1;
    while (j < pieces.length && stringOf(pieces[j]!.node) === undefined) j++;
    const close = j < pieces.length ? stringOf(pieces[j]!.node)! : undefined;
    if (close === undefined || !close.includes(REASONING_CLOSE) || j === i + 1) continue;
    if (j > i + 2) {
      return `an output emits ${j - i - 1} values between ${REASONING_OPEN} and ${REASONING_CLOSE}; the canonical form trims one`;
    }
    const value = pieces[i + 1]!;
    found.push({
      trim: () => {
        const filter = value.node.filter as Node | undefined;
        if (
          value.node.type === "FilterExpression" &&
          filter?.type === "Identifier" &&
          filter.value === "trim"
        )
          return;
        value.replace({
          type: "FilterExpression",
          operand: value.node,
          filter: { type: "Identifier", value: "trim" },
        });
      },
    });
    i = j - 1;
  }
  return found;
}

/** An `{% if %}` ... `{% endif %}` block of the source: its span and the delimiters of its outer tags. */
interface IfBlock {
  readonly start: number;
  readonly end: number;
  /** `{%`, `{%-` or `{%+` of the `if` tag. */
  readonly open: string;
  /** `%}`, `-%}` or `+%}` of the `endif` tag. */
  readonly close: string;
}

/**
 * The `if` blocks of a template, found by scanning its tags (comments, `{{ }}` and `{% raw %}`
 * skipped, quotes inside tags honoured). The engine's tree carries no source positions, so the
 * span of the block to rewrite is taken from the source here.
 */
function ifBlocks(text: string): IfBlock[] | string {
  const blocks: IfBlock[] = [];
  const stack: { start: number; open: string }[] = [];
  let i = 0;
  const tagEnd = (from: number, closing: string): number => {
    let j = from;
    while (j < text.length) {
      const c = text[j]!;
      if (c === "'" || c === '"') {
        j++;
        while (j < text.length && text[j] !== c) j += text[j] === "\\" ? 2 : 1;
        j++;
      } else if (text.startsWith(closing, j)) return j + closing.length;
      else j++;
    }
    return -1;
  };
  while (i < text.length) {
    const at = text.indexOf("{", i);
    if (at < 0) break;
    const next = text[at + 1];
    if (next === "#") {
      const end = text.indexOf("#}", at + 2);
      if (end < 0) return "a comment is not closed";
      i = end + 2;
    } else if (next === "{") {
      const end = tagEnd(at + 2, "}}");
      if (end < 0) return "an output tag is not closed";
      i = end;
    } else if (next === "%") {
      const end = tagEnd(at + 2, "%}");
      if (end < 0) return "a statement tag is not closed";
      const inner = text.slice(at + 2, end - 2);
      const name = /^[-+]?\s*(\w+)/.exec(inner)?.[1];
      if (name === "raw") {
        const endRaw = /{%[-+]?\s*endraw\s*[-+]?%}/g;
        endRaw.lastIndex = end;
        const match = endRaw.exec(text);
        if (match === null) return "a raw block is not closed";
        i = match.index + match[0].length;
        continue;
      }
      if (name === "if")
        stack.push({ start: at, open: text.slice(at, at + 2 + (/^[-+]/.test(inner) ? 1 : 0)) });
      else if (name === "endif") {
        const opened = stack.pop();
        if (opened === undefined) return "an endif has no if";
        const close = /[-+]$/.test(inner) ? `${inner.at(-1)}%}` : "%}";
        blocks.push({ start: opened.start, end, open: opened.open, close });
      }
      i = end;
    } else i = at + 1;
  }
  return blocks;
}
