// @module-tag torch
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { torch2Python, testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import { copyTree, makeArtifact, makeFixture, PYTHON_TIMEOUT, request } from "./helpers.js";

/** Saves a word-level tokenizer with transformers into the base named by argv[1]. */
const SAVE_TOKENIZER = `
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = ["<unk>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>").save_pretrained(sys.argv[1])
`;

/**
 * For each directory of argv[1:]: the prompts transformers renders for one conversation with and
 * without tools, through the tokenizer's template (tokenizer_config.json) and through the
 * processor's (chat_template.json, passed as the template to render).
 */
const RENDER = `
import json, sys
from transformers import AutoTokenizer
tools = [{"type": "function", "function": {"name": "lookup", "description": "Look a word up.",
          "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}]
conversation = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Is it raining?"},
    {"role": "assistant", "content": "Yes.", "reasoning_content": "\\n  The report says rain.  \\n\\n"},
]
out = {}
for d in sys.argv[1:]:
    tok = AutoTokenizer.from_pretrained(d)
    processor = json.load(open(d + "/chat_template.json", encoding="utf-8"))["chat_template"]
    render = lambda **kw: tok.apply_chat_template(conversation, tokenize=False, **kw)
    out[d] = {
        "tokenizer": {"tools": render(tools=tools), "plain": render()},
        "processor": {"tools": render(tools=tools, chat_template=processor), "plain": render(chat_template=processor)},
    }
print(json.dumps(out))
`;

const run = (args: string[]) =>
  promisify(execFile)(torch2Python(), args, {
    env: { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_VERBOSITY: "error" },
    maxBuffer: 16 * 1024 * 1024,
  });

const reasoningOf = (prompt: string) => prompt.match(/<think>[\s\S]*?<\/think>/g);

let root: string;
let base: string;
let artifact: string;

beforeAll(async () => {
  root = await testdir("ckpt-hf-unified-");
  const fixture = await makeFixture(join(root, "fx"), "dense", 1, 17);
  artifact = await makeArtifact(join(root, "ckpt"), fixture.expert(0));
  base = await copyTree(fixture.base, join(root, "base"));
  await run(["-c", SAVE_TOKENIZER, base]);
  // A Qwen3-style template in both files, as a reasoning model ships it.
  const template = await readFile(
    new URL("./fixtures/reasoning-chat-template.jinja", import.meta.url),
    "utf8",
  );
  const tokenizerConfig = JSON.parse(await readFile(join(base, "tokenizer_config.json"), "utf8"));
  await writeFile(
    join(base, "tokenizer_config.json"),
    `${JSON.stringify({ ...tokenizerConfig, chat_template: template }, null, 2)}\n`,
  );
  await writeFile(
    join(base, "chat_template.json"),
    `${JSON.stringify({ chat_template: template }, null, 2)}\n`,
  );
}, PYTHON_TIMEOUT);

describe("--unified-chat-template, judged by transformers", () => {
  it(
    "the export renders one reasoning form with and without tools; the base does not",
    async () => {
      const out = join(root, "out");
      const report = await materializeHf(request(artifact, base, out, { unifiedChatTemplate: true }));
      expect(report.action).toBe("built");
      expect(report.marker.chat_template?.diff).toContain("reasoning_content | trim");
      const { stdout } = await run(["-c", RENDER, base, out]);
      const rendered = JSON.parse(stdout) as Record<
        string,
        Record<"tokenizer" | "processor", { tools: string; plain: string }>
      >;
      const before = rendered[base]!.tokenizer;
      // The plain path strips newlines only, the tools path nothing.
      expect(reasoningOf(before.plain)).toEqual(["<think>\n  The report says rain.  \n</think>"]);
      expect(reasoningOf(before.tools)).toEqual(["<think>\n\n  The report says rain.  \n\n\n</think>"]);
      const after = rendered[out]!;
      for (const prompt of [after.tokenizer.tools, after.tokenizer.plain]) {
        expect(reasoningOf(prompt)).toEqual(["<think>\nThe report says rain.\n</think>"]);
      }
      // The tools block is there, and outside the reasoning the prompts are the base's.
      expect(after.tokenizer.tools).toContain('"name": "lookup"');
      const outside = (prompt: string) => prompt.replace(/<think>[\s\S]*?<\/think>/, "");
      expect(outside(after.tokenizer.plain)).toBe(outside(before.plain));
      expect(outside(after.tokenizer.tools)).toBe(outside(before.tools));
      // Tokenizer-only and processor loaders render the same prompts.
      expect(after.processor).toEqual(after.tokenizer);
    },
    PYTHON_TIMEOUT,
  );
});
