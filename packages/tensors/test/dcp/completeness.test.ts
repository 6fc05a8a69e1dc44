// dcpCompleteness is pure: parsed metadata and observed sizes in, problems out.
import { describe, expect, test } from "vitest";
import { dcpCompleteness } from "../../src/dcp/completeness.js";
import type { DcpMetadata, DcpTensor } from "../../src/dcp/metadata.js";

const PIECE = 10;

/** Metadata of `tensors` ({fqn: [shape, [offsets, sizes, file][]]}), each chunk PIECE bytes in its file. */
function metadataOf(tensors: Record<string, [number[], [number[], number[], string][]]>): DcpMetadata {
  const cursor = new Map<string, number>();
  const storage: DcpMetadata["storage"][number][] = [];
  const list: DcpTensor[] = Object.entries(tensors).map(([fqn, [shape, chunks]]) => ({
    fqn,
    dtype: "F32",
    torchDtype: "float32",
    shape,
    chunks: chunks.map(([offsets, sizes, relativePath]) => {
      const info = {
        relativePath,
        offset: cursor.get(relativePath) ?? 0,
        length: PIECE,
        transformDescriptors: [],
      };
      cursor.set(relativePath, info.offset + PIECE);
      storage.push({ ...info, fqn, chunkOffsets: offsets });
      return { offsets, sizes, storage: info };
    }),
  }));
  return {
    file: ".metadata",
    tensors: list,
    bytes: [],
    storage,
    files: [...cursor].map(([relativePath, requiredLength]) => ({ relativePath, requiredLength })),
    version: "1.0.0",
    plannerData: {},
  };
}

const sizesOf = (metadata: DcpMetadata) =>
  new Map(metadata.files.map((f) => [f.relativePath, f.requiredLength]));

describe("dcpCompleteness", () => {
  test("a 2-D grid with uneven and zero-size chunks, a 0-d and an empty tensor are complete", () => {
    const metadata = metadataOf({
      w: [
        [5, 6],
        [
          [[0, 0], [3, 4], "a"],
          [[0, 4], [3, 2], "b"],
          [[3, 0], [2, 4], "a"],
          [[3, 4], [2, 2], "b"],
          [[5, 0], [0, 6], "b"],
        ],
      ],
      step: [[], [[[], [], "a"]]],
      empty: [[0, 3], []],
    });
    expect(dcpCompleteness(metadata, sizesOf(metadata))).toEqual([]);
  });

  test("an overlap names both chunks and the first shared element", () => {
    const metadata = metadataOf({
      w: [
        [4, 4],
        [
          [[0, 0], [3, 4], "a"],
          [[2, 0], [2, 4], "a"],
        ],
      ],
    });
    expect(dcpCompleteness(metadata, sizesOf(metadata))).toEqual([
      {
        code: "DCP_CHUNK_OVERLAP",
        file: ".metadata",
        tensor: "w",
        chunk: [2, 0],
        message: 'chunks [0,0] (size [3,4]) and [2,0] (size [2,4]) of "w" overlap at element [2,0]',
      },
    ]);
  });

  test("a gap counts the elements in no chunk and says where the first starts", () => {
    const metadata = metadataOf({
      w: [
        [4, 4],
        [
          [[0, 0], [2, 4], "a"],
          [[3, 0], [1, 4], "a"],
        ],
      ],
      step: [[], []],
    });
    expect(dcpCompleteness(metadata, sizesOf(metadata)).map((p) => [p.code, p.tensor, p.message])).toEqual([
      [
        "DCP_CHUNK_GAP",
        "w",
        '4 of the 16 elements of "w" [4,4] are in no chunk; the first gap starts at [2,0] (size [1,4])',
      ],
      [
        "DCP_CHUNK_GAP",
        "step",
        '1 of the 1 elements of "step" [] are in no chunk; the first gap starts at [] (size [])',
      ],
    ]);
  });

  test("missing, short and stray files name the first chunk in metadata order", () => {
    const metadata = metadataOf({
      w: [
        [4],
        [
          [[0], [2], "__0_0.distcp"],
          [[2], [2], "__1_0.distcp"],
        ],
      ],
      b: [[2], [[[0], [2], "__0_0.distcp"]]],
    });
    const sizes = new Map([
      ["__0_0.distcp", PIECE + 1],
      ["__3_0.distcp", 5],
      ["notes.txt", 5],
    ]);
    expect(
      dcpCompleteness(metadata, sizes).map(({ code, file, tensor, chunk }) => ({
        code,
        file,
        tensor,
        chunk,
      })),
    ).toEqual([
      { code: "DCP_FILE_SHORT", file: "__0_0.distcp", tensor: "b", chunk: [0] },
      { code: "DCP_FILE_MISSING", file: "__1_0.distcp", tensor: "w", chunk: [2] },
      { code: "DCP_FILE_UNEXPECTED", file: "__3_0.distcp", tensor: undefined, chunk: undefined },
    ]);
  });
});
