import { describe, expect, it } from "vitest";
import { faultFires, faultOperation } from "./faults.js";

describe("faultFires", () => {
  it("fires on every matching call without nth or times", () => {
    const fault = { type: "fail", op: "put" } as const;
    expect([1, 2, 50].map((n) => faultFires(fault, n))).toEqual([true, true, true]);
  });

  it("fires on the first `times` calls without nth", () => {
    const fault = { type: "fail", op: "put", times: 2 } as const;
    expect([1, 2, 3].map((n) => faultFires(fault, n))).toEqual([true, true, false]);
  });

  it("fires once on the nth call, or `times` calls from it", () => {
    expect([1, 2, 3].map((n) => faultFires({ type: "fail", op: "get", nth: 2 }, n))).toEqual([
      false,
      true,
      false,
    ]);
    expect([2, 3, 4, 5].map((n) => faultFires({ type: "fail", op: "get", nth: 3, times: 2 }, n))).toEqual([
      false,
      true,
      true,
      false,
    ]);
  });
});

describe("faultOperation", () => {
  it("names the operation each fault applies to", () => {
    expect(faultOperation({ type: "delay", op: "list", ms: 1 })).toBe("list");
    expect(faultOperation({ type: "truncateGet", bytes: 1 })).toBe("get");
    expect(faultOperation({ type: "ignoreConditional" })).toBe("createIfAbsent");
    expect(faultOperation({ type: "lieOnHead", size: 1 })).toBe("head");
  });
});
