import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import { canonicalTemplate, oneHunkDiff, planUnifiedTemplates } from "../src/index.js";
import { findTopLevelValue, replaceTopLevelString } from "../src/preflight/templates.js";

const FIXTURE = readFileSync(new URL("./fixtures/reasoning-chat-template.jinja", import.meta.url), "utf8");

function canonicalOf(template: string): string {
  const canonical = canonicalTemplate(template);
  if (!("text" in canonical)) throw new Error(canonical.problem);
  return canonical.text;
}

/** The `<think>` ... `</think>` segments of a rendered prompt. */
const reasoningOf = (prompt: string) => prompt.match(/<think>[\s\S]*?<\/think>/g);

const TOOLS = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
const CONVERSATION = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Is it raining?" },
  { role: "assistant", content: "Yes.", reasoning_content: "\n  The report says rain.  \n\n" },
];

describe("canonicalTemplate", () => {
  it("only writes LF line endings into a template without a reasoning output", () => {
    expect(canonicalOf("a\r\nb\rc\n  d  ")).toBe("a\nb\nc\n  d  ");
    expect(canonicalOf("{{- x }}\n")).toBe("{{- x }}\n");
    // Both markers in one string is an empty reasoning, not a branch to trim.
    const prompt = "{%- if add_generation_prompt %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
    expect(canonicalOf(prompt)).toBe(prompt);
  });

  it("renders the reasoning branch of a Qwen3-style template trimmed and keeps every other line", () => {
    const canonical = canonicalOf(FIXTURE);
    const diff = oneHunkDiff(FIXTURE, canonical, "t");
    // One hunk over the branch: its if and else tags trimmed, each reasoning value piped through trim.
    expect(diff.split("\n").filter((l) => l.startsWith("-") && !l.startsWith("---"))).toHaveLength(4);
    expect(diff).toContain("+            {%- if tools -%}");
    expect(diff).toContain('reasoning_content | trim + "\\n</think>\\n\\n" + content -}}');
    expect(diff).toContain('reasoning_content.strip("\\n") | trim + ');
    expect(canonicalOf(canonical)).toBe(canonical);
  });

  it("makes a request with and without tools render the same reasoning, which the base does not", () => {
    const base = new Template(FIXTURE);
    const canonical = new Template(canonicalOf(FIXTURE));
    const render = (t: Template, tools?: unknown) => t.render({ messages: CONVERSATION, tools });
    expect(reasoningOf(render(base, TOOLS))).not.toEqual(reasoningOf(render(base)));
    expect(reasoningOf(render(canonical, TOOLS))).toEqual(["<think>\nThe report says rain.\n</think>"]);
    expect(reasoningOf(render(canonical))).toEqual(["<think>\nThe report says rain.\n</think>"]);
    // Everything else renders as before: a conversation without reasoning, with and without tools.
    const plain = [CONVERSATION[1], { role: "assistant", content: "No." }];
    for (const tools of [undefined, TOOLS]) {
      for (const add_generation_prompt of [false, true]) {
        const vars = { messages: plain, tools, add_generation_prompt };
        expect(canonical.render(vars)).toBe(base.render(vars));
      }
    }
  });

  it("trims a reasoning value written as text around an output, and keeps the block's outer delimiters", () => {
    const template = "A\n{% if r %}\n<think>\n{{ r }}\n</think>\n{% endif %}\nB {{ x }}";
    const canonical = canonicalOf(template);
    expect(canonical).toMatch(/^A\n\{% if r -%\}\n/);
    expect(canonical).toMatch(/\{%- endif %\}\nB \{\{ x \}\}$/);
    for (const r of ["", " \n why \n"]) {
      expect(new Template(canonical).render({ r, x: 1 })).toBe(
        new Template(template).render({ r: r.trim(), x: 1 }),
      );
    }
  });

  it("refuses what it cannot rewrite faithfully, by reason", () => {
    expect(canonicalTemplate("{% if x %}")).toMatchObject({ problem: /the Jinja engine cannot parse it/ });
    expect(canonicalTemplate("{% if r %}{{ '<think>' + a + b + '</think>' }}{% endif %}")).toEqual({
      problem: "an output emits 2 values between <think> and </think>; the canonical form trims one",
    });
    expect(
      canonicalTemplate(
        "{% if r %}{% generation %}{{ '<think>' + r + '</think>' }}{% endgeneration %}{% endif %}",
      ),
    ).toMatchObject({ problem: /generation/ });
  });
});

describe("replaceTopLevelString keeps every other byte", () => {
  const text = `{
  "added_tokens_decoder": {"151643": {"content": "<|endoftext|>", "chat_template": "nested, not top level"}},
  "escaped \\"key\\"": "v\\"}{[",
  "chat_template": "old \\u00e9 {{ x }}",
  "model_max_length": 4096
}
`;
  it("finds the top-level value, not a nested one or one inside a string", () => {
    const span = findTopLevelValue(text, "chat_template")!;
    expect(text.slice(span.start, span.end)).toBe('"old \\u00e9 {{ x }}"');
    expect(findTopLevelValue(text, "absent")).toBeUndefined();
    const nested = findTopLevelValue(text, "added_tokens_decoder")!;
    expect(JSON.parse(text.slice(nested.start, nested.end))).toEqual(JSON.parse(text).added_tokens_decoder);
  });

  it("replaces only the value: the rest of the document is byte-identical", () => {
    const out = replaceTopLevelString(text, "chat_template", "new\n— template")!;
    expect(JSON.parse(out).chat_template).toBe("new\n— template");
    const before = text.split('"old \\u00e9 {{ x }}"');
    const after = out.split(JSON.stringify("new\n— template"));
    expect(after).toEqual(before);
    // Integer-like keys keep their place (a JSON.parse/stringify round trip would reorder them).
    expect(out.indexOf("151643")).toBe(text.indexOf("151643"));
  });
});

describe("oneHunkDiff", () => {
  it("is empty for equal texts", () => {
    expect(oneHunkDiff("a\nb", "a\nb", "f")).toBe("");
  });
  it("covers the first to the last differing line in one hunk", () => {
    expect(oneHunkDiff("a\nb\nc\nd", "a\nB\nc\nD", "f")).toBe(
      "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n-b\n-c\n-d\n+B\n+c\n+D\n",
    );
  });
  it("handles a pure insertion", () => {
    expect(oneHunkDiff("a\nc", "a\nb\nc", "f")).toBe("--- a/f\n+++ b/f\n@@ -1,0 +2,1 @@\n+b\n");
  });
});

describe("planUnifiedTemplates", () => {
  const processor = "{% for m in messages %}{{ m.content }}{% endfor %}\r\n";
  const tokenizer = "{% for m in messages %}{{ m.content | trim }}{% endfor %}";
  const processorText = `${JSON.stringify({ chat_template: processor }, null, 2)}\n`;
  const tokenizerText = `{"bos_token": null, "chat_template": ${JSON.stringify(tokenizer)}, "eos_token": "<|im_end|>"}`;

  it("writes the processor's canonical template into both files, records digests and the diff", () => {
    const canonical = canonicalOf(processor);
    const plan = planUnifiedTemplates(processorText, processor, tokenizerText, tokenizer, canonical);
    expect(plan.canonical).toBe("{% for m in messages %}{{ m.content }}{% endfor %}\n");
    expect(plan.files.map((f) => f.path)).toEqual(["chat_template.json", "tokenizer_config.json"]);
    const written = plan.files.map((f) => JSON.parse(new TextDecoder().decode(f.bytes)));
    expect(written[0].chat_template).toBe(plan.canonical);
    expect(written[1]).toEqual({ bos_token: null, chat_template: plan.canonical, eos_token: "<|im_end|>" });
    expect(plan.diff).toContain("-{% for m in messages %}{{ m.content | trim }}{% endfor %}");
    expect(plan.diff).toContain("+{% for m in messages %}{{ m.content }}{% endfor %}");
    expect(plan.processorTemplateSha256).toBe(createHash("sha256").update(processor).digest("hex"));
  });
});
