import { describe, expect, it } from "vitest";
import {
  isRejected,
  negotiateVersion,
  OP_NAMES,
  PROTOCOL_VERSIONS,
  parseRequest,
} from "../src/protocol/messages.js";

function rejected(line: string) {
  const parsed = parseRequest(line);
  if (!isRejected(parsed)) throw new Error(`expected a rejection of ${line}`);
  return parsed;
}

describe("parseRequest", () => {
  it("accepts every op of v1 with its defaults filled in", () => {
    expect(OP_NAMES).toEqual([
      "hello",
      "open",
      "resume",
      "begin_save",
      "commit",
      "complete_validation",
      "should_stop",
      "finalize",
    ]);
    expect(parseRequest('{"id":1,"op":"begin_save","args":{"step":10}}')).toEqual({
      id: 1,
      op: "begin_save",
      args: { step: 10, final: false, validation: false, emergency: false },
    });
    expect(parseRequest('{"id":"a","op":"resume"}')).toEqual({ id: "a", op: "resume", args: {} });
    expect(
      parseRequest('{"id":2,"op":"open","args":{"output_root":"/o","project":"p","group":"g","name":"n"}}'),
    ).toEqual({
      id: 2,
      op: "open",
      args: { config: {}, output_root: "/o", project: "p", group: "g", name: "n", rank: 0, world_size: 1 },
    });
    expect(parseRequest('{"id":3,"op":"should_stop","args":{"signals":["SIGTERM"]}}')).toEqual({
      id: 3,
      op: "should_stop",
      args: { signals: ["SIGTERM"] },
    });
  });

  it("refuses a line that is not JSON, without an id to answer", () => {
    const r = rejected("{not json");
    expect(r.id).toBeNull();
    expect(r.error.code).toBe("PROTOCOL_PARSE");
  });

  it("refuses an unknown op and names the ops it knows, answering the request's id", () => {
    const r = rejected('{"id":7,"op":"save"}');
    expect(r.id).toBe(7);
    expect(r.error.code).toBe("PROTOCOL_UNKNOWN_OP");
    expect(r.error.message).toContain("begin_save");
  });

  it("refuses unknown fields (a misspelled option must not be ignored)", () => {
    const r = rejected('{"id":4,"op":"begin_save","args":{"step":1,"emergncy":true}}');
    expect(r.error.code).toBe("PROTOCOL_BAD_REQUEST");
    expect(r.error.message).toContain("emergncy");
    expect(rejected('{"id":4,"op":"resume","extra":1}').error.code).toBe("PROTOCOL_BAD_REQUEST");
  });

  it("refuses bad argument values and names the field", () => {
    expect(rejected('{"id":1,"op":"begin_save","args":{"step":-1}}').error.message).toContain("args.step");
    expect(rejected('{"id":1,"op":"begin_save","args":{"step":1.5}}').error.code).toBe(
      "PROTOCOL_BAD_REQUEST",
    );
    const rank = rejected(
      '{"id":1,"op":"open","args":{"output_root":"/o","project":"p","group":"g","name":"n","rank":2,"world_size":2}}',
    );
    expect(rank.error.message).toContain("args.rank");
    expect(rejected('{"id":1,"op":"should_stop","args":{"signals":["SIGKILL"]}}').error.code).toBe(
      "PROTOCOL_BAD_REQUEST",
    );
  });

  it("accepts a commit inventory and refuses an unsafe or repeated path with its own code", () => {
    const digest = "ab".repeat(32);
    const commit = (inventory: unknown) =>
      JSON.stringify({ id: 9, op: "commit", args: { save_id: "1", inventory } });
    const entry = { path: "model/__0_0.distcp", size: 12, sha256: digest };
    expect(parseRequest(commit([entry, { ...entry, path: "model/.metadata" }]))).toMatchObject({
      op: "commit",
      args: { save_id: "1", inventory: [entry, { ...entry, path: "model/.metadata" }] },
    });
    for (const path of ["../model/x", "/abs/x", "model/\u0000x", "model//x", ""]) {
      const r = rejected(commit([{ ...entry, path }]));
      expect(r.id).toBe(9);
      expect(r.error.code, path).toBe("INVENTORY_UNSAFE_PATH");
    }
    expect(rejected(commit([entry, entry])).error.code).toBe("INVENTORY_DUPLICATE_PATH");
    expect(rejected(commit([{ ...entry, sha256: "AB".repeat(32) }])).error.message).toContain("sha256");
    expect(rejected(commit([{ ...entry, size: -1 }])).error.code).toBe("PROTOCOL_BAD_REQUEST");
  });

  it("refuses a missing or malformed id, echoing null", () => {
    expect(rejected('{"op":"resume"}').id).toBeNull();
    expect(rejected('{"id":-1,"op":"resume"}').id).toBeNull();
    expect(rejected('{"id":{"x":1},"op":"resume"}').error.code).toBe("PROTOCOL_BAD_REQUEST");
    expect(rejected("[1,2]").error.code).toBe("PROTOCOL_BAD_REQUEST");
  });
});

describe("negotiateVersion", () => {
  it("picks the highest version both sides speak", () => {
    expect(PROTOCOL_VERSIONS).toEqual([1]);
    expect(negotiateVersion([1])).toBe(1);
    expect(negotiateVersion([3, 2, 1])).toBe(1);
  });

  it("refuses an offer with no common version and lists what this side speaks", () => {
    expect(() => negotiateVersion([2, 3])).toThrow(
      expect.objectContaining({ code: "PROTOCOL_VERSION", message: expect.stringContaining("speaks 1") }),
    );
  });
});
