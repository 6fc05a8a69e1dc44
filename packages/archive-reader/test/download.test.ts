import { describe, expect, it } from "vitest";
import { defaultResumeDelay } from "../src/fetch/download.js";

describe("the pause before a resume", () => {
  it("is object-store's backoff: under 200 ms at the first break, never over 5 s", () => {
    for (let i = 0; i < 200; i++) {
      expect(defaultResumeDelay(1)).toBeLessThan(200);
      expect(defaultResumeDelay(30)).toBeLessThan(5_000);
      expect(defaultResumeDelay(4)).toBeGreaterThanOrEqual(0);
    }
  });
});
