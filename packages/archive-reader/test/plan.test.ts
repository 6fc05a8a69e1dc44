import type { StagedRecord } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import { type FetchTarget, type LocalEntry, filesToHash, planFetch, stagedDirName } from "../src/index.js";

const H = (c: string) => c.repeat(64);
const source = (m: string) => ({
  uri: "s3://b/p/iter_000000300",
  destination: { scheme: "s3" as const, endpoint: "s3.example.com", bucket: "b", prefix: "p/iter_000000300" },
  manifest_sha256: H(m),
  declaration_sha256: H("d"),
});
const target: FetchTarget = {
  source: source("a"),
  iteration: 300,
  payloads: [
    { path: "model.pt", size: 10, sha256: H("1") },
    { path: "trainer.pt", size: 5, sha256: H("2") },
  ],
  manifest: { path: ".posttrain-checkpoint-artifact.json", size: 3, sha256: H("3") },
};
const record = (m: string, complete: boolean, files = target): StagedRecord => ({
  schema: "posttrain.staged-fetch.v1",
  source: source(m),
  iteration: 300,
  files: [...files.payloads, files.manifest],
  complete,
});
const file = (size: number, sha256?: string): LocalEntry => ({
  size,
  regular: true,
  ...(sha256 ? { sha256 } : {}),
});
const plan = (entries: Record<string, LocalEntry>, rec?: StagedRecord) =>
  planFetch(target, {
    stagedDir: "/stage/iter_000000300",
    entries: new Map(Object.entries(entries)),
    record: rec,
  });

describe("planFetch", () => {
  it("downloads everything into an empty or absent directory", () => {
    const p = plan({});
    expect(p.download.map((f) => [f.path, f.resumeFrom])).toEqual([
      ["model.pt", 0],
      ["trainer.pt", 0],
    ]);
    expect(p).toMatchObject({ keep: [], remove: [], writeManifest: true, upToDate: false, replacing: false });
    expect(p.record).toMatchObject({ complete: false, source: target.source });
    expect(p.record.files.map((f) => f.path)).toEqual([
      "model.pt",
      "trainer.pt",
      ".posttrain-checkpoint-artifact.json",
    ]);
  });

  it("refuses files without a record", () => {
    expect(() => plan({ "x.txt": file(1) })).toThrow(
      expect.objectContaining({ code: "READER_STAGE_FOREIGN" }),
    );
  });

  it("is up to date when a complete record's files all match", () => {
    const p = plan(
      {
        "model.pt": file(10, H("1")),
        "trainer.pt": file(5, H("2")),
        ".posttrain-checkpoint-artifact.json": file(3, H("3")),
      },
      record("a", true),
    );
    expect(p).toMatchObject({ upToDate: true, download: [], writeManifest: false });
  });

  it("resumes: keeps matching files, continues a short .part, restarts a too-long one, rewrites the manifest last", () => {
    const p = plan(
      {
        "model.pt.part": file(4),
        "trainer.pt": file(5, H("9")),
        "trainer.pt.part": file(9),
        ".posttrain-checkpoint-artifact.json": file(3, H("3")),
      },
      record("a", false),
    );
    expect(p.download.map((f) => [f.path, f.resumeFrom])).toEqual([
      ["model.pt", 4],
      ["trainer.pt", 0],
    ]);
    expect(p.remove).toEqual([".posttrain-checkpoint-artifact.json"]);
    expect(p.writeManifest).toBe(true);
  });

  it("keeps a matching file and does not count a non-regular entry as matching", () => {
    const p = plan(
      { "model.pt": file(10, H("1")), "trainer.pt": { size: 5, regular: false, sha256: H("2") } },
      record("a", false),
    );
    expect(p.keep.map((f) => f.path)).toEqual(["model.pt"]);
    expect(p.download.map((f) => f.path)).toEqual(["trainer.pt"]);
  });

  it("replacing another source removes only what its record names and refuses unnamed files in the way", () => {
    const old = record("b", true, { ...target, payloads: [{ path: "optim.pt", size: 1, sha256: H("4") }] });
    const p = plan(
      {
        "optim.pt": file(1),
        "optim.pt.part": file(1),
        ".posttrain-checkpoint-artifact.json": file(3),
        notes: file(1),
      },
      old,
    );
    expect(p).toMatchObject({ replacing: true, upToDate: false });
    expect(p.remove).toEqual([".posttrain-checkpoint-artifact.json", "optim.pt", "optim.pt.part"]);
    expect(() => plan({ "model.pt": file(10) }, old)).toThrow(
      expect.objectContaining({ code: "READER_STAGE_FOREIGN" }),
    );
    expect(() =>
      plan({ "trainer.pt.part": file(1) }, record("a", false, { ...target, payloads: [] })),
    ).toThrow(expect.objectContaining({ code: "READER_STAGE_FOREIGN" }));
  });

  it("hashes only owned files of the same source with the expected size", () => {
    const local = {
      stagedDir: "/s",
      entries: new Map(
        Object.entries({
          "model.pt": file(10),
          "trainer.pt": file(6),
          ".posttrain-checkpoint-artifact.json": file(3),
        }),
      ),
    };
    expect(filesToHash(target, { ...local, record: record("a", false) })).toEqual([
      "model.pt",
      ".posttrain-checkpoint-artifact.json",
    ]);
    expect(filesToHash(target, { ...local, record: record("b", false) })).toEqual([]);
    expect(filesToHash(target, { ...local, record: undefined })).toEqual([]);
  });
});

describe("stagedDirName", () => {
  it("keeps the prefix's iter_* name, formats one otherwise, refuses a contradiction", () => {
    expect(stagedDirName("iter_000300", 300, "u")).toBe("iter_000300");
    expect(stagedDirName("", 300, "u")).toBe("iter_000000300");
    expect(stagedDirName("latest", 7, "u")).toBe("iter_000000007");
    expect(() => stagedDirName("iter_000000400", 300, "u")).toThrow(
      expect.objectContaining({ code: "READER_REMOTE_RECORD_INVALID" }),
    );
  });
});
