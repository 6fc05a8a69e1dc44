// checkSidecars on directories made here (no generated fixture), so they run in the fast lane.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { hashFile } from "@ckpt/manifest";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { planUnifiedTemplates, type SidecarFile } from "../src/index.js";
import { checkSidecars } from "../src/verify/sidecars.js";

// What transformers writes into tokenizer_config.json when a tokenizer has no length limit: an
// integer beyond 2^53, which the preflight reads approximated; the staged build's check must too.
const HUGE = "1000000000000000019884624838656";
const CANONICAL = "{{ messages | length }}";

async function unifiedPair(tokenizerExtra: string) {
  const root = await testdir("ckpt-hf-sidecars-");
  const base = join(root, "base");
  const out = join(root, "out");
  await mkdir(base);
  await mkdir(out);
  const processor = '{"chat_template": "{{ messages }}"}\n';
  const tokenizer = `{"chat_template": "{{ other }}", "model_max_length": ${HUGE}${tokenizerExtra}}\n`;
  await writeFile(join(base, "chat_template.json"), processor);
  await writeFile(join(base, "tokenizer_config.json"), tokenizer);
  const plan = planUnifiedTemplates(processor, "{{ messages }}", tokenizer, "{{ other }}", CANONICAL);
  for (const file of plan.files) await writeFile(join(out, file.path), file.bytes);
  const sidecars: SidecarFile[] = [];
  for (const path of ["chat_template.json", "tokenizer_config.json"]) {
    const digest = await hashFile(join(base, path));
    sidecars.push({ path, size: digest.size, sha256: digest.sha256, kind: "json" });
  }
  return { base, out, plan, sidecars };
}

describe("checkSidecars of unified templates", () => {
  it("reads a tokenizer_config.json with an integer beyond 2^53 as the preflight does", async () => {
    const { base, out, plan, sidecars } = await unifiedPair("");
    expect(await readFile(join(out, "tokenizer_config.json"), "utf8")).toContain(`: ${HUGE}`);
    expect(await checkSidecars(out, base, sidecars, { unified: plan })).toEqual([]);
  });

  it("still finds a key other than chat_template that differs from the base's", async () => {
    const { base, out, plan, sidecars } = await unifiedPair(', "padding_side": "left"');
    const written = join(out, "tokenizer_config.json");
    await writeFile(written, (await readFile(written, "utf8")).replace('"left"', '"right"'));
    expect(await checkSidecars(out, base, sidecars, { unified: plan })).toEqual([
      "tokenizer_config.json: keys other than chat_template differ from the base's",
    ]);
  });

  it("still refuses a duplicate key, which the shared reader keeps strict", async () => {
    const { base, out, plan, sidecars } = await unifiedPair("");
    const written = join(out, "tokenizer_config.json");
    await writeFile(written, (await readFile(written, "utf8")).replace("{", '{"a": 1, "a": 2, '));
    const problems = await checkSidecars(out, base, sidecars, { unified: plan });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^tokenizer_config\.json: cannot be checked \(.*"a" appears twice/);
  });
});
