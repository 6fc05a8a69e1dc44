// Generates the reference-agreement corpus: safetensors files on the edges the reference library
// (safetensors 0.8) draws — every dtype, the packed F4/F6 sizing rule, zero-size tensors,
// whitespace around the header, overflowing shapes — and expected.json (file -> ckpt's error code,
// or "ok"). test/reference/agreement.test.ts runs ckpt and the reference over these and over the
// hostile corpus in test/corpus. Run: node packages/tensors/test/reference/generate.mjs
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "corpus");

/** 8-byte little-endian header length + header text + data bytes. */
function file(header, data = 0) {
  const h = Buffer.from(typeof header === "string" ? header : JSON.stringify(header), "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(h.length));
  return Buffer.concat([prefix, h, Buffer.alloc(data, 0x3c)]);
}
const t = (dtype, shape, offsets) => ({ dtype, shape, data_offsets: offsets });

/**
 * Every dtype safetensors 0.8 names, with the bits of one element. Written out, not imported from
 * src/dtypes.ts: the corpus states the format independently of the table it tests.
 */
const DTYPES = {
  BOOL: 8,
  U8: 8,
  I8: 8,
  F8_E4M3: 8,
  F8_E5M2: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  F6_E2M3: 6,
  F6_E3M2: 6,
  F4: 4,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  I64: 64,
  U64: 64,
  F64: 64,
  C64: 64,
};

/** Tensors laid out one after another, `count` elements each; returns the header and data length. */
function chain(names, count, shape = [count]) {
  const header = {};
  let cursor = 0;
  for (const dtype of names) {
    const bytes = (count * DTYPES[dtype]) / 8;
    header[dtype.toLowerCase()] = t(dtype, shape, [cursor, cursor + bytes]);
    cursor += bytes;
  }
  return [header, cursor];
}
const [everyDtype, everyDtypeBytes] = chain(Object.keys(DTYPES), 8, [2, 4]);
const [everyEmpty] = chain(Object.keys(DTYPES), 0, [0, 3]);

const cases = {
  // --- every dtype, and names the reference does not know
  "ok-every-dtype": [file(everyDtype, everyDtypeBytes), "ok"],
  "ok-every-dtype-zero-size": [file(everyEmpty), "ok"],
  "dtype-c128": [file({ w: t("C128", [1], [0, 16]) }, 16), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-torch-name-f8-e4m3fn": [file({ w: t("F8_E4M3FN", [1], [0, 1]) }, 1), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-fp4": [file({ w: t("FP4", [2], [0, 1]) }, 1), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-f6-without-layout": [file({ w: t("F6", [4], [0, 3]) }, 3), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-e8m0-lowercase": [file({ w: t("f8_e8m0", [1], [0, 1]) }, 1), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-fnuz-size-mismatch": [
    file({ w: t("F8_E4M3FNUZ", [4], [0, 8]) }, 8),
    "SAFETENSORS_OFFSETS_SIZE_MISMATCH",
  ],
  "dtype-c64-sized-as-f32": [file({ w: t("C64", [2], [0, 8]) }, 8), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  // --- packed sub-byte dtypes: a tensor's bits must end on a byte boundary
  "ok-f4-even": [file({ w: t("F4", [4], [0, 2]) }, 2), "ok"],
  "ok-f4-odd-rows-even-total": [file({ w: t("F4", [3, 2], [0, 3]) }, 3), "ok"],
  "ok-f6-e2m3-four": [file({ w: t("F6_E2M3", [4], [0, 3]) }, 3), "ok"],
  "ok-f6-e3m2-two-by-two": [file({ w: t("F6_E3M2", [2, 2], [0, 3]) }, 3), "ok"],
  "ok-f4-then-f6-then-u8": [
    file({ a: t("F4", [2], [0, 1]), b: t("F6_E2M3", [4], [1, 4]), c: t("U8", [1], [4, 5]) }, 5),
    "ok",
  ],
  "ok-f4-zero-size": [file({ w: t("F4", [0], [0, 0]) }), "ok"],
  "f4-odd-count": [file({ w: t("F4", [3], [0, 2]) }, 2), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f4-odd-count-rounded-down": [file({ w: t("F4", [3], [0, 1]) }, 1), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f4-scalar": [file({ w: t("F4", [], [0, 1]) }, 1), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f4-one-byte-an-element": [file({ w: t("F4", [4], [0, 4]) }, 4), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "f6-e2m3-two": [file({ w: t("F6_E2M3", [2], [0, 2]) }, 2), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f6-e3m2-six": [file({ w: t("F6_E3M2", [6], [0, 5]) }, 5), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f6-e3m2-scalar": [file({ w: t("F6_E3M2", [], [0, 1]) }, 1), "SAFETENSORS_SHAPE_MISALIGNED"],
  "f6-one-byte-an-element": [file({ w: t("F6_E2M3", [4], [0, 4]) }, 4), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "f6-gap-after-f4": [
    file({ a: t("F4", [2], [0, 1]), b: t("F6_E2M3", [4], [2, 5]) }, 5),
    "SAFETENSORS_OFFSETS_GAP",
  ],
  // --- zero-size tensors
  "ok-zero-size-between": [
    file({ a: t("U8", [2], [0, 2]), b: t("F32", [0], [2, 2]), c: t("U8", [1], [2, 3]) }, 3),
    "ok",
  ],
  "ok-zero-size-at-end": [file({ a: t("U8", [2], [0, 2]), b: t("BF16", [4, 0], [2, 2]) }, 2), "ok"],
  "ok-zero-before-huge-dims": [file({ w: t("U8", [0, 2 ** 52, 2 ** 52], [0, 0]) }), "ok"],
  "zero-size-past-data": [
    file({ a: t("U8", [4], [0, 4]), b: t("F32", [0], [8, 8]) }, 4),
    "SAFETENSORS_OFFSETS_GAP",
  ],
  "zero-size-spanning-bytes": [file({ w: t("F32", [0], [0, 4]) }, 4), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "shape-u64-overflow": [file({ w: t("U8", [2 ** 32, 2 ** 32], [0, 1]) }, 1), "SAFETENSORS_SHAPE_TOO_LARGE"],
  // --- whitespace around and inside the header (JSON's four: space, tab, LF, CR)
  "ok-tab-padded": [file(`${JSON.stringify({ w: t("U8", [1], [0, 1]) })}\t\t\t`, 1), "ok"],
  "ok-newline-padded": [file(`${JSON.stringify({ w: t("U8", [1], [0, 1]) })}\n\n`, 1), "ok"],
  "ok-crlf-padded": [file(`${JSON.stringify({ w: t("U8", [1], [0, 1]) })}\r\n`, 1), "ok"],
  "ok-long-space-padding": [file(`{}${" ".repeat(4096)}`), "ok"],
  "ok-pretty-printed": [file(JSON.stringify({ w: t("U8", [2], [0, 2]) }, null, 2), 2), "ok"],
  "ok-unaligned-header-length": [
    file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'.padEnd(61), 4),
    "ok",
  ],
  "form-feed-padding": [file("{}\f"), "SAFETENSORS_HEADER_NOT_JSON"],
  "vertical-tab-padding": [file("{}\v"), "SAFETENSORS_HEADER_NOT_JSON"],
  "nbsp-padding": [file("{}\u00a0"), "SAFETENSORS_HEADER_NOT_JSON"],
  "nul-after-spaces": [file("{}   \u0000"), "SAFETENSORS_HEADER_NOT_JSON"],
  // --- metadata strings
  "ok-metadata-unicode-and-escapes": [
    file({ __metadata__: { ünï: '✓ "q" \\ \n\t\u0000 😀', "": "" }, w: t("U8", [1], [0, 1]) }, 1),
    "ok",
  ],
  "ok-metadata-empty": [file({ __metadata__: {} }), "ok"],
  "metadata-bool-value": [file({ __metadata__: { a: true } }), "SAFETENSORS_METADATA_INVALID"],
};

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const expected = {};
for (const [name, [bytes, code]] of Object.entries(cases)) {
  writeFileSync(join(out, `${name}.safetensors`), bytes);
  expected[`${name}.safetensors`] = code;
}
writeFileSync(join(here, "expected.json"), `${JSON.stringify(expected, null, 2)}\n`);
process.stdout.write(`wrote ${readdirSync(out).length} files to ${out}\n`);
