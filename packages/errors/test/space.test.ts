import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fillDisk, smallDisk } from "@ckpt/test-utils";
import { describe, expect, it } from "vitest";
import { describeShortfall, freeBytes, isNoSpace, spaceShortfall } from "../src/index.js";

const MiB = 1024 * 1024;

describe("free space", () => {
  it("answers a path not created yet by its nearest existing ancestor", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ckpt-space-"));
    try {
      const free = await freeBytes(join(dir, "not", "yet", "made"));
      expect(free).toBe(await freeBytes(dir));
      expect(free).toBeGreaterThan(0);
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it("reports a shortfall on a real small disk, and none once space is freed", async () => {
    const disk = await smallDisk(4 * MiB);
    const filler = await fillDisk(disk, MiB);
    const shortfall = await spaceShortfall(join(disk, "out", "model.safetensors"), 2 * MiB);
    expect(shortfall).toMatchObject({ path: join(disk, "out", "model.safetensors"), needed: 2 * MiB });
    expect(shortfall?.free).toBeLessThan(2 * MiB);
    expect(describeShortfall(shortfall!)).toBe(
      `${join(disk, "out", "model.safetensors")} needs ${2 * MiB} bytes, ${shortfall?.free} free`,
    );
    await rm(filler);
    expect(await spaceShortfall(join(disk, "out"), 2 * MiB)).toBeUndefined();
  });

  it("tells ENOSPC and EDQUOT from other failures", () => {
    const errno = (code: string) => Object.assign(new Error(code), { code });
    expect(isNoSpace(errno("ENOSPC"))).toBe(true);
    expect(isNoSpace(errno("EDQUOT"))).toBe(true);
    expect(isNoSpace(errno("EIO"))).toBe(false);
    expect(isNoSpace(undefined)).toBe(false);
    expect(isNoSpace(new Error("write model.pt failed", { cause: errno("ENOSPC") }))).toBe(true);
    expect(isNoSpace(new Error("write model.pt failed", { cause: errno("EIO") }))).toBe(false);
  });
});
