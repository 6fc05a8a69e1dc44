import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  UPLOADED_MARKER,
  ARTIFACT_MANIFEST,
  ARCHIVE_DECLARATION,
  STAGED_RECORD,
  MERGE_COMPLETE,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CONTROL_MANIFEST,
  MULTI_ROLE_SUCCESS,
  LATEST_POINTER,
  artifactPayloadFiles,
  canonicalJson,
  logicalComponentOf,
} from "../src/index.js";
import { serializeRecord } from "../src/records/common.js";
import * as ex from "./examples.js";

const enc = (text: string) => new TextEncoder().encode(text);
const dec = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const clone = <T>(v: T): T => structuredClone(v);

function errorOf(result: { ok: boolean; error?: unknown }) {
  expect(result.ok).toBe(false);
  return result.error as { code: string; field?: string; file?: string; message: string };
}

let dir: string;
beforeAll(async () => {
  dir = await testdir("ckpt-records-");
});

describe("every example round-trips through its canonical bytes", () => {
  it.each(ex.EXAMPLES.map((e) => [`${e.file} ${e.label}`, e] as const))("%s", (_label, e) => {
    const bytes = e.bytes();
    const text = dec(bytes);
    expect(text.endsWith("}\n")).toBe(true);
    // Canonical: re-serializing the parsed JSON gives the same bytes.
    expect(canonicalJson(JSON.parse(text))).toBe(text);
  });
});

describe("canonical JSON", () => {
  it("sorts keys by code point at every depth and ignores insertion order", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      canonicalJson({ a: { c: null, d: [3, { y: 2, z: 1 }] }, b: 1 }),
    );
    expect(canonicalJson({ "\u{1F600}": 1, "\uFFFF": 2, a: 3 })).toBe(
      '{\n  "a": 3,\n  "\uFFFF": 2,\n  "\u{1F600}": 1\n}\n',
    );
  });

  it("refuses values JSON cannot hold and drops undefined members", () => {
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(
      expect.objectContaining({ code: "RECORD_NOT_SERIALIZABLE" }),
    );
    expect(() => canonicalJson([1n])).toThrow(expect.objectContaining({ code: "RECORD_NOT_SERIALIZABLE" }));
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{\n  "b": 1\n}\n');
  });

  it("writes inventories sorted by path, so the same inventory gives the same digest", () => {
    const reversed = { ...ex.uploadedMarker, files: [...ex.uploadedMarker.files].reverse() };
    expect(dec(UPLOADED_MARKER.serialize(reversed))).toBe(dec(UPLOADED_MARKER.serialize(ex.uploadedMarker)));
  });

  it("orders physical components canonically and their file inventories by path", () => {
    const m = ARTIFACT_MANIFEST.parse(ARTIFACT_MANIFEST.serialize(ex.dcpArtifactManifest));
    expect(m.physical_components.map((c) => c.name)).toEqual(["model", "trainer"]);
    const model = m.physical_components[0]!;
    expect(model.kind === "dir" && model.files.map((f) => f.path)).toEqual([
      ".metadata",
      "__0_0.distcp",
      "__1_0.distcp",
    ]);
  });
});

describe("artifact manifest", () => {
  it("lists payload files relative to the artifact directory", () => {
    expect(artifactPayloadFiles(ex.dcpArtifactManifest).map((f) => [f.path, f.component])).toEqual([
      ["model/.metadata", "model"],
      ["model/__0_0.distcp", "model"],
      ["model/__1_0.distcp", "model"],
      ["trainer.pt", "trainer"],
    ]);
    expect(logicalComponentOf("optim")).toBe("optimizer");
    expect(logicalComponentOf("data")).toBe("training_state");
  });

  it("accepts a file descriptor without a digest (the publisher adds it)", () => {
    const m = clone(ex.artifactManifest);
    const c = m.physical_components[0]!;
    if (c.kind === "file") delete c.sha256;
    expect(ARTIFACT_MANIFEST.validate(m).ok).toBe(true);
  });

  it("accepts a sharded optim under consolidated", () => {
    const m = clone(ex.artifactManifest);
    m.logical_components = ["model", "optimizer"];
    m.physical_components.push({
      name: "optim",
      kind: "dir",
      path: "optim",
      files: [{ path: "__0_0.distcp", size: 1 }],
    });
    expect(ARTIFACT_MANIFEST.validate(m).ok).toBe(true);
  });

  const bad: Array<
    [string, (m: ReturnType<typeof clone<typeof ex.artifactManifest>>) => void, string, string?]
  > = [
    [
      "logical components out of order",
      (m) => (m.logical_components = ["optimizer", "model"]),
      "RECORD_INCONSISTENT",
      "logical_components[1]",
    ],
    [
      "duplicate logical components",
      (m) => (m.logical_components = ["model", "model"]),
      "RECORD_INCONSISTENT",
      "logical_components[1]",
    ],
    [
      "empty logical components",
      (m) => (m.logical_components = []),
      "RECORD_WRONG_COUNT",
      "logical_components",
    ],
    [
      "unknown logical component",
      (m) => ((m.logical_components as string[]) = ["weights"]),
      "RECORD_INVALID_VALUE",
      "logical_components[0]",
    ],
    [
      "component of an unselected logical",
      (m) => m.physical_components.push({ name: "optim", kind: "file", path: "optim.pt", size: 1 }),
      "RECORD_INCONSISTENT",
      "physical_components[1].name",
    ],
    [
      "wrong path for the name",
      (m) => (m.physical_components[0]!.path = "weights.pt"),
      "RECORD_INCONSISTENT",
      "physical_components[0].path",
    ],
    [
      "traversal path",
      (m) => (m.physical_components[0]!.path = "../model.pt"),
      "PATH_TRAVERSAL",
      "physical_components[0].path",
    ],
    ["a file under dcp", (m) => (m.format = "dcp"), "RECORD_INCONSISTENT", "physical_components[0].kind"],
    [
      "missing required component",
      (m) => (m.logical_components = ["model", "training_state"]),
      "RECORD_INCONSISTENT",
      "physical_components",
    ],
    ["unknown field", (m) => Object.assign(m, { extra: 1 }), "RECORD_UNKNOWN_FIELD", "extra"],
    ["negative iteration", (m) => (m.iteration = -1), "RECORD_OUT_OF_RANGE", "iteration"],
    [
      "fractional size",
      (m) => {
        Object.assign(m.physical_components[0]!, { size: 1.5 });
      },
      "RECORD_WRONG_TYPE",
      "physical_components[0].size",
    ],
    [
      "upper-case digest",
      (m) => {
        const c = m.physical_components[0]!;
        if (c.kind === "file") c.sha256 = ex.digestOf("x").toUpperCase();
      },
      "RECORD_BAD_DIGEST",
      "physical_components[0].sha256",
    ],
    ["missing schema", (m) => delete (m as Partial<typeof m>).schema, "RECORD_MISSING_FIELD", "schema"],
    [
      "unknown version",
      (m) => ((m as { schema: string }).schema = "posttrain.checkpoint-artifact.v9"),
      "RECORD_UNKNOWN_VERSION",
      "schema",
    ],
    [
      "missing iteration",
      (m) => delete (m as Partial<typeof m>).iteration,
      "RECORD_MISSING_FIELD",
      "iteration",
    ],
  ];
  it.each(bad)("refuses %s", (_label, mutate, code, field) => {
    const m = clone(ex.artifactManifest);
    mutate(m);
    const e = errorOf(ARTIFACT_MANIFEST.validate(m, "iter_000000300/.posttrain-checkpoint-artifact.json"));
    expect(e).toMatchObject({ code, field, file: "iter_000000300/.posttrain-checkpoint-artifact.json" });
    expect(e.message).toContain("iter_000000300/.posttrain-checkpoint-artifact.json");
    expect(() => serializeRecord(ARTIFACT_MANIFEST, m)).toThrow(expect.objectContaining({ code }));
  });

  it("refuses a directory component with an unsafe file path", () => {
    const m = clone(ex.dcpArtifactManifest);
    const c = m.physical_components[1]!;
    if (c.kind === "dir") c.files[0]!.path = "a//b";
    expect(errorOf(ARTIFACT_MANIFEST.validate(m))).toMatchObject({
      code: "PATH_EMPTY_SEGMENT",
      field: "physical_components[1].files[0].path",
    });
  });

  it("reads a file and names it in errors", async () => {
    const good = join(dir, "good.json");
    await writeFile(good, ARTIFACT_MANIFEST.serialize(ex.artifactManifest));
    expect(await ARTIFACT_MANIFEST.read(good)).toEqual(ex.artifactManifest);
    await expect(ARTIFACT_MANIFEST.read(join(dir, "missing.json"))).rejects.toMatchObject({
      code: "RECORD_NOT_FOUND",
    });
    await expect(ARTIFACT_MANIFEST.read(dir)).rejects.toMatchObject({ code: "RECORD_NOT_A_FILE" });
  });
});

describe("archive declaration", () => {
  it("requires the native manifest in the inventory, matching its digest", () => {
    const d = clone(ex.archiveDeclaration);
    d.files = d.files.filter((f) => f.path !== ".posttrain-checkpoint-artifact.json");
    expect(errorOf(ARCHIVE_DECLARATION.validate(d))).toMatchObject({
      code: "RECORD_INCONSISTENT",
      field: "files",
    });
    const e = clone(ex.archiveDeclaration);
    e.manifest_size += 1;
    expect(errorOf(ARCHIVE_DECLARATION.validate(e)).code).toBe("RECORD_INCONSISTENT");
  });

  it("refuses bookkeeping files and duplicate paths in the inventory", () => {
    const d = clone(ex.archiveDeclaration);
    d.files.push({ path: ".uploaded", size: 1, sha256: ex.digestOf("u") });
    expect(errorOf(ARCHIVE_DECLARATION.validate(d)).code).toBe("RECORD_INCONSISTENT");
    const e = clone(ex.archiveDeclaration);
    e.files.push({ ...e.files[0]! });
    expect(errorOf(ARCHIVE_DECLARATION.validate(e))).toMatchObject({
      code: "RECORD_DUPLICATE_PATH",
      field: "files[4].path",
    });
  });

  it("parses its own bytes", () => {
    expect(ARCHIVE_DECLARATION.parse(enc(canonicalJson(ex.archiveDeclaration)))).toEqual(
      ex.archiveDeclaration,
    );
  });
});

describe(".uploaded", () => {
  it("reads a JSON receipt", () => {
    expect(UPLOADED_MARKER.parse(UPLOADED_MARKER.serialize(ex.uploadedMarker))).toEqual({
      legacy: false,
      marker: {
        ...ex.uploadedMarker,
        files: [...ex.uploadedMarker.files].sort((a, b) => (a.path < b.path ? -1 : 1)),
      },
    });
  });

  it("reads the legacy one-line form as legacy, never as a receipt", async () => {
    expect(UPLOADED_MARKER.parse(enc("s3://bucket/run/checkpoints/iter_000000100\n"))).toEqual({
      legacy: true,
      text: "s3://bucket/run/checkpoints/iter_000000100",
    });
    expect(UPLOADED_MARKER.parse(enc(""))).toEqual({ legacy: true, text: "" });
    const path = join(dir, ".uploaded");
    await writeFile(path, "uploaded 2025-01-01T00:00:00Z");
    const read = await UPLOADED_MARKER.read(path);
    expect(read.legacy).toBe(true);
    expect("marker" in read).toBe(false);
  });

  it("refuses multi-line text and damaged JSON instead of treating them as legacy", () => {
    expect(() => UPLOADED_MARKER.parse(enc("line one\nline two\n"), "x/.uploaded")).toThrow(
      expect.objectContaining({ code: "RECORD_BAD_TEXT", file: "x/.uploaded" }),
    );
    expect(() => UPLOADED_MARKER.parse(enc('  {"schema": "posttrain.archive-marker.v1"'))).toThrow(
      expect.objectContaining({ code: "JSON_TRUNCATED" }),
    );
    expect(() => UPLOADED_MARKER.parse(enc("x".repeat(5000)))).toThrow(
      expect.objectContaining({ code: "RECORD_BAD_TEXT" }),
    );
  });

  it("requires digests on artifact receipts but not on full-checkpoint bulk", () => {
    expect(UPLOADED_MARKER.validate(ex.fullCheckpointUploadedMarker).ok).toBe(true);
    const m = clone(ex.fullCheckpointUploadedMarker);
    m.kind = "artifact";
    expect(errorOf(UPLOADED_MARKER.validate(m))).toMatchObject({
      code: "RECORD_MISSING_DIGEST",
      field: "files[0].sha256",
    });
  });

  it("refuses an endpoint that is a URL or carries user info", () => {
    for (const endpoint of ["https://s3.example.com", "key:secret@s3.example.com", "a b"]) {
      const m = clone(ex.uploadedMarker);
      m.destination = { ...m.destination, endpoint };
      expect(errorOf(UPLOADED_MARKER.validate(m))).toMatchObject({
        code: "RECORD_BAD_TEXT",
        field: "destination.endpoint",
      });
    }
    const m = clone(ex.uploadedMarker);
    m.destination = { ...m.destination, prefix: "/abs" };
    expect(errorOf(UPLOADED_MARKER.validate(m))).toMatchObject({
      code: "PATH_ABSOLUTE",
      field: "destination.prefix",
    });
    m.destination = { ...m.destination, prefix: "" };
    expect(UPLOADED_MARKER.validate(m).ok).toBe(true);
  });
});

describe("staging, merge and materialize records", () => {
  it("refuses a source URI with user info", () => {
    const r = clone(ex.stagedRecord);
    r.source.uri = "s3://AKIA:secret@bucket/p";
    expect(errorOf(STAGED_RECORD.validate(r))).toMatchObject({
      code: "RECORD_BAD_TEXT",
      field: "source.uri",
    });
  });

  it("checks the merge request's mode against base and lam", () => {
    const tv = clone(ex.mergeComplete);
    tv.request.lam = null;
    expect(errorOf(MERGE_COMPLETE.validate(tv))).toMatchObject({
      code: "RECORD_INCONSISTENT",
      field: "request.lam",
    });
    const avg = clone(ex.mergeComplete);
    avg.request.mode = "avg";
    expect(errorOf(MERGE_COMPLETE.validate(avg)).field).toBe("request.lam");
    avg.request.lam = null;
    avg.request.base = null;
    expect(MERGE_COMPLETE.validate(avg).ok).toBe(true);
    const huge = clone(ex.mergeComplete);
    huge.request.lam = 1e300;
    expect(errorOf(MERGE_COMPLETE.validate(huge)).code).toBe("RECORD_OUT_OF_RANGE");
  });

  it("keeps external diagnostics out of the archived paths", () => {
    const r = clone(ex.mergeComplete);
    r.diagnostics = { location: "external", source: "/home/me/diag.json" };
    expect(MERGE_COMPLETE.validate(r).ok).toBe(true);
    r.diagnostics = { location: "artifact", path: "/home/me/diag.json", size: 1, sha256: ex.digestOf("d") };
    expect(errorOf(MERGE_COMPLETE.validate(r))).toMatchObject({
      code: "PATH_ABSOLUTE",
      field: "diagnostics.path",
    });
  });

  it("validates the conversion version's shape and the chat-template record", () => {
    const m = clone(ex.materializedMarker);
    m.conversion_version = "materialize model";
    expect(errorOf(MATERIALIZED_MARKER.validate(m))).toMatchObject({
      code: "RECORD_INVALID_VALUE",
      field: "conversion_version",
    });
    const t = clone(ex.materializedMarker);
    t.options.unified_chat_template = true;
    t.chat_template = {
      processor_template_sha256: ex.digestOf("tpl"),
      files: [{ path: "tokenizer_config.json", sha256: ex.digestOf("tc") }],
      diff: "@@ -1 +1 @@\n-a\n+b\n",
    };
    expect(MATERIALIZED_MARKER.validate(t).ok).toBe(true);
  });

  it("lets an overlay record claim a directory before its source digest is known, never the marker", () => {
    const pending = clone(ex.overlaySource) as { source: { sha256: string | null } };
    pending.source.sha256 = null;
    expect(OVERLAY_SOURCE.validate(pending).ok).toBe(true);
    const marker = clone(ex.materializedMarker) as { source: { sha256: string | null } };
    marker.source.sha256 = null;
    expect(errorOf(MATERIALIZED_MARKER.validate(marker))).toMatchObject({
      code: "RECORD_WRONG_TYPE",
      field: "source.sha256",
    });
    pending.source.sha256 = "ABC";
    expect(errorOf(OVERLAY_SOURCE.validate(pending))).toMatchObject({
      code: "RECORD_BAD_DIGEST",
      field: "source.sha256",
    });
  });
});

describe("control manifest and _SUCCESS", () => {
  it("binds control descriptors to the active generation", () => {
    const m = clone(ex.controlManifest);
    m.control.trainer.path = ".posttrain/generations/other/trainer.pt";
    expect(errorOf(CONTROL_MANIFEST.validate(m))).toMatchObject({
      code: "RECORD_INCONSISTENT",
      field: "control.trainer.path",
    });
    const g = clone(ex.controlManifest);
    g.control_generation = "../x";
    expect(errorOf(CONTROL_MANIFEST.validate(g)).code).toBe("RECORD_INVALID_VALUE");
    const c = clone(ex.controlManifest);
    c.components = ["optim", "model"];
    expect(errorOf(CONTROL_MANIFEST.validate(c)).code).toBe("RECORD_INCONSISTENT");
  });

  it("keeps loop_state opaque but scalar, and optional", () => {
    const m = clone(ex.multiRoleSuccess);
    delete m.loop_state;
    expect(MULTI_ROLE_SUCCESS.parse(enc(canonicalJson(m)))).toEqual(m);
    const nested = { ...clone(ex.multiRoleSuccess), loop_state: { a: { b: 1 } } };
    expect(errorOf(MULTI_ROLE_SUCCESS.validate(nested))).toMatchObject({
      code: "RECORD_INVALID_VALUE",
      field: "loop_state.a",
    });
    const noRoles = { ...clone(ex.multiRoleSuccess), roles: {} };
    expect(errorOf(MULTI_ROLE_SUCCESS.validate(noRoles)).code).toBe("RECORD_WRONG_COUNT");
    const badRole = { ...clone(ex.multiRoleSuccess), roles: { "../x": { optimizer_step: 1 } } };
    expect(errorOf(MULTI_ROLE_SUCCESS.validate(badRole)).code).toBe("RECORD_INVALID_VALUE");
  });
});

describe("latest_checkpoint.txt", () => {
  it("round-trips and accepts one optional newline and any digit count", async () => {
    expect(dec(LATEST_POINTER.serialize(100))).toBe("iter_000000100");
    expect(LATEST_POINTER.parse(LATEST_POINTER.serialize(100))).toEqual({
      iterDirName: "iter_000000100",
      iteration: 100,
    });
    expect(LATEST_POINTER.parse(enc("iter_000300\n"))).toEqual({
      iterDirName: "iter_000300",
      iteration: 300,
    });
    const path = join(dir, "latest_checkpoint.txt");
    await writeFile(path, "iter_000000007");
    expect((await LATEST_POINTER.read(path)).iteration).toBe(7);
  });

  it.each([
    "",
    "iter_",
    "iter_1\n\n",
    " iter_1",
    "iter_1 ",
    "iter_-1",
    "../iter_1",
    "iter_1\r\n",
    "x".repeat(2000),
  ])("refuses %j", (text) => {
    expect(() => LATEST_POINTER.parse(enc(text), "ckpts/latest_checkpoint.txt")).toThrow(
      expect.objectContaining({ code: "RECORD_BAD_POINTER", file: "ckpts/latest_checkpoint.txt" }),
    );
  });
});

describe("writeRecordFile", () => {
  it("writes canonical bytes that read back, and refuses an invalid value without creating the file", async () => {
    const path = join(dir, "written", ".merge-complete.json");
    await mkdir(join(dir, "written"));
    await MERGE_COMPLETE.write(path, ex.mergeComplete);
    expect(await readFile(path)).toEqual(Buffer.from(MERGE_COMPLETE.serialize(ex.mergeComplete)));
    expect(await MERGE_COMPLETE.read(path)).toEqual(
      MERGE_COMPLETE.parse(MERGE_COMPLETE.serialize(ex.mergeComplete)),
    );
    const other = join(dir, "written", "bad.json");
    const bad = { ...clone(ex.mergeComplete), files: [{ path: "../x", size: 1, sha256: ex.digestOf("x") }] };
    await expect(MERGE_COMPLETE.write(other, bad)).rejects.toMatchObject({
      code: "PATH_TRAVERSAL",
      file: other,
    });
    await expect(readFile(other)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
