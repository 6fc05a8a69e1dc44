// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { cp, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { materializeHf } from "../src/index.js";
import {
  copyTree,
  type Fixture,
  makeArtifact,
  makeFixture,
  PYTHON_TIMEOUT,
  request,
  snapshot,
} from "./helpers.js";

let root: string;
let fixture: Fixture;
/** The fixture's base with a template directory (the unified mode refuses one). */
let withTemplates: string;
let artifact: string;
let outs = 0;

beforeAll(async () => {
  root = await testdir("ckpt-hf-staged-");
  fixture = await makeFixture(join(root, "fx"), "dense", 1, 23);
  artifact = await makeArtifact(join(root, "ckpt"), fixture.expert(0));
  withTemplates = await copyTree(fixture.base, join(root, "base-templates"));
  await mkdir(join(withTemplates, "additional_chat_templates"));
  await writeFile(
    join(withTemplates, "additional_chat_templates", "tool_use.jinja"),
    "{{- tools | tojson }}",
  );
  await writeFile(join(withTemplates, "additional_chat_templates", "rag.jinja"), "{{- documents }}");
}, PYTHON_TIMEOUT);

/**
 * A complete build of this request left at `<out>.tmp` with nothing at `<out>`, as a run killed
 * before its swap leaves it; also returns the bytes its shards, index and marker hold.
 */
async function inherited(base: string, unified = false) {
  const out = join(root, "out", `o${outs++}`);
  await materializeHf(request(artifact, base, out, { unifiedChatTemplate: unified }));
  await rename(out, `${out}.tmp`);
  return { out, staged: `${out}.tmp`, kept: weightsAndMarker(await snapshot(`${out}.tmp`)) };
}

/** The shards, the index and the marker of a snapshot: what a re-sync never touches. */
function weightsAndMarker(files: Map<string, string>): Map<string, string> {
  return new Map([...files].filter(([path]) => /\.safetensors$|\.index\.json$|^\.materialized$/.test(path)));
}

/** The sidecars of a tree: every file but the weights and the marker. */
function sidecarsOf(files: Map<string, string>): Map<string, string> {
  return new Map([...files].filter(([path]) => !weightsAndMarker(files).has(path)));
}

async function publishes(base: string, out: string, unified = false) {
  const report = await materializeHf(request(artifact, base, out, { unifiedChatTemplate: unified }));
  expect(report.action).toBe("published");
  return report;
}

/** Publishes `<out>.tmp` over `withTemplates`: the recovery reported, shards and marker kept, sidecars the base's. */
async function publishesLikeBase(out: string, kept: Map<string, string>, recovered: RegExp) {
  const report = await publishes(withTemplates, out);
  expect(report.recovered.join("\n")).toMatch(recovered);
  const published = await snapshot(out);
  expect(weightsAndMarker(published)).toEqual(kept);
  expect(sidecarsOf(published)).toEqual(sidecarsOf(await snapshot(withTemplates)));
}

describe("an inherited sole complete <out>.tmp gets its sidecars re-synced from the base", () => {
  it(
    "repairs damaged and missing sidecars (config.json included) through temporaries; shards and marker untouched",
    async () => {
      const { out, staged, kept } = await inherited(withTemplates);
      await rm(join(staged, "config.json"));
      await writeFile(join(staged, "generation_config.json"), '{"temperature": 9}\n');
      // Killed while tokenizer.json was being copied, before its rename.
      await writeFile(join(staged, "tokenizer.json.copying"), "{");
      await rm(join(staged, "tokenizer.json"));
      await publishesLikeBase(
        out,
        kept,
        /re-synced the sidecars of .*\.tmp from the base: removed tokenizer\.json\.copying, config\.json, generation_config\.json, tokenizer\.json/,
      );
    },
    PYTHON_TIMEOUT,
  );

  it(
    "under --unified-chat-template a rewrite killed before its rename is redone from the plan",
    async () => {
      const { out, staged, kept } = await inherited(fixture.base, true);
      const unified = await readFile(join(staged, "tokenizer_config.json"));
      // The rewrite did not reach its rename: the file in the base's form, a partial temporary.
      await cp(join(fixture.base, "tokenizer_config.json"), join(staged, "tokenizer_config.json"));
      await writeFile(join(staged, "tokenizer_config.json.writing"), unified.subarray(0, 10));
      const report = await publishes(fixture.base, out, true);
      expect(report.recovered.join("\n")).toMatch(
        /removed tokenizer_config\.json\.writing, tokenizer_config\.json$/m,
      );
      expect(await readFile(join(out, "tokenizer_config.json"))).toEqual(unified);
      expect(weightsAndMarker(await snapshot(out))).toEqual(kept);
    },
    PYTHON_TIMEOUT,
  );

  describe("the template directory is replaced through a staged copy and two renames; a kill at each step is completed", () => {
    const dir = (staged: string, suffix = "") => join(staged, `additional_chat_templates${suffix}`);
    const states: [string, (staged: string) => Promise<unknown>, RegExp][] = [
      [
        "during the copy (a partial .copying beside a damaged directory)",
        async (staged) => {
          await writeFile(join(dir(staged), "rag.jinja"), "damaged");
          await mkdir(dir(staged, ".copying"));
          await writeFile(join(dir(staged, ".copying"), "rag.jinja"), "{{-");
        },
        /removed additional_chat_templates\.copying\/, additional_chat_templates\/$/m,
      ],
      [
        "after the first rename (the old directory at .replaced, the copy not yet in place)",
        async (staged) => {
          await writeFile(join(dir(staged), "rag.jinja"), "damaged");
          await cp(dir(withTemplates), dir(staged, ".copying"), { recursive: true });
          await rename(dir(staged), dir(staged, ".replaced"));
        },
        /removed additional_chat_templates\.copying\/, renamed additional_chat_templates\.replaced\/ back, additional_chat_templates\/$/m,
      ],
      [
        "after the second rename (the old directory still at .replaced)",
        async (staged) => {
          await cp(dir(staged), dir(staged, ".replaced"), { recursive: true });
          await writeFile(join(dir(staged, ".replaced"), "rag.jinja"), "old");
        },
        /: removed additional_chat_templates\.replaced\/$/m,
      ],
    ];
    it.each(states)(
      "killed %s",
      async (_, crash, recovered) => {
        const { out, staged, kept } = await inherited(withTemplates);
        await crash(staged);
        await publishesLikeBase(out, kept, recovered);
      },
      PYTHON_TIMEOUT,
    );
  });

  it(
    "a failed recovery refuses by name, naming the state at <out>, and keeps the tree",
    async () => {
      const { out, staged, kept } = await inherited(withTemplates);
      // A directory where config.json belongs: the rename of its fresh copy cannot replace it.
      await rm(join(staged, "config.json"));
      await mkdir(join(staged, "config.json"));
      const error = await materializeHf(request(artifact, withTemplates, out)).catch((e) => e);
      expect(error).toMatchObject({
        code: "MATERIALIZE_STAGED_RECOVERY_FAILED",
        stage: "recover",
        file: staged,
      });
      expect(error.message).toMatch(
        new RegExp(
          `^REFUSED: ${staged}, the only complete build, failed its recovery check \\(its sidecars could not be re-synced from the base .*\\); ${out} is absent; `,
        ),
      );
      expect(weightsAndMarker(await snapshot(staged))).toEqual(kept);
      // The next request, once the cause is gone, publishes it.
      await rm(join(staged, "config.json"), { recursive: true });
      await publishes(withTemplates, out);
      expect(weightsAndMarker(await snapshot(out))).toEqual(kept);
    },
    PYTHON_TIMEOUT,
  );
});
