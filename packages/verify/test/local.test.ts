import { mkdir, open, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  CONTROL_MANIFEST,
  MATERIALIZED_MARKER,
  MULTI_ROLE_SUCCESS,
  STAGED_RECORD,
  UPLOADED_MARKER,
} from "@ckpt/manifest";
import { writeShardedSafetensors, writeTorchFile } from "@ckpt/tensors";
import { testdir } from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";
import {
  judgeExpectations,
  verifyArtifactDir,
  verifyCheckpointDir,
  verifyMaterializedDir,
  verifyStagedDir,
} from "../src/index.js";
// The archive-reader's artifact builder and DCP fixture: the same artifacts its fetch and receipt tests use.
import {
  makeArtifact,
  receiptFor,
  sha,
  type TestArtifact,
} from "../../archive-reader/test/helpers/archive.js";

const FIXTURE = join(import.meta.dirname, "..", "..", "archive-reader", "test", "fixtures", "dcp-p2");
const DESTINATION = {
  scheme: "s3",
  endpoint: "s3.example.com",
  bucket: "b",
  prefix: "p/checkpoint_artifacts/iter_000000300",
} as const;

/** torch.save bytes of one F32 tensor (written by ckpt's writer, read by the real reader). */
async function torchBytes(values: number[], name = "w"): Promise<Uint8Array> {
  const dir = await testdir();
  const path = join(dir, "t.pt");
  await writeTorchFile(path, {
    tree: { [name]: { dtype: "F32", shape: [values.length] } },
    provideTensor: () => new Uint8Array(new Float32Array(values).buffer),
    sync: false,
  });
  return new Uint8Array(await readFile(path));
}

let model: Uint8Array;
let trainer: Uint8Array;
let dcp: Map<string, Uint8Array>;
beforeAll(async () => {
  model = await torchBytes([1, 2, 3, 4, 5, 6]);
  trainer = await torchBytes([7], "step");
  dcp = new Map();
  for (const n of [".metadata", "__0_0.distcp", "__1_0.distcp"])
    dcp.set(n, new Uint8Array(await readFile(join(FIXTURE, n))));
});

async function writeFiles(dir: string, files: ReadonlyMap<string, Uint8Array>): Promise<void> {
  for (const [path, b] of files) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), b);
  }
}

/** An artifact directory under <tmp>/checkpoint_artifacts/iter_000000300. */
async function artifactDir(artifact: TestArtifact): Promise<string> {
  const dir = join(await testdir(), "checkpoint_artifacts", "iter_000000300");
  await writeFiles(dir, artifact.files);
  return dir;
}

async function flipByte(path: string, offset: number): Promise<void> {
  const handle = await open(path, "r+");
  const one = new Uint8Array(1);
  await handle.read(one, 0, 1, offset);
  one[0] = one[0]! ^ 0xff;
  await handle.write(one, 0, 1, offset);
  await handle.close();
}

const codes = (report: { problems: readonly { code: string; path: string }[] }) =>
  report.problems.map((p) => `${p.code} ${p.path}`).sort();

describe("verifyArtifactDir", () => {
  it("a committed artifact is sound: every payload hashed against the manifest, the .pt files open", async () => {
    const dir = await artifactDir(makeArtifact({ model, trainer }));
    const report = await verifyArtifactDir(dir);
    expect(report).toMatchObject({
      kind: "artifact",
      iteration: 300,
      ok: true,
      problems: [],
      released: [],
      hashedFiles: 2,
    });
    expect(report.hashedBytes).toBe(model.length + trainer.length);
  });

  it("a flipped byte is a VERIFY_DIGEST_MISMATCH, a truncated payload a VERIFY_SIZE_MISMATCH and an unreadable file, naming the record", async () => {
    const dir = await artifactDir(makeArtifact({ model, trainer }));
    // Inside the tensor's data (the float 7.0), so the zip and pickle still read.
    await flipByte(
      join(dir, "trainer.pt"),
      Buffer.from(trainer).indexOf(Buffer.from(new Float32Array([7]).buffer)),
    );
    await truncate(join(dir, "model.pt"), model.length - 10);
    const report = await verifyArtifactDir(dir);
    expect(report.ok).toBe(false);
    expect(codes(report)).toEqual([
      "FILE_UNREADABLE model.pt",
      "VERIFY_DIGEST_MISMATCH trainer.pt",
      "VERIFY_SIZE_MISMATCH model.pt",
    ]);
    expect(report.problems.find((p) => p.code === "VERIFY_DIGEST_MISMATCH")).toMatchObject({
      record: ARTIFACT_MANIFEST.fileName,
    });
  });

  it("a missing payload is VERIFY_FILE_MISSING, unless the receipt records it: then it was released after archiving", async () => {
    const artifact = makeArtifact({ model, trainer });
    const dir = await artifactDir(artifact);
    await rm(join(dir, "model.pt"));
    expect(codes(await verifyArtifactDir(dir))).toEqual(["VERIFY_FILE_MISSING model.pt"]);
    await writeFile(join(dir, ".uploaded"), receiptFor(artifact, DESTINATION));
    const released = await verifyArtifactDir(dir);
    expect(released).toMatchObject({ ok: true, released: ["model.pt"], archive: DESTINATION });
    // The receipt is checked too: a local file it records differently is a problem.
    await writeFile(join(dir, "trainer.pt"), torchBytesSameSize(trainer));
    expect(codes(await verifyArtifactDir(dir))).toEqual(["VERIFY_DIGEST_MISMATCH trainer.pt"]);
  });

  it("DCP components: an unlisted (and unreferenced) shard, a short shard (size and DCP length) are named", async () => {
    const dir = await artifactDir(makeArtifact({ dcpModel: dcp }));
    expect((await verifyArtifactDir(dir)).ok).toBe(true);
    await writeFile(join(dir, "model", "__2_0.distcp"), "stray");
    await truncate(join(dir, "model", "__0_0.distcp"), 100);
    expect(codes(await verifyArtifactDir(dir))).toEqual([
      "DCP_FILE_SHORT model/__0_0.distcp",
      "DCP_FILE_UNEXPECTED model/__2_0.distcp",
      "VERIFY_FILE_UNLISTED model/__2_0.distcp",
      "VERIFY_SIZE_MISMATCH model/__0_0.distcp",
    ]);
  });

  it("no manifest is an unfinished artifact; an unreadable one is VERIFY_RECORD_INVALID with its code; another iteration is named", async () => {
    const artifact = makeArtifact({ model });
    const dir = await artifactDir(artifact);
    await rm(join(dir, ARTIFACT_MANIFEST.fileName));
    expect(codes(await verifyArtifactDir(dir))).toEqual([
      `VERIFY_ARTIFACT_UNCOMMITTED ${ARTIFACT_MANIFEST.fileName}`,
    ]);
    await writeFile(join(dir, ARTIFACT_MANIFEST.fileName), '{"schema": ');
    const invalid = await verifyArtifactDir(dir);
    expect(invalid.problems).toEqual([
      expect.objectContaining({ code: "VERIFY_RECORD_INVALID", cause: "JSON_TRUNCATED" }),
    ]);
    const elsewhere = join(await testdir(), "iter_000000400");
    await writeFiles(elsewhere, artifact.files);
    expect(codes(await verifyArtifactDir(elsewhere))).toEqual([
      `VERIFY_ITERATION_MISMATCH ${ARTIFACT_MANIFEST.fileName}`,
    ]);
  });

  it("finite: a NaN in a .pt payload is TENSOR_NOT_FINITE; without the option it is not looked for", async () => {
    const dirty = await torchBytes([1, Number.NaN, 3]);
    const dir = await artifactDir(makeArtifact({ model: dirty }));
    expect((await verifyArtifactDir(dir)).ok).toBe(true);
    const report = await verifyArtifactDir(dir, { finite: true });
    expect(report.problems).toEqual([
      expect.objectContaining({ code: "TENSOR_NOT_FINITE", path: "model.pt", tensor: "w" }),
    ]);
  });
});

/** Bytes of the same length as `b` that differ in the middle. */
function torchBytesSameSize(b: Uint8Array): Uint8Array {
  const copy = b.slice();
  copy[Math.floor(copy.length / 2)] = copy[Math.floor(copy.length / 2)]! ^ 0xff;
  return copy;
}

describe("verifyStagedDir", () => {
  /** A stage as `fetchArtifact` leaves it: the payloads and the manifest, `.staged.json` completed. */
  async function staged(): Promise<{ dir: string; artifact: TestArtifact }> {
    const artifact = makeArtifact({ model, trainer });
    const dir = join(await testdir(), "iter_000000300");
    const files = new Map(
      [...artifact.payloads, ARTIFACT_MANIFEST.fileName].map((p) => [p, artifact.files.get(p)!]),
    );
    await writeFiles(dir, files);
    const record = STAGED_RECORD.serialize({
      schema: STAGED_RECORD.version,
      source: {
        uri: `s3://${DESTINATION.bucket}/${DESTINATION.prefix}`,
        destination: DESTINATION,
        manifest_sha256: sha(artifact.manifestBytes),
        declaration_sha256: sha(artifact.declarationBytes),
      },
      iteration: artifact.iteration,
      files: [...files].map(([path, b]) => ({ path, size: b.length, sha256: sha(b) })),
      complete: true,
    });
    await writeFile(join(dir, STAGED_RECORD.fileName), record);
    return { dir, artifact };
  }

  it("a finished fetch is sound; a staged file changed afterwards is named against .staged.json", async () => {
    const { dir } = await staged();
    expect(await verifyStagedDir(dir)).toMatchObject({ kind: "stage", ok: true, iteration: 300 });
    await flipByte(join(dir, "model.pt"), 40);
    const report = await verifyStagedDir(dir);
    expect(codes(report)).toEqual(["VERIFY_DIGEST_MISMATCH model.pt"]);
    expect(report.problems[0]).toMatchObject({ record: ".staged.json" });
  });

  it("an interrupted fetch is VERIFY_STAGE_INCOMPLETE; a record whose source is not the staged manifest is VERIFY_STAGE_SOURCE_MISMATCH", async () => {
    const { dir } = await staged();
    const record = await STAGED_RECORD.read(join(dir, ".staged.json"));
    await writeFile(join(dir, ".staged.json"), STAGED_RECORD.serialize({ ...record, complete: false }));
    expect(codes(await verifyStagedDir(dir))).toEqual(["VERIFY_STAGE_INCOMPLETE .staged.json"]);
    await writeFile(
      join(dir, ".staged.json"),
      STAGED_RECORD.serialize({ ...record, source: { ...record.source, manifest_sha256: "a".repeat(64) } }),
    );
    expect(codes(await verifyStagedDir(dir))).toEqual([
      `VERIFY_STAGE_SOURCE_MISMATCH ${ARTIFACT_MANIFEST.fileName}`,
    ]);
  });
});

describe("verifyCheckpointDir", () => {
  async function checkpoint(parts: { optim?: boolean; trainer?: boolean } = {}): Promise<string> {
    const dir = join(await testdir(), "checkpoints", "iter_000000100");
    const files = new Map<string, Uint8Array>([["model.pt", model]]);
    if (parts.trainer !== false) files.set("trainer.pt", trainer);
    if (parts.optim !== false) for (const [n, b] of dcp) files.set(`optim/${n}`, b);
    await writeFiles(dir, files);
    return dir;
  }

  it("the local layout: model.pt, optim/ (DCP) and trainer.pt are sound", async () => {
    const report = await verifyCheckpointDir(await checkpoint());
    expect(report).toMatchObject({ kind: "checkpoint", iteration: 100, ok: true, problems: [], notes: [] });
  });

  it("without trainer.pt it is VERIFY_COMPONENT_MISSING; without optimizer state only a note (not resumable)", async () => {
    expect(codes(await verifyCheckpointDir(await checkpoint({ trainer: false })))).toEqual([
      "VERIFY_COMPONENT_MISSING trainer.pt",
    ]);
    const modelOnly = await verifyCheckpointDir(await checkpoint({ optim: false }));
    expect(modelOnly.ok).toBe(true);
    expect(modelOnly.notes.join("\n")).toMatch(/no optimizer state .* not for an exact resume/);
  });

  it("a torn component (a short DCP shard), a corrupt .pt, and model.pt beside model/ are each named", async () => {
    const dir = await checkpoint();
    await truncate(join(dir, "optim", "__1_0.distcp"), 10);
    await writeFile(join(dir, "trainer.pt"), "not a zip");
    await mkdir(join(dir, "model"));
    expect(codes(await verifyCheckpointDir(dir))).toEqual([
      "DCP_FILE_SHORT optim/__1_0.distcp",
      "FILE_UNREADABLE trainer.pt",
      "VERIFY_COMPONENT_AMBIGUOUS model",
      "VERIFY_COMPONENT_MISSING model",
    ]);
  });

  it("a receipt that records an optimizer state retention removed counts it as released; a changed file is named", async () => {
    const dir = await checkpoint({ optim: false });
    const receipt = UPLOADED_MARKER.serialize({
      schema: "posttrain.archive-marker.v1",
      kind: "full_checkpoint",
      iteration: 100,
      destination: { ...DESTINATION, prefix: "p/checkpoints/iter_000000100" },
      files: [
        { path: "model.pt", size: model.length },
        { path: "optim.pt", size: 123456 },
        { path: "trainer.pt", size: trainer.length, sha256: sha(trainer) },
      ],
    });
    await writeFile(join(dir, ".uploaded"), receipt);
    const report = await verifyCheckpointDir(dir);
    expect(report).toMatchObject({ ok: true, released: ["optim.pt"], sizeOnly: ["model.pt"] });
    await writeFile(join(dir, "trainer.pt"), torchBytesSameSize(trainer));
    expect(codes(await verifyCheckpointDir(dir))).toEqual(["VERIFY_DIGEST_MISMATCH trainer.pt"]);
  });

  it("the validation record a receipt recorded before publication moved it on is not a size mismatch", async () => {
    const dir = await checkpoint();
    const pending =
      '{"schema":"posttrain.validation-transaction.v1","iteration":100,"state":"publication_pending"}\n';
    const receipt = UPLOADED_MARKER.serialize({
      schema: "posttrain.archive-marker.v1",
      kind: "full_checkpoint",
      iteration: 100,
      destination: { ...DESTINATION, prefix: "p/checkpoints/iter_000000100" },
      files: [
        { path: ".posttrain-validation.json", size: pending.length, sha256: sha(Buffer.from(pending)) },
        { path: "trainer.pt", size: trainer.length, sha256: sha(trainer) },
      ],
    });
    await writeFile(join(dir, ".uploaded"), receipt);
    // Published after the upload: the record is rewritten with another size, as the manager does.
    await writeFile(
      join(dir, ".posttrain-validation.json"),
      '{"schema":"posttrain.validation-transaction.v1","iteration":100,"state":"published"}\n',
    );
    expect(codes(await verifyCheckpointDir(dir))).toEqual([]);
    // The receipt's other entries are still judged.
    await writeFile(join(dir, "trainer.pt"), torchBytesSameSize(trainer));
    expect(codes(await verifyCheckpointDir(dir))).toEqual(["VERIFY_DIGEST_MISMATCH trainer.pt"]);
  });

  it("a multi-role boundary judges each role; a committed role without its directory is named", async () => {
    const dir = join(await testdir(), "iter_000000012");
    const success = MULTI_ROLE_SUCCESS.serialize({
      schema: "posttrain.multi-role-boundary.v1",
      iteration: 12,
      roles: { critic: { optimizer_step: 12 }, policy: { optimizer_step: 7 } },
    });
    await writeFiles(
      dir,
      new Map([
        ["_SUCCESS", success],
        ["policy/model.pt", model],
        ["policy/trainer.pt", trainer],
      ]),
    );
    const report = await verifyCheckpointDir(dir);
    expect(report.roles).toEqual(["critic", "policy"]);
    expect(codes(report)).toEqual(["VERIFY_COMPONENT_MISSING critic"]);
    await writeFiles(dir, new Map([["critic/model.pt", model]]));
    expect(codes(await verifyCheckpointDir(dir))).toEqual(["VERIFY_COMPONENT_MISSING critic/trainer.pt"]);
  });

  it("a copied direct object-store checkpoint: control files by digest, DCP components by their .metadata", async () => {
    const dir = join(await testdir(), "iter_000000100");
    const generation = "g0001";
    const files = new Map<string, Uint8Array>([[`.posttrain/generations/${generation}/trainer.pt`, trainer]]);
    for (const c of ["model", "optim"]) for (const [n, b] of dcp) files.set(`${c}/${n}`, b);
    files.set(
      ".posttrain-manifest.json",
      CONTROL_MANIFEST.serialize({
        schema: "posttrain.checkpoint-manifest.v1",
        iteration: 100,
        components: ["model", "optim"],
        control_generation: generation,
        control: {
          trainer: {
            path: `.posttrain/generations/${generation}/trainer.pt`,
            size: trainer.length,
            sha256: sha(trainer),
          },
          data: null,
        },
        validation_publication: null,
      }),
    );
    await writeFiles(dir, files);
    expect(await verifyCheckpointDir(dir)).toMatchObject({ ok: true, iteration: 100, hashedFiles: 1 });
    await flipByte(join(dir, ".posttrain", "generations", generation, "trainer.pt"), 60);
    await rm(join(dir, "optim", "__0_0.distcp"));
    expect(codes(await verifyCheckpointDir(dir))).toEqual([
      `DCP_FILE_MISSING optim/__0_0.distcp`,
      `VERIFY_DIGEST_MISMATCH .posttrain/generations/${generation}/trainer.pt`,
    ]);
  });
});

describe("judgeExpectations", () => {
  it("an absent file counts as released only when the receipt records the same size and digest", () => {
    const expectations = [
      { path: "a", size: 1, sha256: "1".repeat(64), record: "manifest" },
      { path: "b", size: 2, sha256: "2".repeat(64), record: "manifest" },
      { path: "c", size: 3, record: "manifest" },
    ];
    const receipt = new Map([
      ["a", { size: 1, sha256: "1".repeat(64) }],
      ["b", { size: 2, sha256: "f".repeat(64) }],
    ]);
    const judged = judgeExpectations(expectations, new Map(), receipt, ".uploaded");
    expect(judged.released).toEqual(["a"]);
    expect(judged.problems.map((p) => [p.code, p.path])).toEqual([
      ["VERIFY_FILE_MISSING", "b"],
      ["VERIFY_FILE_MISSING", "c"],
    ]);
    expect(judged.problems[0]!.message).toContain("the receipt records other bytes");
  });
});

describe("verifyMaterializedDir", () => {
  async function hfDir(values: number[]): Promise<string> {
    const dir = await testdir();
    const result = await writeShardedSafetensors(
      dir,
      [
        { name: "a", dtype: "F32", shape: [values.length] },
        { name: "b", dtype: "F32", shape: [values.length] },
      ],
      () => new Uint8Array(new Float32Array(values).buffer),
      { maxShardBytes: values.length * 4 },
    );
    const shards = [...result.shards, result.indexFile].map((f) => ({
      path: basename(f.path),
      size: f.size,
      sha256: f.sha256,
    }));
    await writeFile(
      join(dir, ".materialized"),
      MATERIALIZED_MARKER.serialize({
        schema: "posttrain.materialized.v1",
        conversion_version: "materialize_model_pt_to_hf/3",
        source: { source: "/runs/a/model.pt", size: 1, sha256: "1".repeat(64) },
        base: { source: "/bases/b", fingerprint: "2".repeat(64) },
        options: { unified_chat_template: false },
        shards,
        tensor_count: 2,
        tensors_verified: true,
        chat_template: null,
      }),
    );
    return dir;
  }

  it("every shard and the index the marker records are checked by size and digest; --finite scans the shards", async () => {
    const dir = await hfDir([1, 2, 3]);
    expect(await verifyMaterializedDir(dir)).toMatchObject({ kind: "hf", ok: true, hashedFiles: 3 });
    const shard = join(dir, "model-00002-of-00002.safetensors");
    await flipByte(shard, (await stat(shard)).size - 2); // inside the last float

    expect(codes(await verifyMaterializedDir(dir))).toEqual([
      "VERIFY_DIGEST_MISMATCH model-00002-of-00002.safetensors",
    ]);
    const dirty = await hfDir([1, Number.POSITIVE_INFINITY, 3]);
    const report = await verifyMaterializedDir(dirty, { finite: true });
    expect(codes(report)).toEqual([
      "TENSOR_NOT_FINITE model-00001-of-00002.safetensors",
      "TENSOR_NOT_FINITE model-00002-of-00002.safetensors",
    ]);
  });

  it("without a marker there is nothing recorded to compare: a note says so", async () => {
    const dir = await hfDir([1]);
    await rm(join(dir, ".materialized"));
    const report = await verifyMaterializedDir(dir);
    expect(report).toMatchObject({ ok: true, hashedFiles: 0 });
    expect(report.notes[0]).toMatch(/no .materialized marker/);
  });
});
