// Generates the malformed/hostile safetensors corpus and expected.json (file -> error code, or
// "ok" for the few valid edge cases). Run: node packages/tensors/test/corpus/generate.mjs
// Files are tiny: lying length fields stand in for huge inputs.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "files");

/** 8-byte little-endian length + header bytes + data bytes. */
function file(header, data = new Uint8Array(0), length) {
  const h = typeof header === "string" ? Buffer.from(header, "utf8") : Buffer.from(header);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(length ?? h.length));
  return Buffer.concat([prefix, h, Buffer.from(data)]);
}
const json = (obj) => JSON.stringify(obj);
const zeros = (n) => new Uint8Array(n);
const t = (dtype, shape, offsets) => ({ dtype, shape, data_offsets: offsets });
const one = (entry, data = zeros(8)) => file(json({ w: entry }), data);

const cases = {
  // --- the length prefix
  "empty-file": [Buffer.alloc(0), "SAFETENSORS_FILE_TOO_SMALL"],
  "seven-bytes": [Buffer.alloc(7), "SAFETENSORS_FILE_TOO_SMALL"],
  "length-u64-max": [file("{}", zeros(0), 0xffffffffffffffffn), "SAFETENSORS_HEADER_TOO_LARGE"],
  "length-2pow63": [file("{}", zeros(0), 2n ** 63n), "SAFETENSORS_HEADER_TOO_LARGE"],
  "length-100MiB-plus-1": [file("{}", zeros(0), 100 * 1024 * 1024 + 1), "SAFETENSORS_HEADER_TOO_LARGE"],
  "length-past-eof": [file("{}", zeros(0), 1000), "SAFETENSORS_HEADER_PAST_EOF"],
  "length-one-past-eof": [file("{}", zeros(0), 3), "SAFETENSORS_HEADER_PAST_EOF"],
  "length-zero": [file("", zeros(0), 0), "SAFETENSORS_HEADER_NOT_JSON"],
  "length-cuts-json": [file(json({ w: t("F32", [2], [0, 8]) }), zeros(8), 10), "SAFETENSORS_HEADER_NOT_JSON"],
  "length-eats-data": [
    file(`${json({ w: t("F32", [1], [0, 4]) })}\x01\x02\x03\x04`, zeros(0)),
    "SAFETENSORS_HEADER_NOT_JSON",
  ],
  // --- encoding
  "not-utf8-ff": [file(Buffer.concat([Buffer.from('{"a'), Buffer.from([0xff]), Buffer.from('":1}')])), "SAFETENSORS_HEADER_NOT_UTF8"],
  "not-utf8-overlong": [file(Buffer.concat([Buffer.from('{"'), Buffer.from([0xc0, 0xaf]), Buffer.from('":1}')])), "SAFETENSORS_HEADER_NOT_UTF8"],
  "not-utf8-surrogate": [file(Buffer.concat([Buffer.from('{"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('":1}')])), "SAFETENSORS_HEADER_NOT_UTF8"],
  "not-utf8-truncated-sequence": [file(Buffer.concat([Buffer.from('{"'), Buffer.from([0xe2, 0x82]), Buffer.from('":1}')])), "SAFETENSORS_HEADER_NOT_UTF8"],
  bom: [file(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("{}")])), "SAFETENSORS_HEADER_BOM"],
  // --- JSON shape
  "duplicate-tensor": [
    file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', zeros(4)),
    "SAFETENSORS_HEADER_DUPLICATE_KEY",
  ],
  "duplicate-field": [file('{"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}', zeros(4)), "SAFETENSORS_HEADER_DUPLICATE_KEY"],
  "duplicate-metadata-key": [file('{"__metadata__":{"a":"1","a":"2"}}'), "SAFETENSORS_HEADER_DUPLICATE_KEY"],
  "duplicate-metadata": [file('{"__metadata__":{},"__metadata__":{}}'), "SAFETENSORS_HEADER_DUPLICATE_KEY"],
  "not-json-garbage": [file("{garbage}"), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-truncated": [file('{"a":'), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-trailing-comma": [file('{"__metadata__":{"a":"b"},}'), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-single-quotes": [file("{'a':1}"), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-raw-newline-in-string": [file('{"a\nb":1}'), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-bad-escape": [file('{"\\x41":1}'), "SAFETENSORS_HEADER_NOT_JSON"],
  "not-json-lone-surrogate-escape": [file('{"\\ud800":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'), "SAFETENSORS_HEADER_NOT_JSON"],
  "trailing-garbage-in-header": [file("{}x"), "SAFETENSORS_HEADER_NOT_JSON"],
  "nul-padding": [file("{}\0\0\0\0\0\0"), "SAFETENSORS_HEADER_NOT_JSON"],
  "two-objects": [file("{}{}"), "SAFETENSORS_HEADER_NOT_JSON"],
  "header-array": [file("[]"), "SAFETENSORS_HEADER_NOT_OBJECT"],
  "header-string": [file('"x"'), "SAFETENSORS_HEADER_NOT_OBJECT"],
  "header-null": [file("null"), "SAFETENSORS_HEADER_NOT_OBJECT"],
  "leading-space": [file(" {}"), "SAFETENSORS_HEADER_NOT_OBJECT"],
  "deep-arrays": [file(`{"a":${"[".repeat(20000)}${"]".repeat(20000)}}`), "SAFETENSORS_HEADER_TOO_DEEP"],
  "deep-objects": [file(`${'{"a":'.repeat(10000)}1${"}".repeat(10000)}`), "SAFETENSORS_HEADER_TOO_DEEP"],
  "number-overflow": [file('{"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}', zeros(4)), "SAFETENSORS_HEADER_NUMBER_OUT_OF_RANGE"],
  "integer-beyond-2pow53": [file('{"w":{"dtype":"U8","shape":[18014398509481984],"data_offsets":[0,4]}}', zeros(4)), "SAFETENSORS_HEADER_NUMBER_OUT_OF_RANGE"],
  // --- entries
  "entry-array": [file(json({ w: [1, 2] })), "SAFETENSORS_ENTRY_INVALID"],
  "entry-null": [file(json({ w: null })), "SAFETENSORS_ENTRY_INVALID"],
  "entry-string": [file(json({ w: "F32" })), "SAFETENSORS_ENTRY_INVALID"],
  "entry-unknown-field": [file(json({ w: { ...t("F32", [1], [0, 4]), offset: 0 } }), zeros(4)), "SAFETENSORS_ENTRY_INVALID"],
  "dtype-unknown": [one(t("F128", [1], [0, 16]), zeros(16)), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-lowercase": [one(t("f32", [2], [0, 8])), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-number": [one(t(5, [2], [0, 8])), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-missing": [file(json({ w: { shape: [2], data_offsets: [0, 8] } }), zeros(8)), "SAFETENSORS_DTYPE_UNKNOWN"],
  "dtype-proto": [one(t("__proto__", [2], [0, 8])), "SAFETENSORS_DTYPE_UNKNOWN"],
  "shape-string": [one(t("F32", "2", [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-missing": [file(json({ w: { dtype: "F32", data_offsets: [0, 8] } }), zeros(8)), "SAFETENSORS_SHAPE_INVALID"],
  "shape-negative": [one(t("F32", [-2], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-negative-zero": [file('{"w":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}'), "SAFETENSORS_SHAPE_INVALID"],
  "shape-float": [one(t("F32", [1.5], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-string-element": [one(t("F32", ["2"], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-null-element": [one(t("F32", [null], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-nested": [one(t("F32", [[2]], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  // The format's numbers are JSON integers: a fraction or an exponent is refused whatever its value.
  "shape-one-point-zero": [file('{"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', zeros(4)), "SAFETENSORS_SHAPE_INVALID"],
  "shape-exponent": [file('{"w":{"dtype":"F32","shape":[1E0],"data_offsets":[0,4]}}', zeros(4)), "SAFETENSORS_SHAPE_INVALID"],
  "offsets-exponent": [file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4e0]}}', zeros(4)), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-fraction-zero": [file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4]}}', zeros(4)), "SAFETENSORS_OFFSETS_INVALID"],
  "entry-number-float": [file('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":2.0}}', zeros(4)), "SAFETENSORS_ENTRY_INVALID"],
  "shape-1e300": [one(t("F32", [1e300], [0, 8])), "SAFETENSORS_SHAPE_INVALID"],
  "shape-product-huge": [one(t("F32", [2 ** 26, 2 ** 26, 2 ** 26], [0, 8])), "SAFETENSORS_SHAPE_TOO_LARGE"],
  "shape-product-overflows-double": [one(t("U8", Array(60).fill(2 ** 52), [0, 8])), "SAFETENSORS_SHAPE_TOO_LARGE"],
  // The element count is folded as the reference folds it, in u64: overflow is refused before a zero.
  "shape-overflow-then-zero": [file(json({ a: t("U8", [2 ** 52, 2 ** 52, 0], [0, 0]) })), "SAFETENSORS_SHAPE_TOO_LARGE"],
  "shape-rank-65": [one(t("U8", Array(65).fill(1), [0, 1]), zeros(1)), "SAFETENSORS_SHAPE_RANK_TOO_LARGE"],
  // --- offsets
  "offsets-missing": [file(json({ w: { dtype: "F32", shape: [2] } }), zeros(8)), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-three": [one(t("F32", [2], [0, 4, 8])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-one": [one(t("F32", [2], [8])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-negative": [one(t("F32", [2], [-8, 0])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-float": [one(t("F32", [2], [0, 8.5])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-strings": [one(t("F32", [2], ["0", "8"])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-object": [one(t("F32", [2], { begin: 0, end: 8 })), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-reversed": [one(t("F32", [0], [8, 0])), "SAFETENSORS_OFFSETS_INVALID"],
  "offsets-size-mismatch": [one(t("F32", [2], [0, 4])), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "offsets-size-mismatch-empty": [one(t("F32", [0, 5], [0, 8])), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "offsets-size-mismatch-scalar": [one(t("F64", [], [0, 4]), zeros(4)), "SAFETENSORS_OFFSETS_SIZE_MISMATCH"],
  "offsets-overlap": [file(json({ a: t("F32", [2], [0, 8]), b: t("F32", [2], [4, 12]) }), zeros(12)), "SAFETENSORS_OFFSETS_OVERLAP"],
  "offsets-same-range": [file(json({ a: t("F32", [2], [0, 8]), b: t("F32", [2], [0, 8]) }), zeros(8)), "SAFETENSORS_OFFSETS_OVERLAP"],
  "offsets-contained": [file(json({ a: t("F32", [4], [0, 16]), b: t("F32", [1], [4, 8]) }), zeros(16)), "SAFETENSORS_OFFSETS_OVERLAP"],
  "offsets-gap": [file(json({ a: t("F32", [1], [0, 4]), b: t("F32", [1], [8, 12]) }), zeros(12)), "SAFETENSORS_OFFSETS_GAP"],
  "offsets-not-from-zero": [one(t("F32", [1], [4, 8])), "SAFETENSORS_OFFSETS_GAP"],
  "offsets-past-eof": [one(t("F32", [1024], [0, 4096])), "SAFETENSORS_TRUNCATED"],
  "offsets-huge": [one(t("U8", [2 ** 50], [0, 2 ** 50])), "SAFETENSORS_TRUNCATED"],
  "data-truncated": [file(json({ a: t("F32", [2], [0, 8]), b: t("F32", [2], [8, 16]) }), zeros(12)), "SAFETENSORS_TRUNCATED"],
  "trailing-garbage-after-data": [one(t("F32", [2], [0, 8]), zeros(9)), "SAFETENSORS_TRAILING_BYTES"],
  "empty-header-with-data": [file("{}", zeros(4)), "SAFETENSORS_TRAILING_BYTES"],
  // --- metadata
  "metadata-number": [file(json({ __metadata__: { a: 1 } })), "SAFETENSORS_METADATA_INVALID"],
  "metadata-null-value": [file(json({ __metadata__: { a: null } })), "SAFETENSORS_METADATA_INVALID"],
  "metadata-nested": [file(json({ __metadata__: { a: { b: "c" } } })), "SAFETENSORS_METADATA_INVALID"],
  "metadata-array": [file(json({ __metadata__: ["a"] })), "SAFETENSORS_METADATA_INVALID"],
  "metadata-string": [file(json({ __metadata__: "format=pt" })), "SAFETENSORS_METADATA_INVALID"],
  // --- valid edge cases: must open and read
  "ok-empty-header": [file("{}"), "ok"],
  "ok-space-padded": [file(`${json({ w: t("F32", [2], [0, 8]) })}       `, zeros(8)), "ok"],
  "ok-whitespace-inside": [file('{ "w" : { "dtype" : "F32", "shape" : [ 2 ], "data_offsets" : [ 0, 8 ] } }', zeros(8)), "ok"],
  "ok-proto-name": [file('{"__proto__":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', zeros(1)), "ok"],
  "ok-zero-size-tensors": [file(json({ a: t("F32", [0], [0, 0]), b: t("F32", [3, 0], [0, 0]), c: t("U8", [1], [0, 1]) }), zeros(1)), "ok"],
  "ok-out-of-order-keys": [file(json({ b: t("U8", [2], [2, 4]), a: t("U8", [2], [0, 2]), __metadata__: { format: "pt" } }), zeros(4)), "ok"],
  "ok-unicode-name": [file(json({ "층.가중치": t("BF16", [2], [0, 4]) }), zeros(4)), "ok"],
};

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const expected = {};
for (const [name, [bytes, code]] of Object.entries(cases)) {
  const fileName = `${name}.safetensors`;
  writeFileSync(join(out, fileName), bytes);
  expected[fileName] = code;
}
writeFileSync(join(here, "expected.json"), `${JSON.stringify(expected, null, 2)}\n`);
process.stdout.write(`wrote ${readdirSync(out).length} files to ${out}\n`);
