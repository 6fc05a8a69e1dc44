// tools/test-utils' own mechanisms: the temporary directory that removes itself and the seeded RNG.
import { existsSync } from "node:fs";
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  makeDcpFixtures,
  mulberry32,
  randomInt,
  seededBytes,
  seedFrom,
  testdir,
  torch2Python,
} from "@ckpt/test-utils";
import { beforeAll, describe, expect, it } from "vitest";

describe("testdir", () => {
  let madeInTest = "";
  it("makes a fresh directory inside a test", async () => {
    madeInTest = await testdir("ckpt-testdir-");
    await writeFile(join(madeInTest, "f"), "x");
    expect(existsSync(join(madeInTest, "f"))).toBe(true);
    expect(await testdir("ckpt-testdir-")).not.toBe(madeInTest);
  });
  it("removed it when that test finished", () => {
    expect(madeInTest).not.toBe("");
    expect(existsSync(madeInTest)).toBe(false);
  });

  let madeInHook = "";
  describe("made in a beforeAll", () => {
    beforeAll(async () => {
      madeInHook = await testdir("ckpt-testdir-");
    });
    it("lives through the suite's tests", () => expect(existsSync(madeInHook)).toBe(true));
    it("and is still there for the next one", () => expect(existsSync(madeInHook)).toBe(true));
  });
  it("lives on until the test file ends", () => expect(existsSync(madeInHook)).toBe(true));
});

describe("the seeded RNG", () => {
  it("repeats its sequence for a seed and differs across seeds", () => {
    const draw = (seed: number) => Array.from({ length: 8 }, mulberry32(seed));
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
    for (const x of draw(7)) expect(x >= 0 && x < 1).toBe(true);
  });
  it("draws integers within both bounds", () => {
    const random = mulberry32(1);
    const seen = new Set(Array.from({ length: 200 }, () => randomInt(random, 3, 5)));
    expect([...seen].sort()).toEqual([3, 4, 5]);
  });
  it("gives the same bytes for a seed and other bytes for another", () => {
    expect(seededBytes(64, 3)).toEqual(seededBytes(64, 3));
    expect(seededBytes(64, 3)).not.toEqual(seededBytes(64, 4));
    expect(new Set(seededBytes(4096, 3)).size).toBeGreaterThan(200);
  });
  it("takes a replay seed from the environment and refuses a malformed one", () => {
    expect(seedFrom("SEED", { SEED: "42" })).toBe(42);
    expect(() => seedFrom("SEED", { SEED: "-1" })).toThrow(/expected an integer/);
    expect(Number.isInteger(seedFrom("SEED", {}))).toBe(true);
  });
});

describe("makeDcpFixtures", () => {
  it("leaves nothing in TMPDIR: torch's inductor cache goes to a directory of its own, removed after", async () => {
    const out = await testdir("ckpt-dcp-out-");
    const tmp = await testdir("ckpt-dcp-tmpdir-");
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const fixtures = await makeDcpFixtures(out, torch2Python(), [2]);
      expect(Object.keys(fixtures)).toEqual(["ranks2"]);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    expect(await readdir(tmp)).toEqual([]);
  }, 240_000);
});
