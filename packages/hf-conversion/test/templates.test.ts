import { describe, expect, it } from "vitest";
import { canonicalTemplate, oneHunkDiff, planUnifiedTemplates } from "../src/index.js";
import { findTopLevelValue, replaceTopLevelString } from "../src/preflight/templates.js";

describe("canonicalTemplate", () => {
  it("writes every line ending as LF and changes nothing else", () => {
    expect(canonicalTemplate("a\r\nb\rc\n  d  ")).toBe("a\nb\nc\n  d  ");
    expect(canonicalTemplate("{{- x }}\n")).toBe("{{- x }}\n");
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
    const plan = planUnifiedTemplates(processorText, processor, tokenizerText, tokenizer);
    expect(plan.canonical).toBe("{% for m in messages %}{{ m.content }}{% endfor %}\n");
    expect(plan.files.map((f) => f.path)).toEqual(["chat_template.json", "tokenizer_config.json"]);
    const written = plan.files.map((f) => JSON.parse(new TextDecoder().decode(f.bytes)));
    expect(written[0].chat_template).toBe(plan.canonical);
    expect(written[1]).toEqual({ bos_token: null, chat_template: plan.canonical, eos_token: "<|im_end|>" });
    expect(plan.diff).toContain("-{% for m in messages %}{{ m.content | trim }}{% endfor %}");
    expect(plan.diff).toContain("+{% for m in messages %}{{ m.content }}{% endfor %}");
    expect(plan.processorTemplateSha256).toMatch(/^[0-9a-f]{64}$/);
  });
});
