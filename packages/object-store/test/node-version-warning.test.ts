// The AWS SDK's Node-version warning is silenced where the SDK is loaded; other warnings still print.
import { describe, expect, it } from "vitest";
import { openStore } from "../src/index.js";

describe("loading the AWS SDK", () => {
  it("emits no NodeVersionSupportWarning, and other warnings still reach the process", async () => {
    const warnings: string[] = [];
    const listener = (warning: Error) => warnings.push(warning.message);
    process.on("warning", listener);
    try {
      const store = await openStore("s3://bucket/prefix", {
        credentials: {
          aws_access_key_id: "AKIDWARN",
          aws_secret_access_key: "warn-secret",
          endpoint_url: "http://127.0.0.1:1", // nothing listens: the listing fails after the SDK loaded
        },
        retry: { retries: 0 },
      });
      const drain = async () => {
        for await (const _ of store.list("")) {
          // nothing is listed: the endpoint is closed
        }
      };
      await expect(drain()).rejects.toMatchObject({ name: "ObjectStoreError" });
      process.emitWarning("an unrelated warning");
      // Warnings are delivered on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", listener);
    }
    expect(warnings.filter((w) => w.includes("NodeVersionSupportWarning"))).toEqual([]);
    expect(warnings).toContain("an unrelated warning");
  });
});
