import { describe, expect, it } from "vitest";
import { type InputListing, planMerge, type TensorListing } from "../src/index.js";

const t = (name: string, shape: number[], dtype: TensorListing["dtype"] = "BF16"): TensorListing => ({
  name,
  dtype,
  shape,
});
const model = [t("embed.weight", [8, 4]), t("layers.0.w", [4, 4]), t("norm.weight", [4])];
const input = (file: string, tensors: TensorListing[] = model): InputListing => ({ file, tensors });

describe("planMerge", () => {
  it("plans the first expert's tensors in its order, with sizes", () => {
    const plan = planMerge("avg", [input("a"), input("b", [...model].reverse())]);
    expect(plan.tensors.map((p) => p.name)).toEqual(["embed.weight", "layers.0.w", "norm.weight"]);
    expect(plan.tensors[0]).toMatchObject({ numel: 32, byteLength: 64 });
    expect(plan).toMatchObject({ experts: 2, withBase: false, totalBytes: 64 + 32 + 8, largestBytes: 64 });
  });

  it("accepts F16 and F32 models and a zero-element tensor", () => {
    const plan = planMerge("avg", [input("a", [t("x", [2], "F32"), t("y", [0, 3], "F16")])]);
    expect(plan.tensors.map((p) => p.byteLength)).toEqual([8, 0]);
  });

  it("plans tv with a base holding the same keys", () => {
    expect(planMerge("tv", [input("a"), input("b")], input("base")).withBase).toBe(true);
  });

  it("refuses tv without a base", () => {
    expect(() => planMerge("tv", [input("a")])).toThrow(
      expect.objectContaining({ code: "MERGE_BAD_REQUEST" }),
    );
  });

  it("refuses an expert without tensors", () => {
    expect(() => planMerge("avg", [input("a", [])])).toThrow(
      expect.objectContaining({ code: "MERGE_EMPTY_MODEL", file: "a" }),
    );
  });

  it("names a key an expert lacks, and the expert", () => {
    const error = (() => {
      try {
        planMerge("avg", [input("a"), input("b", model.slice(0, 1))]);
      } catch (e) {
        return e as Error & { code: string; file: string; tensor: string };
      }
    })();
    expect(error).toMatchObject({ code: "MERGE_KEY_MISSING", file: "b", tensor: "layers.0.w" });
    expect(error!.message).toContain("expert 2 (b) lacks tensor layers.0.w");
    expect(error!.message).toContain("and 1 more");
  });

  it("names a key the base lacks", () => {
    expect(() => planMerge("tv", [input("a")], input("base", model.slice(1)))).toThrow(
      expect.objectContaining({
        code: "MERGE_KEY_MISSING",
        file: "base",
        tensor: "embed.weight",
        message: expect.stringContaining("the base"),
      }),
    );
  });

  it("names an extra key of a later expert and of the base", () => {
    expect(() => planMerge("avg", [input("a"), input("b", [...model, t("extra", [1])])])).toThrow(
      expect.objectContaining({ code: "MERGE_KEY_EXTRA", file: "b", tensor: "extra" }),
    );
    expect(() =>
      planMerge("avg", [input("a"), input("b")], input("base", [...model, t("lm_head", [2])])),
    ).toThrow(expect.objectContaining({ code: "MERGE_KEY_EXTRA", file: "base", tensor: "lm_head" }));
  });

  it("names a shape disagreement", () => {
    const other = [t("embed.weight", [4, 8]), ...model.slice(1)];
    expect(() => planMerge("avg", [input("a"), input("b", other)])).toThrow(
      expect.objectContaining({
        code: "MERGE_SHAPE_MISMATCH",
        tensor: "embed.weight",
        message: expect.stringContaining("[4, 8]"),
      }),
    );
  });

  it("names a dtype disagreement with the base", () => {
    const other = model.map((x) => (x.name === "norm.weight" ? t(x.name, [4], "F32") : x));
    expect(() => planMerge("tv", [input("a")], input("base", other))).toThrow(
      expect.objectContaining({ code: "MERGE_DTYPE_MISMATCH", file: "base", tensor: "norm.weight" }),
    );
  });

  it("refuses integer tensors by name", () => {
    expect(() => planMerge("avg", [input("a", [...model, t("position_ids", [1, 16], "I64")])])).toThrow(
      expect.objectContaining({ code: "MERGE_DTYPE_UNSUPPORTED", tensor: "position_ids" }),
    );
  });

  it.each(["F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F4", "F6_E2M3", "C64"] as const)(
    "refuses %s tensors, naming tensor and dtype",
    (dtype) => {
      expect(() => planMerge("avg", [input("a", [...model, t("scales", [2, 8], dtype)])])).toThrow(
        expect.objectContaining({
          code: "MERGE_DTYPE_UNSUPPORTED",
          tensor: "scales",
          message: expect.stringContaining(`scales of a is ${dtype}`),
        }),
      );
    },
  );
});
