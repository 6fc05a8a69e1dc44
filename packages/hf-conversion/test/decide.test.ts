import type { MaterializedMarker } from "@ckpt/manifest";
import { describe, expect, it } from "vitest";
import {
  decideMaterialize,
  identityDifferences,
  type OutputStates,
  type RequestIdentity,
  type TreeState,
} from "../src/index.js";

const digest = (c: string) => c.repeat(64);
const request: RequestIdentity = {
  conversion_version: "materialize_model_pt_to_hf/3",
  source: { source: "/a/iter_000000100/model.pt", size: 10, sha256: digest("a") },
  base: { source: "/bases/b", fingerprint: digest("b") },
  options: { unified_chat_template: false },
};

function marker(identity: Partial<RequestIdentity> = {}): MaterializedMarker {
  return {
    schema: "posttrain.materialized.v1",
    ...request,
    ...identity,
    shards: [{ path: "model.safetensors.index.json", size: 1, sha256: digest("c") }],
    tensor_count: 1,
    tensors_verified: true,
    chat_template: null,
  };
}

const absent: TreeState = { kind: "absent" };
const mine: TreeState = { kind: "complete", marker: marker() };
const other: TreeState = {
  kind: "complete",
  marker: marker({ source: { ...request.source, sha256: digest("d") } }),
};
const unfinished: TreeState = { kind: "incomplete", reason: "its build did not finish" };
const foreign: TreeState = { kind: "foreign", reason: "holds 3 entries and no ckpt record" };

const states = (out: TreeState, staged: TreeState = absent, previous: TreeState = absent): OutputStates => ({
  out,
  staged,
  previous,
});

describe("decideMaterialize: identity and idempotence", () => {
  it("an empty output is built", () => {
    expect(decideMaterialize(states(absent), undefined, false)).toEqual({
      action: "build",
      recover: [],
      discardStaged: false,
      previousAtSwap: false,
    });
  });

  it("a complete output needs the request's identity first", () => {
    expect(decideMaterialize(states(mine), undefined, false)).toEqual({ action: "need-identity" });
  });

  it("--force over a complete output builds without waiting for the source's digest", () => {
    expect(decideMaterialize(states(mine), undefined, true)).toMatchObject({ action: "build" });
    expect(decideMaterialize(states(absent, mine), undefined, true)).toEqual({ action: "need-identity" });
  });

  it("an intact output of the same request skips; --force rebuilds it", () => {
    expect(decideMaterialize(states(mine), request, false)).toMatchObject({
      action: "skip",
      previousKept: false,
    });
    expect(decideMaterialize(states(mine), request, true)).toMatchObject({ action: "build" });
  });

  it("the source label is not identity: the same bytes under another path skip", () => {
    const moved = { ...request, source: { ...request.source, source: "/elsewhere/model.pt" } };
    expect(decideMaterialize(states(mine), moved, false)).toMatchObject({ action: "skip" });
  });

  it.each([
    [
      "source",
      { source: { ...request.source, sha256: digest("e") } },
      /source \/a\/iter_000000100\/model\.pt/,
    ],
    ["size", { source: { ...request.source, size: 11 } }, /source/],
    ["base", { base: { ...request.base, fingerprint: digest("f") } }, /base \/bases\/b/],
    ["options", { options: { unified_chat_template: true } }, /unified_chat_template true, not false/],
    [
      "conversion version",
      { conversion_version: "materialize_model_pt_to_hf/2" },
      /conversion materialize_model_pt_to_hf\/2/,
    ],
  ])("a completed output with another %s is refused without --force", (_label, change, named) => {
    const decision = decideMaterialize(
      states({ kind: "complete", marker: marker(change as Partial<RequestIdentity>) }),
      request,
      false,
    );
    expect(decision).toMatchObject({ action: "refuse", code: "MATERIALIZE_OUTPUT_MISMATCH", path: "out" });
    expect((decision as { found: string }).found).toMatch(named);
    expect(
      decideMaterialize(
        states({ kind: "complete", marker: marker(change as Partial<RequestIdentity>) }),
        request,
        true,
      ),
    ).toMatchObject({
      action: "build",
    });
  });

  it("an incomplete output is rebuilt without --force", () => {
    expect(decideMaterialize(states(unfinished), request, false)).toMatchObject({
      action: "build",
      discardStaged: false,
    });
  });

  it("files ckpt did not write are refused, even under --force", () => {
    for (const s of [states(foreign), states(absent, foreign), states(mine, absent, foreign)]) {
      expect(decideMaterialize(s, request, true)).toMatchObject({
        action: "refuse",
        code: "MATERIALIZE_OUTPUT_FOREIGN",
      });
    }
  });

  it("identityDifferences names nothing for the same request", () => {
    expect(identityDifferences(request, request)).toEqual([]);
  });
});

describe("decideMaterialize: staging and crash recovery", () => {
  it("an abandoned unfinished <out>.tmp goes before a build, and is cleared on a skip", () => {
    expect(decideMaterialize(states(absent, unfinished), request, false)).toMatchObject({
      action: "build",
      discardStaged: true,
    });
    expect(decideMaterialize(states(mine, unfinished), request, false)).toMatchObject({
      action: "skip",
      recover: ["discard-staged"],
    });
  });

  it("a complete <out>.tmp of this request that is the only complete tree is published, not rebuilt", () => {
    expect(decideMaterialize(states(absent, mine), request, false)).toMatchObject({
      action: "publish",
      thenBuild: false,
      finishesSwap: false,
    });
    expect(decideMaterialize(states(unfinished, mine), request, false)).toMatchObject({ action: "publish" });
    // --force still publishes it first (it is never discarded while it is the only one), then rebuilds.
    expect(decideMaterialize(states(absent, mine), request, true)).toMatchObject({
      action: "publish",
      thenBuild: true,
    });
  });

  it("a complete <out>.tmp of another request that is the only complete tree is refused, even under --force", () => {
    for (const force of [false, true]) {
      expect(decideMaterialize(states(absent, other), request, force)).toMatchObject({
        action: "refuse",
        code: "MATERIALIZE_STAGED_OTHER_REQUEST",
        path: "staged",
      });
    }
  });

  it("a complete <out>.tmp beside a complete <out> is not the only tree: a build discards it", () => {
    expect(decideMaterialize(states(other, mine), request, true)).toMatchObject({
      action: "build",
      discardStaged: true,
    });
  });

  it("between the swap's renames, this request's staged tree finishes the swap", () => {
    expect(decideMaterialize(states(absent, mine, other), request, false)).toEqual({
      action: "publish",
      recover: [],
      thenBuild: false,
      finishesSwap: true,
    });
  });

  it("between the swap's renames under --force, <out>.previous is renamed back first, then rebuilt", () => {
    expect(decideMaterialize(states(absent, mine, other), request, true)).toEqual({
      action: "build",
      recover: ["restore-previous"],
      discardStaged: true,
      previousAtSwap: false,
    });
  });

  it("between the renames with no usable staged tree, <out>.previous comes back and is judged as the output", () => {
    expect(decideMaterialize(states(absent, unfinished, mine), request, false)).toEqual({
      action: "skip",
      recover: ["restore-previous", "discard-staged"],
      previousKept: false,
    });
    expect(decideMaterialize(states(absent, absent, other), request, false)).toMatchObject({
      action: "refuse",
      code: "MATERIALIZE_OUTPUT_MISMATCH",
    });
  });

  it("a leftover <out>.previous beside <out> is refused before a build unless --force, which removes it at the swap", () => {
    expect(decideMaterialize(states(unfinished, absent, other), request, false)).toMatchObject({
      action: "refuse",
      code: "MATERIALIZE_PREVIOUS_LEFTOVER",
    });
    expect(decideMaterialize(states(unfinished, absent, other), request, true)).toMatchObject({
      action: "build",
      previousAtSwap: true,
    });
  });

  it("a leftover <out>.previous does not stop a skip: nothing is built", () => {
    expect(decideMaterialize(states(mine, absent, other), request, false)).toMatchObject({
      action: "skip",
      previousKept: true,
    });
  });
});
