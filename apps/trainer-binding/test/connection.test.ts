import { PassThrough, Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { TrainerBindingError } from "../src/errors.js";
import { type RequestHandler, serveConnection } from "../src/protocol/connection.js";
import { MAX_LINE_BYTES, type Request } from "../src/protocol/messages.js";

/** A handler that answers from a table and records what it saw. */
function tableHandler(answer: (request: Request) => Promise<unknown>) {
  const seen: string[] = [];
  let abandoned = 0;
  const handler: RequestHandler = {
    async handle(request) {
      seen.push(request.op);
      const result = await answer(request);
      return { result, end: request.op === "finalize" };
    },
    async abandon() {
      abandoned++;
    },
  };
  return { handler, seen, abandoned: () => abandoned };
}

async function exchange(lines: string[], handler: RequestHandler) {
  const input = new PassThrough();
  const output = new PassThrough();
  let text = "";
  output.on("data", (c) => (text += c));
  const done = serveConnection(input, output, handler);
  input.end(lines.join(""));
  const end = await done;
  return {
    end,
    responses: text
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l)),
  };
}

describe("serveConnection", () => {
  it("answers pipelined requests one each, in order, even when earlier ones are slower", async () => {
    const { handler, seen } = tableHandler(async (r) => {
      if (r.op === "resume") await new Promise((res) => setTimeout(res, 30));
      return { op: r.op };
    });
    const { end, responses } = await exchange(
      ['{"id":1,"op":"resume"}\n', '{"id":2,"op":"should_stop"}\n', '{"id":"z","op":"finalize"}\n'],
      handler,
    );
    expect(end).toBe("finalized");
    expect(seen).toEqual(["resume", "should_stop", "finalize"]);
    expect(responses).toEqual([
      { id: 1, ok: true, result: { op: "resume" } },
      { id: 2, ok: true, result: { op: "should_stop" } },
      { id: "z", ok: true, result: { op: "finalize" } },
    ]);
  });

  it("stops reading at finalize: later lines are not served", async () => {
    const { handler, seen, abandoned } = tableHandler(async () => ({}));
    const { responses } = await exchange(['{"id":1,"op":"finalize"}\n', '{"id":2,"op":"resume"}\n'], handler);
    expect(seen).toEqual(["finalize"]);
    expect(responses).toHaveLength(1);
    expect(abandoned()).toBe(0);
  });

  it("keeps the connection after a bad line and answers it with an error (id when readable)", async () => {
    const { handler } = tableHandler(async () => ({ fine: true }));
    const { end, responses } = await exchange(
      ["garbage\n", "\n", '{"id":5,"op":"nope"}\n', '{"id":6,"op":"resume"}\n'],
      handler,
    );
    expect(end).toBe("abandoned");
    expect(responses.map((r) => [r.id, r.ok, r.error?.code])).toEqual([
      [null, false, "PROTOCOL_PARSE"],
      [5, false, "PROTOCOL_UNKNOWN_OP"],
      [6, true, undefined],
    ]);
  });

  it("answers an over-long line with PROTOCOL_LINE_TOO_LONG and goes on", async () => {
    const { handler } = tableHandler(async () => 1);
    const huge = `{"id":1,"op":"resume","args":{"x":"${"a".repeat(MAX_LINE_BYTES)}"}}\n`;
    const { responses } = await exchange([huge, '{"id":2,"op":"resume"}\n'], handler);
    expect(responses[0]).toMatchObject({ id: null, ok: false, error: { code: "PROTOCOL_LINE_TOO_LONG" } });
    expect(responses[1]).toEqual({ id: 2, ok: true, result: 1 });
  });

  it("passes coded errors through with their code and kind, and hides nothing else as success", async () => {
    const managerError = Object.assign(new Error("resume source /x is incomplete"), {
      code: "MANAGER_RESUME_INCOMPLETE",
      kind: "refused",
    });
    const { handler } = tableHandler(async (r) => {
      if (r.op === "resume") throw managerError;
      if (r.op === "commit") throw new TrainerBindingError("SAVE_UNKNOWN", "no such save", { kind: "input" });
      throw new TypeError("boom");
    });
    const { responses } = await exchange(
      [
        '{"id":1,"op":"resume"}\n',
        '{"id":2,"op":"commit","args":{"save_id":"9"}}\n',
        '{"id":3,"op":"should_stop"}\n',
      ],
      handler,
    );
    expect(responses.map((r) => r.error)).toEqual([
      {
        code: "MANAGER_RESUME_INCOMPLETE",
        kind: "refused",
        message: "resume source /x is incomplete",
        source: "manager",
      },
      { code: "SAVE_UNKNOWN", kind: "input", message: "no such save", source: "protocol" },
      { code: "INTERNAL", kind: "failed", message: "internal error: boom", source: "protocol" },
    ]);
  });

  it("abandons the session when the input ends without finalize", async () => {
    const { handler, abandoned } = tableHandler(async () => ({}));
    const { end } = await exchange(['{"id":1,"op":"resume"}\n'], handler);
    expect(end).toBe("abandoned");
    expect(abandoned()).toBe(1);
  });

  it("abandons the session when the output breaks (the client died)", async () => {
    const { handler, abandoned } = tableHandler(async () => ({}));
    const input = new PassThrough();
    const output = new PassThrough();
    output.destroy();
    const done = serveConnection(input, output, handler);
    input.write('{"id":1,"op":"resume"}\n');
    expect(await done).toBe("abandoned");
    expect(abandoned()).toBe(1);
    input.destroy();
  });

  it("abandons the session on a broken pipe without an unhandled 'error' event (a SIGKILLed trainer)", async () => {
    const { handler, abandoned } = tableHandler(async () => ({}));
    const input = new PassThrough();
    const output = new Writable({
      write(_chunk, _encoding, callback) {
        callback(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
      },
    });
    const done = serveConnection(input, output, handler);
    input.write('{"id":1,"op":"resume"}\n');
    expect(await done).toBe("abandoned");
    expect(abandoned()).toBe(1);
    // The stream's 'error' event comes after the write's callback; unheard, it would crash the run.
    await new Promise((resolve) => setImmediate(resolve));
    expect(output.destroyed).toBe(true);
    input.destroy();
  });
});
