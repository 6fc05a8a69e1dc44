// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { execFileSync } from "node:child_process";
import { mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { canonicalTemplate, preflightBase } from "../src/index.js";
import { copyTree, type Fixture, makeFixture, PYTHON_TIMEOUT } from "./helpers.js";

let root: string;
let fixture: Fixture;

beforeAll(async () => {
  root = await testdir("ckpt-hf-preflight-");
  fixture = await makeFixture(join(root, "fx"), "moe", 0, 5);
}, PYTHON_TIMEOUT);

let copies = 0;
async function base(change: (dir: string) => Promise<unknown> = async () => {}): Promise<string> {
  const dir = await copyTree(fixture.base, join(root, `base-${copies++}`));
  await change(dir);
  return dir;
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

function canonicalOf(template: string): string {
  const canonical = canonicalTemplate(template);
  if (!("text" in canonical)) throw new Error(canonical.problem);
  return canonical.text;
}

describe("preflightBase accepts a sound base", () => {
  it("lists its layout and sidecars and fingerprints them", async () => {
    const pre = await preflightBase(fixture.base, { unifiedChatTemplate: false });
    expect(pre.shards.map((s) => s.file)).toEqual([
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
    ]);
    expect(pre.sidecars.map((s) => s.path)).toEqual([
      "chat_template.json",
      "config.json",
      "generation_config.json",
      "preprocessor_config.json",
      "special_tokens_map.json",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    expect(pre.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(pre.unified).toBeUndefined();
  });

  it("the fingerprint follows the layout and the sidecars, not the tensor data", async () => {
    const a = await preflightBase(fixture.base, { unifiedChatTemplate: false });
    const sameLayout = await base(async (d) => {
      // Flip one data byte far from the header: the layout is the same.
      const path = join(d, "model-00002-of-00002.safetensors");
      const bytes = await readFile(path);
      bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 0xff, bytes.length - 1);
      await writeFile(path, bytes);
    });
    expect((await preflightBase(sameLayout, { unifiedChatTemplate: false })).fingerprint).toBe(a.fingerprint);
    const otherConfig = await base((d) =>
      writeFile(join(d, "generation_config.json"), '{"temperature": 1.0}\n'),
    );
    expect((await preflightBase(otherConfig, { unifiedChatTemplate: false })).fingerprint).not.toBe(
      a.fingerprint,
    );
  });

  it("does not copy weights outside the index, hidden files or other directories, and says so", async () => {
    const dir = await base(async (d) => {
      await writeFile(join(d, "pytorch_model.bin"), "weights");
      await writeFile(join(d, ".materialized"), "{}");
      await mkdir(join(d, "original"));
    });
    const pre = await preflightBase(dir, { unifiedChatTemplate: false });
    expect(pre.ignored).toEqual(["original/", "pytorch_model.bin"]);
    expect(pre.sidecars.some((s) => s.path.startsWith("."))).toBe(false);
  });

  it("follows symbolic links, as a base in the Hugging Face cache is made of them", async () => {
    const dir = await base(async (d) => {
      await rm(join(d, "tokenizer.json"));
      await symlink(join(fixture.base, "tokenizer.json"), join(d, "tokenizer.json"));
    });
    const pre = await preflightBase(dir, { unifiedChatTemplate: false });
    expect(pre.sidecars.find((s) => s.path === "tokenizer.json")).toBeDefined();
  });
});

describe("preflightBase refuses, in the one REFUSED family, naming the file", () => {
  it.each<[string, (dir: string) => Promise<unknown>, string, RegExp]>([
    [
      "a JSON sidecar with a byte-order mark",
      async (d) =>
        writeFile(
          join(d, "tokenizer_config.json"),
          Buffer.concat([BOM, await readFile(join(d, "tokenizer_config.json"))]),
        ),
      "MATERIALIZE_BASE_SIDECAR",
      /^REFUSED: tokenizer_config\.json of the base starts with a UTF-8 byte-order mark; /,
    ],
    [
      "a JSON sidecar that is not UTF-8",
      (d) => writeFile(join(d, "generation_config.json"), Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])),
      "MATERIALIZE_BASE_SIDECAR",
      /generation_config\.json of the base is not valid UTF-8 \(first bad byte at offset 2\)/,
    ],
    [
      "a JSON sidecar that is not JSON",
      (d) => writeFile(join(d, "special_tokens_map.json"), "{ not json"),
      "MATERIALIZE_BASE_SIDECAR",
      /special_tokens_map\.json of the base is not valid JSON/,
    ],
    [
      "a JSON sidecar that is not an object",
      (d) => writeFile(join(d, "preprocessor_config.json"), "[1, 2]"),
      "MATERIALIZE_BASE_SIDECAR",
      /preprocessor_config\.json of the base is JSON but not an object; .*loaders index it as an object/,
    ],
    [
      "chat_template.json without a chat_template string",
      (d) => writeFile(join(d, "chat_template.json"), '{"chat_template": ""}'),
      "MATERIALIZE_BASE_TEMPLATE",
      /chat_template\.json of the base has no non-empty chat_template string/,
    ],
    [
      "a Jinja template that is not UTF-8",
      (d) => writeFile(join(d, "chat_template.jinja"), Buffer.from([0x7b, 0x7b, 0xc3, 0x28])),
      "MATERIALIZE_BASE_SIDECAR",
      /chat_template\.jinja of the base is not valid UTF-8/,
    ],
    [
      "a template directory entry that is not a regular file",
      async (d) => {
        await mkdir(join(d, "additional_chat_templates", "nested"), { recursive: true });
      },
      "MATERIALIZE_BASE_TEMPLATE",
      /additional_chat_templates\/nested of the base is not a regular file/,
    ],
    [
      "a FIFO planted as a sidecar",
      async (d) => execFileSync("mkfifo", [join(d, "vocab.txt")]),
      "MATERIALIZE_BASE_SIDECAR",
      /vocab\.txt of the base is not a readable regular file/,
    ],
    [
      "a base without config.json",
      (d) => rm(join(d, "config.json")),
      "MATERIALIZE_BASE_SIDECAR",
      /the base has no config\.json/,
    ],
    [
      "a base without an index",
      (d) => rm(join(d, "model.safetensors.index.json")),
      "MATERIALIZE_BASE_INDEX",
      /the base has no model\.safetensors\.index\.json; the build lays the output's shards out like the base's index/,
    ],
    [
      "an index whose weight_map is empty",
      (d) => writeFile(join(d, "model.safetensors.index.json"), '{"weight_map": {}}'),
      "MATERIALIZE_BASE_INDEX",
      /\[HF_WEIGHT_MAP_INVALID\]/,
    ],
    [
      "a shard the index lists that is missing",
      (d) => rm(join(d, "model-00002-of-00002.safetensors")),
      "MATERIALIZE_BASE_SHARD",
      /\[HF_SHARD_MISSING\]; the build opens every shard the index lists/,
    ],
  ])("%s", async (_label, change, code, message) => {
    const dir = await base(change);
    const error = await preflightBase(dir, { unifiedChatTemplate: false }).catch((e) => e);
    expect(error).toMatchObject({ name: "HfConversionError", code, kind: "refused" });
    expect(error.message).toMatch(message);
    expect(error.message).toMatch(/^REFUSED: .+; .+\. Fix the base /);
  });

  it("lists every problem, not only the first", async () => {
    const dir = await base(async (d) => {
      await writeFile(join(d, "special_tokens_map.json"), "[]");
      await writeFile(join(d, "generation_config.json"), "nope");
    });
    const error = await preflightBase(dir, { unifiedChatTemplate: false }).catch((e) => e);
    expect(error.problems).toHaveLength(2);
    expect(error.message).toMatch(/\(1 more: special_tokens_map\.json\)/);
  });
});

describe("preflightBase under --unified-chat-template", () => {
  const unified = { unifiedChatTemplate: true };

  it("plans both template files from the processor's template", async () => {
    const pre = await preflightBase(fixture.base, unified);
    const processor = JSON.parse(
      await readFile(join(fixture.base, "chat_template.json"), "utf8"),
    ).chat_template;
    expect(pre.unified?.canonical).toBe(canonicalOf(processor));
    expect(pre.unified?.canonical).toContain("message.reasoning_content | trim");
    expect(pre.unified?.diff).toMatch(/^--- a\/tokenizer_config\.json:chat_template\n/);
    expect(pre.unified?.diff).toContain("strip");
  });

  it("refuses a chat_template.jinja that differs from the canonical text, and allows one that equals it", async () => {
    const differs = await base((d) => writeFile(join(d, "chat_template.jinja"), "{{ other }}"));
    await expect(preflightBase(differs, unified)).rejects.toThrow(
      /^REFUSED: the base has chat_template\.jinja, which loaders prefer over the JSON templates, and it differs/,
    );
    const processor = JSON.parse(
      await readFile(join(fixture.base, "chat_template.json"), "utf8"),
    ).chat_template;
    const equal = await base((d) => writeFile(join(d, "chat_template.jinja"), canonicalOf(processor)));
    expect((await preflightBase(equal, unified)).sidecars.map((s) => s.path)).toContain(
      "chat_template.jinja",
    );
  });

  it("refuses a processor template the Jinja engine cannot parse, naming the engine's reason", async () => {
    const dir = await base((d) =>
      writeFile(join(d, "chat_template.json"), '{"chat_template": "{%- if messages %}unclosed"}'),
    );
    const error = await preflightBase(dir, unified).catch((e) => e);
    expect(error).toMatchObject({ code: "MATERIALIZE_BASE_TEMPLATE", file: join(dir, "chat_template.json") });
    expect(error.message).toMatch(
      /^REFUSED: the chat_template of chat_template\.json of the base cannot be brought to its canonical form: the Jinja engine cannot parse it \(/,
    );
    await expect(preflightBase(dir, { unifiedChatTemplate: false })).resolves.toBeDefined();
  });

  it("refuses additional_chat_templates/ whatever it holds, empty included", async () => {
    const empty = await base((d) => mkdir(join(d, "additional_chat_templates")));
    await expect(preflightBase(empty, unified)).rejects.toMatchObject({ code: "MATERIALIZE_BASE_TEMPLATE" });
    await expect(preflightBase(empty, { unifiedChatTemplate: false })).resolves.toBeDefined();
  });

  it("refuses a processor_config.json chat_template that differs", async () => {
    const dir = await base((d) => writeFile(join(d, "processor_config.json"), '{"chat_template": "x"}'));
    await expect(preflightBase(dir, unified)).rejects.toThrow(
      /processor_config\.json of the base carries a chat_template/,
    );
  });

  it("refuses a base whose tokenizer_config.json has no template to replace", async () => {
    const dir = await base((d) => writeFile(join(d, "tokenizer_config.json"), '{"eos_token": "x"}'));
    await expect(preflightBase(dir, unified)).rejects.toThrow(
      /tokenizer_config\.json of the base has no chat_template string/,
    );
    const none = await base((d) => rm(join(d, "chat_template.json")));
    await expect(preflightBase(none, unified)).rejects.toThrow(/the base has no chat_template\.json/);
  });
});
