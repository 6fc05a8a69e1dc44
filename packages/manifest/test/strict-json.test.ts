import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { parseStrictJson } from "../src/json/strict.js";

/** Unsafe integers are refused by design (see the refusal cases), so the agreement property skips them. */
function allIntegersSafe(v: unknown): boolean {
  if (typeof v === "number") return !Number.isInteger(v) || Number.isSafeInteger(v);
  if (Array.isArray(v)) return v.every(allIntegersSafe);
  if (v !== null && typeof v === "object") return Object.values(v).every(allIntegersSafe);
  return true;
}

const parse = (text: string, maxDepth?: number) => parseStrictJson(text, { name: "t.json", maxDepth });

describe("parseStrictJson", () => {
  it("parses what JSON.parse parses, for well-formed values", () => {
    const text = '{"a":[1,2.5,-3e2,true,false,null,"x\\n\\u00e9\\ud83d\\ude00"],"b":{"c":{}},"d":[]}';
    expect(parse(text)).toEqual(JSON.parse(text));
  });

  it("agrees with JSON.parse on generated values", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }).filter(allIntegersSafe), (v) => {
        const text = JSON.stringify(v);
        expect(parse(text)).toEqual(JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it("keeps a __proto__ key as an own property", () => {
    const v = parse('{"__proto__":{"polluted":1}}') as Record<string, unknown>;
    expect(Object.keys(v)).toEqual(["__proto__"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it.each([
    ['{"a":1,"a":2}', "JSON_DUPLICATE_KEY", "a"],
    ['{"x":{"b":[{"k":1,"k":1}]}}', "JSON_DUPLICATE_KEY", "x.b[0].k"],
    ["\ufeff{}", "JSON_BOM", undefined],
    ['{"a":', "JSON_TRUNCATED", "a"],
    ['{"a":"abc', "JSON_TRUNCATED", "a"],
    ["[1,2", "JSON_TRUNCATED", undefined],
    ["", "JSON_TRUNCATED", undefined],
    ["{} x", "JSON_SYNTAX", undefined],
    ["{'a':1}", "JSON_SYNTAX", undefined],
    ['{"a":1,}', "JSON_SYNTAX", undefined],
    ["[01]", "JSON_SYNTAX", undefined],
    ["[1.]", "JSON_SYNTAX", "[0]"],
    ["[NaN]", "JSON_SYNTAX", "[0]"],
    ['["\\x"]', "JSON_SYNTAX", "[0]"],
    ['["a\tb"]', "JSON_SYNTAX", "[0]"],
    ['["\\ud800"]', "JSON_SYNTAX", "[0]"],
    ['["\\udc00x"]', "JSON_SYNTAX", "[0]"],
    ["[1e400]", "JSON_NUMBER_OUT_OF_RANGE", "[0]"],
    ['{"n":9007199254740993}', "JSON_NUMBER_OUT_OF_RANGE", "n"],
  ])("refuses %j with %s", (text, code, field) => {
    let caught: unknown;
    try {
      parse(text);
    } catch (e) {
      caught = e;
    }
    expect(caught).toMatchObject({ code, file: "t.json", field });
    expect(String((caught as Error).message)).toContain("t.json");
  });

  it("reports line and column", () => {
    expect(() => parse('{\n  "a": tru\n}')).toThrow(/line 2 column 8/);
  });

  it("caps nesting depth", () => {
    expect(parse("[".repeat(64) + "]".repeat(64))).toBeDefined();
    expect(() => parse("[".repeat(65) + "]".repeat(65))).toThrow(
      expect.objectContaining({ code: "JSON_TOO_DEEP" }),
    );
    expect(() => parse("[".repeat(100_000))).toThrow(expect.objectContaining({ code: "JSON_TOO_DEEP" }));
    expect(() => parse("[[[]]]", 2)).toThrow(expect.objectContaining({ code: "JSON_TOO_DEEP" }));
    // The path of a hostile nesting is cut so the error stays small.
    let field = "";
    try {
      parse(`{"k":${"[".repeat(500)}`, 1000);
    } catch (e) {
      field = (e as { field: string }).field;
    }
    expect(field.startsWith("k[0][0]")).toBe(true);
    expect(field.endsWith("…")).toBe(true);
    expect(field.length).toBeLessThanOrEqual(201);
  });

  it("caps length before parsing", () => {
    expect(() => parseStrictJson("[1]    ", { name: "t.json", maxLength: 5 })).toThrow(
      expect.objectContaining({ code: "JSON_TOO_LONG" }),
    );
  });

  it("accepts integers up to 2^53-1 and any finite fraction", () => {
    expect(parse("[9007199254740991,-9007199254740991,1.5e300]")).toEqual([
      9007199254740991, -9007199254740991, 1.5e300,
    ]);
  });

  it("with integersOnly, refuses a fraction or an exponent by its raw token, naming the field", () => {
    const strict = (text: string) => parseStrictJson(text, { name: "h.json", integersOnly: true });
    expect(strict('{"shape":[2,0,-3]}')).toEqual({ shape: [2, 0, -3] });
    for (const token of ["1.0", "4e0", "4E+0", "0.5", "-1.0e1"]) {
      expect(() => strict(`{"w":{"shape":[${token}]}}`)).toThrow(
        expect.objectContaining({ code: "JSON_NOT_INTEGER", field: "w.shape[0]", file: "h.json" }),
      );
    }
    expect(parse("[1.0,4e0]")).toEqual([1, 4]);
  });

  it("with approximateLargeIntegers, reads an integer beyond 2^53 as the nearest double; Infinity stays refused", () => {
    const text = '{"model_max_length":1000000000000000019884624838656}';
    expect(() => parse(text)).toThrow(expect.objectContaining({ code: "JSON_NUMBER_OUT_OF_RANGE" }));
    const loose = (t: string) => parseStrictJson(t, { name: "t.json", approximateLargeIntegers: true });
    expect(loose(text)).toEqual({ model_max_length: 1e30 });
    expect(() => loose(`[1${"0".repeat(400)}]`)).toThrow(
      expect.objectContaining({ code: "JSON_NUMBER_OUT_OF_RANGE" }),
    );
  });
});
