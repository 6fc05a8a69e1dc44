import { describe, expect, it } from "vitest";
import { drain, mapEvents, withEvents } from "../src/index.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function collect<E, R>(
  operation: AsyncGenerator<E, R, undefined>,
): Promise<{ events: E[]; report: R }> {
  const events: E[] = [];
  const report = await drain(operation, (event) => events.push(event));
  return { events, report };
}

describe("withEvents", () => {
  it("yields the events in emission order across concurrent emitters, then returns the report", async () => {
    const operation = withEvents<string, { count: number }>(async (emit) => {
      const worker = async (name: string, steps: number) => {
        for (let i = 0; i < steps; i++) {
          emit(`${name}${i}`);
          await tick();
        }
      };
      emit("start");
      await Promise.all([worker("a", 3), worker("b", 2)]);
      emit("end");
      return { count: 7 };
    });
    const { events, report } = await collect(operation);
    expect(events).toEqual(["start", "a0", "b0", "a1", "b1", "a2", "end"]);
    expect(report).toEqual({ count: 7 });
  });

  it("returns the report as the generator's return value, not as an event", async () => {
    const operation = withEvents<number, string>(async (emit) => {
      emit(1);
      return "report";
    });
    expect(await operation.next()).toEqual({ done: false, value: 1 });
    expect(await operation.next()).toEqual({ done: true, value: "report" });
  });

  it("throws the executor's error after the events queued before it", async () => {
    const failure = new Error("broken");
    const seen: number[] = [];
    const operation = withEvents<number, void>(async (emit) => {
      emit(1);
      emit(2);
      throw failure;
    });
    await expect(drain(operation, (event) => seen.push(event))).rejects.toBe(failure);
    expect(seen).toEqual([1, 2]);
  });

  it("propagates an executor that throws synchronously", async () => {
    const failure = new Error("at once");
    const operation = withEvents<number, void>(() => {
      throw failure;
    });
    await expect(drain(operation)).rejects.toBe(failure);
  });

  it("aborts the executor's signal when the consumer leaves the loop, and waits for it to settle", async () => {
    let signal: AbortSignal | undefined;
    let settled = false;
    const operation = withEvents<number, string>(async (emit, given) => {
      signal = given;
      try {
        for (let i = 0; ; i++) {
          if (given.aborted) throw given.reason;
          emit(i);
          await tick();
        }
      } finally {
        settled = true;
      }
    });
    const seen: number[] = [];
    for await (const event of operation) {
      seen.push(event);
      if (event === 2) break;
    }
    expect(seen).toEqual([0, 1, 2]);
    expect(signal?.aborted).toBe(true);
    expect(settled).toBe(true);
  });

  it("aborts the executor's signal with the caller's reason when the caller's signal aborts", async () => {
    const caller = new AbortController();
    const reason = new Error("caller gave up");
    const operation = withEvents<string, void>(async (emit, signal) => {
      emit("waiting");
      await new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
    }, caller.signal);
    const seen: string[] = [];
    const done = drain(operation, (event) => {
      seen.push(event);
      caller.abort(reason);
    });
    await expect(done).rejects.toBe(reason);
    expect(seen).toEqual(["waiting"]);
  });

  it("hands an already aborted caller's signal to the executor as aborted", async () => {
    const caller = new AbortController();
    caller.abort(new Error("before the start"));
    const operation = withEvents<never, boolean>(async (_emit, signal) => signal.aborted, caller.signal);
    expect(await drain(operation)).toBe(true);
  });

  it("leaves the signal alone when the work finishes normally", async () => {
    let signal: AbortSignal | undefined;
    const report = await drain(
      withEvents<never, string>(async (_emit, given) => {
        signal = given;
        return "ok";
      }),
    );
    expect(report).toBe("ok");
    expect(signal?.aborted).toBe(false);
  });
});

describe("drain", () => {
  it("returns a hand-written generator's return value and hands over each event", async () => {
    async function* operation(): AsyncGenerator<string, number, undefined> {
      yield "a";
      yield "b";
      return 2;
    }
    const { events, report } = await collect(operation());
    expect(events).toEqual(["a", "b"]);
    expect(report).toBe(2);
  });
});

describe("mapEvents", () => {
  it("maps each event and returns the inner report", async () => {
    const inner = withEvents<number, string>(async (emit) => {
      emit(1);
      emit(2);
      return "inner";
    });
    const { events, report } = await collect(mapEvents(inner, (n) => ({ wrapped: n })));
    expect(events).toEqual([{ wrapped: 1 }, { wrapped: 2 }]);
    expect(report).toBe("inner");
  });

  it("stops the inner operation when the consumer leaves early", async () => {
    let signal: AbortSignal | undefined;
    const inner = withEvents<number, void>(async (emit, given) => {
      signal = given;
      for (let i = 0; !given.aborted; i++) {
        emit(i);
        await tick();
      }
    });
    for await (const event of mapEvents(inner, (n) => n * 10)) if (event === 20) break;
    expect(signal?.aborted).toBe(true);
  });
});
