import { drain } from "@ckpt/progress";
import { testdir } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../src/memory/store.js";
import { copyPrefixIter } from "../src/transfer/copy.js";
import { downloadPrefixIter } from "../src/transfer/download.js";
import type { TransferEvent } from "../src/transfer/events.js";

describe("prefix transfers as long operations (memory store)", () => {
  it("copy yields one event per object and returns its report", async () => {
    const src = createMemoryStore();
    const dst = createMemoryStore();
    await src.put("a/one", Buffer.from("111"));
    await src.put("a/two", Buffer.from("22"));
    await dst.put("a/two", Buffer.from("22"));
    const events: TransferEvent[] = [];
    const report = await drain(copyPrefixIter(src, dst, { prefix: "a" }), (event) => events.push(event));
    expect(events.map((e) => [e.type, e.key])).toEqual([
      ["done", "a/one"],
      ["skip", "a/two"],
    ]);
    expect(report).toEqual({
      transferred: [{ key: "a/one", size: 3 }],
      skipped: [{ key: "a/two", size: 2 }],
      replaced: [],
      bytes: 3,
    });
  });

  it("download returns its report, and a second run skips every file", async () => {
    const store = createMemoryStore();
    await store.put("p/x.bin", Buffer.from("xyz"));
    const dir = await testdir();
    const first = await drain(downloadPrefixIter(store, "p", dir));
    expect(first).toEqual({
      transferred: [{ key: "p/x.bin", size: 3 }],
      skipped: [],
      replaced: [],
      bytes: 3,
    });
    const second = await drain(downloadPrefixIter(store, "p", dir));
    expect(second).toEqual({
      transferred: [],
      skipped: [{ key: "p/x.bin", size: 3 }],
      replaced: [],
      bytes: 0,
    });
  });
});
