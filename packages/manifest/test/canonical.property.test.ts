import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UPLOADED_MARKER, type UploadedMarker } from "../src/index.js";

const segment = fc
  .stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,11}$/)
  .filter((s) => s !== "." && s !== "..");
const relPath = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const sha = fc.stringMatching(/^[0-9a-f]{64}$/);
const files = fc.uniqueArray(
  fc.record({ path: relPath, size: fc.nat({ max: Number.MAX_SAFE_INTEGER }), sha256: sha }),
  { minLength: 1, maxLength: 20, selector: (f) => f.path },
);
const marker: fc.Arbitrary<UploadedMarker> = fc.record({
  schema: fc.constant("posttrain.archive-marker.v1" as const),
  kind: fc.constant("artifact" as const),
  iteration: fc.nat(),
  destination: fc.record({
    scheme: fc.constantFrom("s3" as const, "gs" as const),
    endpoint: fc.stringMatching(/^[a-z0-9.-]{1,30}(:[0-9]{1,5})?$/),
    bucket: fc.stringMatching(/^[a-z0-9][a-z0-9.-]{2,20}$/),
    prefix: fc.oneof(fc.constant(""), relPath),
  }),
  files,
});

describe("canonical serialization", () => {
  it("is independent of inventory order and a fixed point of parse ∘ serialize", () => {
    fc.assert(
      fc.property(marker, fc.func(fc.integer()), (m, rank) => {
        const bytes = UPLOADED_MARKER.serialize(m);
        const shuffled = { ...m, files: [...m.files].sort((a, b) => rank(a.path) - rank(b.path)) };
        expect(UPLOADED_MARKER.serialize(shuffled)).toEqual(bytes);
        const read = UPLOADED_MARKER.parse(bytes);
        expect(read.legacy).toBe(false);
        if (!read.legacy) expect(UPLOADED_MARKER.serialize(read.marker)).toEqual(bytes);
      }),
      { numRuns: 200 },
    );
  });
});
