import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  UPLOADED_MARKER,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
  LATEST_POINTER,
  TENSOR_INVENTORY,
} from "../src/index.js";
import { EXAMPLES } from "./examples.js";

const DOC = join(import.meta.dirname, "..", "..", "..", "docs", "formats.md");
const text = readFileSync(DOC, "utf8");
const enc = (s: string) => new TextEncoder().encode(s);

const PARSERS: Record<string, (bytes: Uint8Array, name: string) => unknown> = {
  ".posttrain-checkpoint-artifact.json": ARTIFACT_MANIFEST.parse,
  ".posttrain-archive.json": ARCHIVE_DECLARATION.parse,
  ".uploaded": (bytes, name) => {
    const read = UPLOADED_MARKER.parse(bytes, name);
    expect(read.legacy).toBe(false);
    return read;
  },
  ".staged.json": STAGED_RECORD.parse,
  ".merge-complete.json": MERGE_COMPLETE.parse,
  ".materialized": MATERIALIZED_MARKER.parse,
  ".overlay_source.json": OVERLAY_SOURCE.parse,
  ".posttrain-manifest.json": CONTROL_MANIFEST.parse,
  _SUCCESS: MULTI_ROLE_SUCCESS.parse,
  ".posttrain-checkpoint-tensors.json": TENSOR_INVENTORY.parse,
};

const blocks = [...text.matchAll(/<!-- example: (\S+)(?: (\S+))? -->\n```json\n([\s\S]*?)```/g)].map((m) => ({
  file: m[1]!,
  label: m[2] ?? "",
  body: m[3]!,
}));

describe("docs/formats.md", () => {
  it("marks every json block with the record it shows", () => {
    expect(blocks.length).toBe((text.match(/```json/g) ?? []).length);
    expect(blocks.length).toBe(EXAMPLES.length);
  });

  it.each(blocks.map((b) => [`${b.file} ${b.label}`, b] as const))(
    "example %s parses, validates and is current",
    (_n, b) => {
      const parse = PARSERS[b.file];
      expect(parse, `no parser for ${b.file}`).toBeDefined();
      expect(() => parse!(enc(b.body), `docs/formats.md (${b.file})`)).not.toThrow();
      const example = EXAMPLES.find((e) => e.file === b.file && e.label === b.label);
      expect(example, `no example ${b.file} ${b.label} in test/examples.ts`).toBeDefined();
      // The formatter may reflow short arrays in the doc, so compare the canonical form.
      expect(canonicalJson(JSON.parse(b.body))).toBe(new TextDecoder().decode(example!.bytes()));
    },
  );

  it("shows a latest_checkpoint.txt that parses", () => {
    const pointer = /## `latest_checkpoint\.txt`[\s\S]*?```text\n(.*)\n```/.exec(text);
    expect(pointer).not.toBeNull();
    expect(LATEST_POINTER.parse(enc(pointer![1]!)).iteration).toBe(100);
  });
});
