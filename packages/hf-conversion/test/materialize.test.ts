// @module-tag torch
import { testdir } from "@ckpt/test-utils";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { cp, mkdir, readdir, readFile, rename, rm, truncate, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import {
  ARTIFACT_MANIFEST,
  MATERIALIZED_MARKER,
  OVERLAY_SOURCE,
  CURRENT_CONVERSION_VERSION,
  hashFile,
  openFileByteSource,
} from "@ckpt/manifest";
import { drain } from "@ckpt/progress";
import { openHfDirectory, openTorchFile } from "@ckpt/tensors";
import { beforeAll, describe, expect, it } from "vitest";
import {
  canonicalTemplate,
  type MaterializeRequest,
  materializeHf,
  materializeHfIter,
} from "../src/index.js";
import { acquireOutputLock } from "../src/materialize/lock.js";
import { type Fixture, makeArtifact, makeFixture, PYTHON_TIMEOUT, request, snapshot } from "./helpers.js";

let root: string;
let dense: Fixture;
let moe: Fixture;
let denseA: string;
let denseB: string;
let moeA: string;

beforeAll(async () => {
  root = await testdir("ckpt-hf-materialize-");
  [dense, moe] = await Promise.all([
    makeFixture(join(root, "dense"), "dense", 2, 21),
    makeFixture(join(root, "moe"), "moe", 1, 22),
  ]);
  denseA = await makeArtifact(join(root, "art-a"), dense.expert(0));
  denseB = await makeArtifact(join(root, "art-b"), dense.expert(1));
  moeA = await makeArtifact(join(root, "art-moe"), moe.expert(0));
}, PYTHON_TIMEOUT);

let outs = 0;
const freshOut = () => join(root, "out", `o${outs++}`, "teacher");

async function sourceTensors(artifact: string): Promise<Map<string, Uint8Array>> {
  const file = await openTorchFile(await openFileByteSource(join(artifact, "model.pt")));
  const out = new Map<string, Uint8Array>();
  for (const t of file.tensors) out.set(t.name.slice("net.".length), (await file.readTensor(t)).slice());
  await file.close();
  return out;
}

async function outputTensors(
  dir: string,
): Promise<Map<string, { bytes: Uint8Array; shape: readonly number[] }>> {
  const hf = await openHfDirectory(dir);
  const out = new Map<string, { bytes: Uint8Array; shape: readonly number[] }>();
  for (const t of hf.tensors)
    out.set(t.name, { bytes: (await hf.readTensor(t.name)).slice(), shape: t.shape });
  await hf.close();
  return out;
}

const siblings = async (out: string) => (await readdir(join(out, ".."))).sort();

/** The marker's shard inventory (digests taken while writing) against the files as they are on disk. */
async function expectInventoryOnDisk(out: string): Promise<void> {
  const marker = await MATERIALIZED_MARKER.read(join(out, ".materialized"));
  for (const entry of marker.shards) {
    const digest = await hashFile(join(out, ...entry.path.split("/")));
    expect({ size: digest.size, sha256: digest.sha256 }, entry.path).toEqual({
      size: entry.size,
      sha256: entry.sha256,
    });
  }
}

describe("materialize a dense artifact", () => {
  it("lays the output out like the base's index, byte for byte the checkpoint's tensors, sidecars copied, marked last", async () => {
    const out = freshOut();
    const report = await materializeHf(request(denseA, dense.base, out));
    expect(report.action).toBe("built");
    const [base, built] = await Promise.all([
      readFile(join(dense.base, "model.safetensors.index.json"), "utf8"),
      readFile(join(out, "model.safetensors.index.json"), "utf8"),
    ]);
    expect(Object.entries(JSON.parse(built).weight_map)).toEqual(Object.entries(JSON.parse(base).weight_map));
    const source = await sourceTensors(denseA);
    const output = await outputTensors(out);
    expect([...output.keys()].sort()).toEqual([...source.keys()].sort());
    for (const [name, t] of output) expect(Buffer.compare(t.bytes, source.get(name)!)).toBe(0);
    for (const name of [
      "config.json",
      "tokenizer.json",
      "tokenizer_config.json",
      "chat_template.json",
      "generation_config.json",
    ]) {
      expect(await readFile(join(out, name))).toEqual(await readFile(join(dense.base, name)));
    }
    const marker = await MATERIALIZED_MARKER.read(join(out, ".materialized"));
    expect(marker).toMatchObject({
      conversion_version: "materialize_model_pt_to_hf/3",
      source: { source: join(denseA, "model.pt") },
      base: { source: dense.base, fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) },
      options: { unified_chat_template: false },
      tensor_count: output.size,
      tensors_verified: true,
      chat_template: null,
    });
    expect(marker.shards.map((s) => s.path)).toEqual([
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
    ]);
    expect(report.verification).toMatchObject({
      tensorsVerified: true,
      probedTensors: output.size,
      sampledExpertParts: 0,
    });
    await expectInventoryOnDisk(out);
    // Nothing of the staged build is left: no .tmp, .previous, lock or overlay record.
    expect(await siblings(out)).toEqual(["teacher"]);
    expect((await readdir(out)).includes(".overlay_source.json")).toBe(false);
  });

  it("an identical request skips without touching the output, wherever the same bytes are read from", async () => {
    const out = freshOut();
    await materializeHf(request(denseA, dense.base, out));
    const before = await snapshot(out);
    const moved = await makeArtifact(join(root, "art-a-copy"), dense.expert(0));
    const again = await materializeHf(request(moved, dense.base, out));
    expect(again.action).toBe("skipped");
    expect(await snapshot(out)).toEqual(before);
  });

  it("another source is refused without --force, leaving the output byte-identical; --force rebuilds", async () => {
    const out = freshOut();
    await materializeHf(request(denseA, dense.base, out));
    const before = await snapshot(out);
    const refused = await materializeHf(request(denseB, dense.base, out)).catch((e) => e);
    expect(refused).toMatchObject({
      code: "MATERIALIZE_OUTPUT_MISMATCH",
      kind: "refused",
      stage: "inspect-output",
    });
    expect(refused.message).toMatch(/^REFUSED: .+ is a completed output of another request: source /);
    expect(await snapshot(out)).toEqual(before);
    const forced = await materializeHf(request(denseB, dense.base, out, { force: true }));
    expect(forced.action).toBe("built");
    expect((await MATERIALIZED_MARKER.read(join(out, ".materialized"))).source.sha256).toBe(
      forced.marker.source.sha256,
    );
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("another option (unified templates) is another request", async () => {
    const out = freshOut();
    await materializeHf(request(denseA, dense.base, out));
    await expect(
      materializeHf(request(denseA, dense.base, out, { unifiedChatTemplate: true })),
    ).rejects.toThrow(/unified_chat_template false, not true/);
  });

  it("a damaged output is rebuilt without --force", async () => {
    const out = freshOut();
    await materializeHf(request(denseA, dense.base, out));
    await truncate(join(out, "model-00002-of-00002.safetensors"), 100);
    const report = await materializeHf(request(denseA, dense.base, out));
    expect(report.action).toBe("built");
    expect((await openHfDirectory(out)).tensors.length).toBe(report.marker.tensor_count);
  });

  it("a failure after the preflight removes the staging and keeps the output byte-identical, under --force --no-verify too", async () => {
    const out = freshOut();
    await materializeHf(request(denseA, dense.base, out));
    const before = await snapshot(out);
    // An artifact whose manifest records another digest for its model.pt: found once the bytes are hashed.
    const lying = await makeArtifact(join(root, "art-lying"), dense.expert(1));
    const manifest = JSON.parse(await readFile(join(lying, ARTIFACT_MANIFEST.fileName), "utf8"));
    manifest.physical_components[0].sha256 = "0".repeat(64);
    await writeFile(join(lying, ARTIFACT_MANIFEST.fileName), ARTIFACT_MANIFEST.serialize(manifest));
    const error = await materializeHf(request(lying, dense.base, out, { force: true, verify: false })).catch(
      (e) => e,
    );
    expect(error).toMatchObject({ code: "MATERIALIZE_SOURCE_MISMATCH", stage: "source" });
    expect(await snapshot(out)).toEqual(before);
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("--no-verify skips only tensor probing and records it", async () => {
    const out = freshOut();
    const report = await materializeHf(request(denseA, dense.base, out, { verify: false }));
    expect(report.marker.tensors_verified).toBe(false);
    expect(report.verification).toMatchObject({ tensorsVerified: false, probedBytes: 0 });
    expect(report.verification?.checks).toEqual([
      "layout",
      "inventory",
      "tensor-count",
      "config-and-sidecars",
    ]);
  });

  it("--min-tensors and --expect-tensors refuse before anything is written", async () => {
    const out = freshOut();
    await expect(materializeHf(request(denseA, dense.base, out, { minTensors: 800 }))).rejects.toMatchObject({
      code: "MATERIALIZE_TENSOR_COUNT",
      stage: "plan",
    });
    await expect(materializeHf(request(denseA, dense.base, out, { expectTensors: 7 }))).rejects.toThrow(
      /not the 7/,
    );
    expect(await siblings(out)).toEqual([]);
  });

  it("yields progress events, then returns the report", async () => {
    const events: string[] = [];
    const report = await drain(materializeHfIter(request(denseA, dense.base, freshOut())), (e) =>
      events.push(e.type),
    );
    expect(events[0]).toBe("preflight");
    expect(events.slice(1, 3)).toEqual(["lock", "decision"]);
    expect(events).toContain("convert");
    expect(report.action).toBe("built");
  });
});

describe("materialize a MoE artifact", () => {
  it("splits, un-fuses and transposes the stacked experts into the base's per-expert keys", async () => {
    const out = freshOut();
    const report = await materializeHf(request(moeA, moe.base, out));
    expect(report.verification?.sampledExpertParts).toBeGreaterThan(0);
    const source = await sourceTensors(moeA);
    const output = await outputTensors(out);
    const fixture = JSON.parse(await readFile(join(moe.dir, "fixture.json"), "utf8"));
    const H = fixture.hidden as number;
    const I = fixture.moe_intermediate as number;
    const u16 = (b: Uint8Array) => new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
    let experts = 0;
    for (const [name, t] of output) {
      const m = /^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$/.exec(name);
      if (!m) {
        expect(Buffer.compare(t.bytes, source.get(name)!), name).toBe(0);
        continue;
      }
      experts++;
      const [, prefix, e, part] = m;
      const got = u16(t.bytes);
      // Independent of the converter: element by element from the definition of the stacked layout.
      if (part === "down") {
        const down = u16(source.get(`${prefix}.down_proj`)!);
        for (let o = 0; o < H; o++)
          for (let i = 0; i < I; i++) expect(got[o * I + i]).toBe(down[Number(e) * I * H + i * H + o]);
      } else {
        const gu = u16(source.get(`${prefix}.gate_up_proj`)!);
        const offset = part === "gate" ? 0 : I;
        for (let o = 0; o < I; o++)
          for (let i = 0; i < H; i++)
            expect(got[o * H + i]).toBe(gu[Number(e) * H * 2 * I + i * 2 * I + offset + o]);
      }
    }
    expect(experts).toBe(fixture.layers * fixture.moe_experts * 3);
    await expectInventoryOnDisk(out);
  });

  it("refuses a dense checkpoint against a MoE base, naming the first key it lacks", async () => {
    const error = await materializeHf(request(denseA, moe.base, freshOut())).catch((e) => e);
    expect(error).toMatchObject({
      code: "MATERIALIZE_KEY_MISSING",
      key: "model.layers.0.mlp.gate.weight",
      stage: "plan",
    });
  });
});

describe("unified chat templates", () => {
  it("writes the processor's template into both files and records digests and the diff", async () => {
    const out = freshOut();
    const report = await materializeHf(request(denseA, dense.base, out, { unifiedChatTemplate: true }));
    const processor = JSON.parse(
      await readFile(join(dense.base, "chat_template.json"), "utf8"),
    ).chat_template;
    const tokenizer = JSON.parse(await readFile(join(out, "tokenizer_config.json"), "utf8"));
    const baseTokenizer = JSON.parse(await readFile(join(dense.base, "tokenizer_config.json"), "utf8"));
    const canonical = canonicalTemplate(processor);
    expect(tokenizer.chat_template).toBe("text" in canonical && canonical.text);
    expect(tokenizer.chat_template).toContain("message.reasoning_content | trim");
    expect({ ...tokenizer, chat_template: 0 }).toEqual({ ...baseTokenizer, chat_template: 0 });
    expect(report.marker.chat_template?.processor_template_sha256).toBe(
      createHash("sha256").update(processor).digest("hex"),
    );
    expect(report.marker.options.unified_chat_template).toBe(true);
    expect(report.marker.chat_template?.files.map((f) => f.path)).toEqual([
      "chat_template.json",
      "tokenizer_config.json",
    ]);
    expect(report.marker.chat_template?.diff).toContain("strip");
    // The same unified request skips: the two rewritten files are checked against their recorded digests.
    expect(
      (await materializeHf(request(denseA, dense.base, out, { unifiedChatTemplate: true }))).action,
    ).toBe("skipped");
  });
});

describe("crash recovery", () => {
  async function built(artifact: string, out: string, extra: Partial<MaterializeRequest> = {}) {
    await materializeHf(request(artifact, dense.base, out, extra));
  }

  it("between the swap's renames: the same request finishes the swap", async () => {
    const out = freshOut();
    await built(denseA, out);
    const staged = join(root, "out", "stash-b");
    await built(denseB, staged);
    await rename(out, `${out}.previous`);
    await rename(staged, `${out}.tmp`);
    const b = await snapshot(`${out}.tmp`);
    const report = await materializeHf(request(denseB, dense.base, out));
    expect(report.action).toBe("published");
    expect(report.recovered.join("\n")).toMatch(/finished an interrupted swap/);
    expect(await snapshot(out)).toEqual(b);
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("between the swap's renames: another request gets the old output back and is refused on it", async () => {
    const out = freshOut();
    await built(denseA, out);
    const a = await snapshot(out);
    await rename(out, `${out}.previous`);
    const error = await materializeHf(request(denseB, dense.base, out)).catch((e) => e);
    expect(error).toMatchObject({ code: "MATERIALIZE_OUTPUT_MISMATCH" });
    // A refusal changes nothing: the state between the renames is still there for the next run.
    expect(await siblings(out)).toEqual(["teacher.previous"]);
    const forced = await materializeHf(request(denseB, dense.base, out, { force: true }));
    expect(forced.recovered[0]).toMatch(/renamed .*teacher\.previous back/);
    expect(await siblings(out)).toEqual(["teacher"]);
    expect(await snapshot(out)).not.toEqual(a);
  });

  it("a complete staged build that is the only complete tree is published, never discarded", async () => {
    const out = freshOut();
    await built(denseA, `${out}.tmp`);
    const staged = await snapshot(`${out}.tmp`);
    const report = await materializeHf(request(denseA, dense.base, out));
    expect(report.action).toBe("published");
    expect(await snapshot(out)).toEqual(staged);
  });

  it("a complete staged build whose bytes no longer match the source fails its check and is kept", async () => {
    const out = freshOut();
    await built(denseA, `${out}.tmp`);
    // Same size, same header, one data byte flipped: intact by its marker, wrong against the source.
    const shard = join(`${out}.tmp`, "model-00002-of-00002.safetensors");
    const bytes = await readFile(shard);
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 0x80, bytes.length - 1);
    await writeFile(shard, bytes);
    const staged = await snapshot(`${out}.tmp`);
    await expect(materializeHf(request(denseA, dense.base, out))).rejects.toMatchObject({
      code: "MATERIALIZE_VERIFY_FAILED",
      stage: "verify",
    });
    expect(await snapshot(`${out}.tmp`)).toEqual(staged);
    expect(await siblings(out)).toEqual(["teacher.tmp"]);
  });

  it("a complete staged build of another request that is the only complete tree is refused, even under --force", async () => {
    const out = freshOut();
    await built(denseA, `${out}.tmp`);
    for (const force of [false, true]) {
      await expect(materializeHf(request(denseB, dense.base, out, { force }))).rejects.toMatchObject({
        code: "MATERIALIZE_STAGED_OTHER_REQUEST",
      });
    }
    expect(await siblings(out)).toEqual(["teacher.tmp"]);
  });

  it("an unfinished staged build of an earlier run is discarded and rebuilt", async () => {
    const out = freshOut();
    await mkdir(`${out}.tmp`, { recursive: true });
    // A real unfinished build's overlay record (an empty-JSON one would make the tree foreign).
    await writeFile(
      join(`${out}.tmp`, ".overlay_source.json"),
      OVERLAY_SOURCE.serialize({
        schema: OVERLAY_SOURCE.version,
        conversion_version: CURRENT_CONVERSION_VERSION,
        source: { source: join(denseA, "model.pt"), size: 1, sha256: null },
        base: { source: dense.base, fingerprint: "0".repeat(64) },
        options: { unified_chat_template: false },
      }),
    );
    await writeFile(join(`${out}.tmp`, "model-00001-of-00002.safetensors"), "partial");
    const report = await materializeHf(request(denseA, dense.base, out));
    expect(report.action).toBe("built");
    expect(report.recovered.join("\n")).toMatch(/teacher\.tmp left by an earlier run/);
  });

  it("a leftover <out>.previous beside <out> is refused before a build unless --force", async () => {
    const out = freshOut();
    await built(denseA, out);
    await cp(out, `${out}.previous`, { recursive: true });
    await truncate(join(out, "model-00001-of-00002.safetensors"), 10);
    await expect(materializeHf(request(denseA, dense.base, out))).rejects.toMatchObject({
      code: "MATERIALIZE_PREVIOUS_LEFTOVER",
    });
    const forced = await materializeHf(request(denseA, dense.base, out, { force: true }));
    expect(forced.recovered.join("\n")).toMatch(/removed .*teacher\.previous/);
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("a half-removed <out>.previous (only its marker left) is still this tool's: --force removes it at the swap", async () => {
    const out = freshOut();
    await built(denseA, out);
    await mkdir(`${out}.previous`);
    await cp(join(out, ".materialized"), join(`${out}.previous`, ".materialized"));
    await expect(materializeHf(request(denseB, dense.base, out))).rejects.toMatchObject({
      code: "MATERIALIZE_OUTPUT_MISMATCH",
    });
    const forced = await materializeHf(request(denseB, dense.base, out, { force: true }));
    expect(forced.action).toBe("built");
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("files ckpt did not write are never replaced, even under --force", async () => {
    const out = freshOut();
    await mkdir(out, { recursive: true });
    await writeFile(join(out, "notes.txt"), "mine");
    await expect(materializeHf(request(denseA, dense.base, out, { force: true }))).rejects.toMatchObject({
      code: "MATERIALIZE_OUTPUT_FOREIGN",
    });
    expect(await readFile(join(out, "notes.txt"), "utf8")).toBe("mine");
  });
});

describe("the ownership rule: a record that does not parse as this tool's makes a tree foreign", () => {
  async function foreignBesideRecord(dir: string, record: string, contents: string | undefined) {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "notes.txt"), "mine");
    if (contents === undefined) execFileSync("mkfifo", [join(dir, record)]);
    else await writeFile(join(dir, record), contents);
  }

  it.each([
    ["a garbage", "not json{"],
    ["an empty-JSON", "{}"],
    ["a FIFO", undefined],
  ])(
    "--out with foreign files beside %s .materialized is refused untouched, even under --force",
    async (_, contents) => {
      const out = freshOut();
      await foreignBesideRecord(out, ".materialized", contents);
      for (const force of [false, true]) {
        await expect(materializeHf(request(denseA, dense.base, out, { force }))).rejects.toMatchObject({
          code: "MATERIALIZE_OUTPUT_FOREIGN",
        });
      }
      expect(await readFile(join(out, "notes.txt"), "utf8")).toBe("mine");
    },
  );

  it.each([
    ["a garbage", "not json{"],
    ["an empty-JSON", "{}"],
    ["a FIFO", undefined],
  ])(
    "a look-alike <out>.tmp or <out>.previous beside %s .materialized is neither removed nor swapped in",
    async (_, contents) => {
      for (const side of [".tmp", ".previous"]) {
        const out = freshOut();
        await foreignBesideRecord(`${out}${side}`, ".materialized", contents);
        await expect(materializeHf(request(denseA, dense.base, out, { force: true }))).rejects.toMatchObject({
          code: "MATERIALIZE_OUTPUT_FOREIGN",
        });
        expect(await readFile(join(`${out}${side}`, "notes.txt"), "utf8")).toBe("mine");
        expect(existsSync(out)).toBe(false);
      }
    },
  );

  it("a <out>.tmp with foreign files beside a garbage overlay record is not discarded", async () => {
    const out = freshOut();
    await foreignBesideRecord(`${out}.tmp`, ".overlay_source.json", "{}");
    await expect(materializeHf(request(denseA, dense.base, out, { force: true }))).rejects.toMatchObject({
      code: "MATERIALIZE_OUTPUT_FOREIGN",
    });
    expect(await readFile(join(`${out}.tmp`, "notes.txt"), "utf8")).toBe("mine");
  });
});

describe("one materializer per output", () => {
  it("a held lock is refused by name after the wait; a released one is taken", async () => {
    const out = freshOut();
    await mkdir(join(out, ".."), { recursive: true });
    const held = await acquireOutputLock(out, { waitSeconds: 0 });
    const error = await materializeHf(request(denseA, dense.base, out, { lockWaitSeconds: 0 })).catch(
      (e) => e,
    );
    expect(error).toMatchObject({ code: "MATERIALIZE_LOCKED", stage: "lock" });
    expect(error.message).toContain(`pid ${process.pid} on host ${hostname()}`);
    setTimeout(() => void held.release(), 500);
    const waited: (string | undefined)[] = [];
    for await (const e of materializeHfIter(request(denseA, dense.base, out, { lockWaitSeconds: 30 }))) {
      if (e.type === "lock") waited.push(e.waitedFor);
    }
    expect(waited[0]).toContain(`pid ${process.pid}`);
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("a lock left by a dead process on this host is taken at once", async () => {
    const out = freshOut();
    await mkdir(`${out}.lock`, { recursive: true });
    await writeFile(
      join(`${out}.lock`, "holder.json"),
      JSON.stringify({
        pid: 2 ** 22 + 17,
        host: hostname(),
        started_at: "2026-01-01T00:00:00.000Z",
        tool: "ckpt materialize-hf",
      }),
    );
    // A lock directory a killed process was creating, and one it was removing.
    const dead = 2 ** 22 + 17;
    await mkdir(`${out}.lock.${dead}-0123abcd`);
    await mkdir(`${out}.lock.dead-${dead}-89abcdef`);
    const report = await materializeHf(request(denseA, dense.base, out, { lockWaitSeconds: 0 }));
    expect(report.action).toBe("built");
    expect(await siblings(out)).toEqual(["teacher"]);
  });

  it("two identical requests at once both succeed: one builds, the other skips", async () => {
    const out = freshOut();
    const results = await Promise.all([
      materializeHf(request(denseA, dense.base, out)),
      materializeHf(request(denseA, dense.base, out)),
    ]);
    expect(results.map((r) => r.action).sort()).toEqual(["built", "skipped"]);
  });
});

describe("options and sources", () => {
  it("refuses a directory that is not a committed artifact", async () => {
    const dir = join(root, "not-artifact");
    await mkdir(dir, { recursive: true });
    await cp(dense.expert(0), join(dir, "model.pt"));
    await expect(materializeHf(request(dir, dense.base, freshOut()))).rejects.toMatchObject({
      code: "MATERIALIZE_SOURCE_NOT_ARTIFACT",
      stage: "source",
    });
  });

  it("refuses a model.pt whose size contradicts its manifest before converting", async () => {
    const artifact = await makeArtifact(join(root, "art-short"), dense.expert(0));
    await truncate(join(artifact, "model.pt"), 1000);
    await expect(materializeHf(request(artifact, dense.base, freshOut()))).rejects.toMatchObject({
      code: "MATERIALIZE_SOURCE_MISMATCH",
    });
  });

  it("a preflight refusal writes nothing, not even the lock", async () => {
    const out = freshOut();
    const base = join(root, "bad-base");
    await cp(dense.base, base, { recursive: true });
    await rm(join(base, "config.json"));
    await expect(materializeHf(request(denseA, base, out))).rejects.toMatchObject({ stage: "preflight" });
    await expect(readdir(join(out, ".."))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
