import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DTYPE_BITS,
  isSafetensorsDType,
  packedByteLength,
  parseSafetensorsHeader,
  planSafetensors,
  type SafetensorsHeader,
  TensorsError,
} from "../../src/index.js";

const DTYPES = Object.keys(DTYPE_BITS).filter(isSafetensorsDType);
const RUNS = 2000;

/** Invariants every accepted header must satisfy. */
function checkValid(header: SafetensorsHeader, headerLength: number, fileSize: number): void {
  let cursor = 0;
  for (const t of header.tensors) {
    expect(t.dataOffsets[0]).toBe(cursor);
    expect(t.byteLength).toBe((t.shape.reduce((a, d) => a * d, 1) * DTYPE_BITS[t.dtype]) / 8);
    expect(t.dataOffsets[1] - t.dataOffsets[0]).toBe(t.byteLength);
    expect(t.dataOffset).toBe(8 + headerLength + cursor);
    cursor = t.dataOffsets[1];
  }
  expect(header.dataByteLength).toBe(cursor);
  expect(8 + headerLength + cursor).toBe(fileSize);
  for (const v of Object.values(header.metadata)) expect(typeof v).toBe("string");
}

/** Parses and asserts: a valid result, or a TensorsError with a SAFETENSORS_ code; nothing else. */
function parseOrRefuse(bytes: Uint8Array, fileSize: number): "ok" | string {
  try {
    const header = parseSafetensorsHeader(bytes, { file: "fuzz.safetensors", fileSize });
    checkValid(header, bytes.length, fileSize);
    return "ok";
  } catch (error) {
    if (!(error instanceof TensorsError)) throw error;
    expect(error.code).toMatch(/^SAFETENSORS_[A-Z0-9_]+$/);
    expect(error.file).toBe("fuzz.safetensors");
    return error.code;
  }
}

const dim = fc.oneof(
  fc.nat(6),
  fc.integer({ min: -3, max: 3 }),
  fc.double(),
  fc.constant(2 ** 53),
  fc.string(),
  fc.constant(null),
);
const entry = fc.record(
  {
    dtype: fc.oneof(fc.constantFrom(...DTYPES), fc.string(), fc.integer()),
    shape: fc.oneof(
      fc.array(dim, { maxLength: 4 }),
      fc.array(fc.nat(4), { maxLength: 3 }),
      fc.jsonValue({ maxDepth: 2 }),
    ),
    data_offsets: fc.oneof(
      fc.tuple(fc.nat(64), fc.nat(64)),
      fc.array(fc.oneof(fc.integer({ min: -8, max: 64 }), fc.double()), { maxLength: 3 }),
      fc.jsonValue({ maxDepth: 2 }),
    ),
    extra: fc.jsonValue({ maxDepth: 1 }),
  },
  { requiredKeys: [] },
);
const metadata = fc.oneof(
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
  fc.jsonValue({ maxDepth: 2 }),
);
const headerObject = fc.record(
  {
    tensors: fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(entry, fc.jsonValue({ maxDepth: 2 })), {
      maxKeys: 5,
    }),
    metadata,
  },
  { requiredKeys: ["tensors"] },
);

/** Byte-level damage to an otherwise plausible header. */
const mutation = fc.oneof(
  fc.constant((b: Uint8Array) => b),
  fc.nat().map((n) => (b: Uint8Array) => b.subarray(0, b.length === 0 ? 0 : n % b.length)),
  fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([i, v]) => (b: Uint8Array) => {
    const c = b.slice();
    if (c.length > 0) c[i % c.length] = v;
    return c;
  }),
  fc.uint8Array({ maxLength: 8 }).map((tail) => (b: Uint8Array) => Uint8Array.from([...b, ...tail])),
  fc.nat(9).map((n) => (b: Uint8Array) => Uint8Array.from([...b, ...new Array(n).fill(0x20)])),
);

describe("safetensors header parser under fuzzing", () => {
  it("returns a valid header or throws TensorsError for structured, mutated headers", () => {
    const outcomes = new Map<string, number>();
    fc.assert(
      fc.property(headerObject, mutation, fc.integer({ min: -4, max: 4 }), (h, mutate, sizeDelta) => {
        const obj: Record<string, unknown> = { ...h.tensors };
        if ("metadata" in h) obj.__metadata__ = h.metadata;
        const bytes = mutate(new TextEncoder().encode(JSON.stringify(obj)));
        const plausibleData = Object.values(h.tensors).reduce<number>((max, e) => {
          const offsets = (e as { data_offsets?: unknown } | null)?.data_offsets;
          return Array.isArray(offsets) && typeof offsets[1] === "number" && Number.isSafeInteger(offsets[1])
            ? Math.max(max, offsets[1])
            : max;
        }, 0);
        const outcome = parseOrRefuse(bytes, Math.max(0, 8 + bytes.length + plausibleData + sizeDelta));
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }),
      { numRuns: RUNS, seed: 20251129 },
    );
    // the generator must reach both acceptance and many distinct refusals, or it tests little
    expect(outcomes.get("ok") ?? 0).toBeGreaterThan(5);
    expect(outcomes.size).toBeGreaterThan(10);
  });

  it("returns a valid header or throws TensorsError for arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.nat(400), (bytes, extra) => {
        parseOrRefuse(bytes, 8 + bytes.length + extra);
      }),
      { numRuns: RUNS, seed: 7 },
    );
  });

  it("accepts every header the writer plans", () => {
    const tensor = fc.record({
      dtype: fc.constantFrom(...DTYPES),
      shape: fc.array(fc.nat(5), { maxLength: 4 }),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), tensor), {
          selector: ([n]) => n,
          maxLength: 6,
        }),
        fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
        (entries, meta) => {
          const described = entries
            .filter(([n]) => n !== "__metadata__")
            .map(([name, t]) => ({ name, ...t }))
            // A packed F4/F6 shape whose bits end mid-byte is refused by the planner (tested in write-read).
            .filter(
              (t) =>
                packedByteLength(
                  t.dtype,
                  t.shape.reduce((a, d) => a * d, 1),
                ) !== undefined,
            );
          const plan = planSafetensors(described, meta);
          expect(parseOrRefuse(plan.headerBytes.subarray(8), plan.fileSize)).toBe("ok");
        },
      ),
      { numRuns: RUNS / 4, seed: 11 },
    );
  });
});
