import fc from "fast-check";
import { expect, test } from "vitest";
import { TensorsError } from "../../src/errors.js";
import { unpickle } from "../../src/torch/pickle/unpickler.js";
import { collectTensors } from "../../src/torch/reader.js";
import { torchPolicy } from "../../src/torch/tensor-policy.js";
import { planTorchPickle } from "../../src/torch/writer/write.js";

const { pickle: seed } = planTorchPickle({
  net: {
    w: { dtype: "BF16", shape: [4, 8] },
    b: { dtype: "F32", shape: [3] },
    s: { dtype: "I64", shape: [] },
  },
  step: 70_000,
  name: "x",
});

/** Only two outcomes are allowed: a value, or a TensorsError. Anything else (TypeError, RangeError, a hang) fails. */
function run(bytes: Uint8Array): void {
  try {
    collectTensors(unpickle(bytes, torchPolicy("fuzz.pt"), "fuzz.pt"), "fuzz.pt");
  } catch (error) {
    if (!(error instanceof TensorsError)) throw error;
    expect(error.code).toMatch(/^(PICKLE|TORCH)_[A-Z0-9_]+$/);
  }
}

const mutation = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ maxLength: 12 }) }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
);

function mutate(
  base: Uint8Array,
  edits: { kind: string; at: number; value?: number; bytes?: Uint8Array; length?: number }[],
): Uint8Array {
  let out = Array.from(base);
  for (const edit of edits) {
    const at = edit.at % (out.length + 1);
    if (edit.kind === "flip" && out.length > 0) out[at % out.length] = edit.value!;
    else if (edit.kind === "insert") out.splice(at, 0, ...edit.bytes!);
    else if (edit.kind === "delete") out.splice(at, edit.length!);
    else if (edit.kind === "truncate") out = out.slice(0, at);
  }
  return Uint8Array.from(out);
}

test("mutated torch pickles yield a value or a TensorsError (1500 runs)", () => {
  expect(() => run(seed)).not.toThrow();
  fc.assert(
    fc.property(fc.array(mutation, { minLength: 1, maxLength: 6 }), (edits) => run(mutate(seed, edits))),
    { numRuns: 1500, seed: 20240601 },
  );
});

test("random opcode soup yields a value or a TensorsError (1000 runs)", () => {
  // Bytes drawn mostly from real opcodes so the machine gets past the first instruction.
  const opcodes = [..."}])(tlaeusdRQbhjqrKJMX\x8c\x85\x86\x87\x88\x89N.0201\x93\x94\x95\x81\x8a\x8fG"].map(
    (c) => c.charCodeAt(0),
  );
  const soup = fc.array(fc.oneof(fc.constantFrom(...opcodes), fc.integer({ min: 0, max: 255 })), {
    maxLength: 200,
  });
  fc.assert(
    fc.property(soup, (body) => run(Uint8Array.from([0x80, 0x02, ...body, 0x2e]))),
    { numRuns: 1000, seed: 7 },
  );
});
