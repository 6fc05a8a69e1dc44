import { execFileSync } from "node:child_process";
import { chmod, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { smallDisk, testdir } from "@ckpt/test-utils";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  classifyFilesystem,
  describeVolume,
  mountOf,
  parseMountInfo,
  probeStorage,
  readBackInChildProcess,
  storageVerdict,
} from "../src/storage-probe.js";

const MOUNTINFO = [
  "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard",
  "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=1k",
  "61 27 0:50 / /lustre rw,relatime shared:30 - lustre 10.0.0.1@tcp:/fs rw,flock",
  "62 27 0:51 / /mnt/my\\040bucket rw,nosuid,nodev master:1 - fuse.s3fs s3fs rw,user_id=0",
  "63 27 0:52 /exports /home rw - nfs4 filer:/exports rw,vers=4.2",
  "64 63 0:53 / /home/alice/scratch rw - tmpfs tmpfs rw",
  "garbage line",
].join("\n");

describe("mount table", () => {
  it("parses mountinfo: optional fields, escaped spaces, FUSE subtypes", () => {
    const mounts = parseMountInfo(MOUNTINFO);
    expect(mounts).toHaveLength(6);
    expect(mounts[2]).toEqual({ mountPoint: "/lustre", fsType: "lustre", source: "10.0.0.1@tcp:/fs" });
    expect(mounts[3]).toEqual({ mountPoint: "/mnt/my bucket", fsType: "fuse.s3fs", source: "s3fs" });
  });

  it("finds the innermost mount holding a path, never a sibling with a common prefix", () => {
    const mounts = parseMountInfo(MOUNTINFO);
    expect(mountOf(mounts, "/lustre/run/iter_1")?.fsType).toBe("lustre");
    expect(mountOf(mounts, "/lustre2/x")?.fsType).toBe("ext4");
    expect(mountOf(mounts, "/home/alice/scratch/ckpt")?.fsType).toBe("tmpfs");
    expect(mountOf(mounts, "/home/alice/other")?.fsType).toBe("nfs4");
    expect(mountOf(mounts, "/mnt/my bucket/a")?.fsType).toBe("fuse.s3fs");
    expect(mountOf(mounts, "/")?.fsType).toBe("ext4");
  });

  it("classifies filesystem types into tiers; unknown FUSE daemons are unsafe, unknown types unknown", () => {
    expect(["ext4", "xfs", "overlay", "zfs"].map(classifyFilesystem)).toEqual(Array(4).fill("local"));
    expect(["tmpfs", "ramfs"].map(classifyFilesystem)).toEqual(["volatile", "volatile"]);
    expect(
      ["nfs", "nfs4", "lustre", "gpfs", "ceph", "9p", "beegfs", "fuse.juicefs"].map(classifyFilesystem),
    ).toEqual(Array(8).fill("shared-safe"));
    expect(
      ["fuse.s3fs", "fuse.gcsfuse", "fuse.goofys", "fuse.rclone", "fuse"].map(classifyFilesystem),
    ).toEqual(Array(5).fill("shared-unsafe"));
    expect(classifyFilesystem("proc")).toBeUndefined();
  });
});

describe("probeStorage", () => {
  /** The filesystem type util-linux reports, as an independent witness (the last of stacked mounts is the visible one). */
  const findmnt = (dir: string) =>
    execFileSync("findmnt", ["-n", "-o", "FSTYPE", "--target", dir], { encoding: "utf8" })
      .trim()
      .split("\n")
      .at(-1) ?? "";

  it("runs every step on a local disk, reads back from a second process, and leaves nothing behind", async () => {
    const dir = await testdir("ckpt-probe-");
    await writeFile(join(dir, "keep.txt"), "not the probe's");
    const report = await probeStorage(dir, { bytes: 4096 });
    expect(report.steps.map((s) => [s.name, s.ok])).toEqual([
      ["write", true],
      ["fsync-file", true],
      ["rename", true],
      ["fsync-dir", true],
      ["read-back", true],
      ["cleanup", true],
    ]);
    expect(report.probeOk).toBe(true);
    expect(report.filesystem).toMatchObject({ type: findmnt(dir), detectedBy: "mountinfo" });
    expect(report.tier).toBe(classifyFilesystem(findmnt(dir)));
    expect(await readdir(dir)).toEqual(["keep.txt"]);
    expect(storageVerdict(report)).toEqual({ ok: true, reasons: [] });
    if (report.tier === "local") {
      expect(storageVerdict(report, "shared").ok).toBe(false);
    }
  });

  it("describeVolume names the same filesystem and tier without writing, into a read-only directory too", async () => {
    const dir = await testdir("ckpt-probe-");
    await writeFile(join(dir, "keep.txt"), "not the probe's");
    await chmod(dir, 0o555);
    onTestFinished(() => chmod(dir, 0o755));
    const volume = await describeVolume(dir);
    expect(volume.filesystem).toMatchObject({ type: findmnt(dir), detectedBy: "mountinfo" });
    expect(volume).toMatchObject({ dir, tier: classifyFilesystem(findmnt(dir)), known: true });
    expect(volume).not.toHaveProperty("steps");
    expect(await readdir(dir)).toEqual(["keep.txt"]);
    await expect(describeVolume(join(dir, "keep.txt"))).rejects.toMatchObject({
      code: "STORAGE_PROBE_NOT_A_DIRECTORY",
    });
  });

  it("classifies a real tmpfs as volatile: every step passes, yet no power-cut promise and not sound", async () => {
    const dir = await smallDisk(4 * 1024 * 1024);
    expect(findmnt(dir)).toBe("tmpfs");
    const report = await probeStorage(dir, { bytes: 1024 });
    expect(report).toMatchObject({
      tier: "volatile",
      known: true,
      probeOk: true,
      filesystem: { type: "tmpfs", mountPoint: dir, detectedBy: "mountinfo" },
    });
    expect(report.promise).not.toMatch(/power cut once fsync returns/);
    expect(report.promise).toMatch(/not a power cut/);
    const verdict = storageVerdict(report);
    expect(verdict.ok).toBe(false);
    expect(verdict.reasons).toEqual([expect.stringMatching(/^tmpfs is volatile: .*disk-backed volume$/)]);
  });

  it("names the step that failed: a read-back that sees other bytes fails the probe", async () => {
    const dir = await testdir("ckpt-probe-");
    const report = await probeStorage(dir, {
      bytes: 1024,
      readBack: async () => ({ size: 1024, sha256: "0".repeat(64) }),
    });
    expect(report.probeOk).toBe(false);
    expect(report.steps.find((s) => !s.ok)).toMatchObject({ name: "read-back" });
    expect(report.steps.at(-1)).toMatchObject({ name: "cleanup", ok: true });
    expect(await readdir(dir)).toEqual([]);
    expect(storageVerdict(report).reasons[0]).toMatch(/^read-back failed: another process read 1024 bytes/);
  });

  it("a directory nothing can be created in fails at the write step and is an unknown type", async () => {
    const report = await probeStorage("/proc");
    expect(report.steps.map((s) => [s.name, s.ok])).toEqual([
      ["write", false],
      ["cleanup", true],
    ]);
    expect(report).toMatchObject({ known: false, tier: "shared-unsafe", filesystem: { type: "proc" } });
    const verdict = storageVerdict(report);
    expect(verdict.ok).toBe(false);
    expect(verdict.reasons.join("\n")).toMatch(
      /write failed[\s\S]*proc is a filesystem type ckpt does not know/,
    );
  });

  it("refuses a path that is not a directory as input", async () => {
    const dir = await testdir("ckpt-probe-");
    await writeFile(join(dir, "f"), "x");
    await expect(probeStorage(join(dir, "f"))).rejects.toMatchObject({
      code: "STORAGE_PROBE_NOT_A_DIRECTORY",
      kind: "input",
    });
  });

  it("the default read-back runs in another process", async () => {
    const dir = await testdir("ckpt-probe-");
    await writeFile(join(dir, "x"), "hello");
    expect(await readBackInChildProcess(join(dir, "x"))).toEqual({
      size: 5,
      sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    });
    await expect(readBackInChildProcess(join(dir, "missing"))).rejects.toThrow(/the reading process failed/);
  });
});
