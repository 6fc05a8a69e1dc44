import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { open, readFile, realpath, rename, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDirectory, sha256Hex } from "@ckpt/manifest";
import { DiagnosticsError } from "./errors.js";

/**
 * What a volume promises a checkpoint written the way ckpt writes (temporary, fsync, rename,
 * fsync of the directory):
 * - `local`: the committed file outlives the writing process, and a power cut once the fsyncs
 *   return, but not the machine: other nodes cannot read it and losing the node loses it.
 * - `volatile`: memory-backed (tmpfs, ramfs): the committed file outlives the writing process but
 *   not a power cut, a reboot or an unmount, whatever fsync returns; other nodes cannot read it.
 * - `shared-safe`: the committed file outlives the node; every node sees the whole file under its
 *   final name once the rename returns (rename and fsync are carried out by the file server).
 * - `shared-unsafe`: other nodes can read the volume but it promises no atomic rename or durable
 *   fsync (object-store FUSE mounts and the like): a reader may see a partial or stale file, and a
 *   commit record may become visible before the payload it describes.
 */
export type VolumeTier = "local" | "volatile" | "shared-safe" | "shared-unsafe";

export const VOLUME_TIER_PROMISES: Record<VolumeTier, string> = {
  local:
    "survives the death of the writing process (and a power cut once fsync returns), not the loss of this machine; other nodes cannot read it",
  volatile:
    "held in memory: survives the death of the writing process, but not a power cut, a reboot or an unmount (fsync writes nothing to a device); other nodes cannot read it",
  "shared-safe":
    "survives the loss of the writing node; other nodes see the whole file under its final name once the rename returns",
  "shared-unsafe":
    "readable from other nodes, but rename and fsync carry no promise there: a reader can see a partial or stale file, so it cannot hold a primary checkpoint; publish to an object store instead",
};

/** Filesystem types by tier. A FUSE type not listed is `shared-unsafe`: its daemon decides what rename means. */
const LOCAL_TYPES = new Set([
  "apfs",
  "bcachefs",
  "btrfs",
  "exfat",
  "ext2",
  "ext3",
  "ext4",
  "f2fs",
  "hfs",
  "hfsplus",
  "jfs",
  "nilfs2",
  "ntfs",
  "ntfs3",
  "overlay",
  "reiserfs",
  "vfat",
  "xfs",
  "zfs",
]);
/** Memory-backed: nothing reaches a device, so nothing survives a power cut. */
const VOLATILE_TYPES = new Set(["ramfs", "tmpfs"]);
const SHARED_SAFE_TYPES = new Set([
  "9p",
  "beegfs",
  "ceph",
  "cifs",
  "fuse.ceph-fuse",
  "fuse.glusterfs",
  "fuse.juicefs",
  "glusterfs",
  "gpfs",
  "lustre",
  "nfs",
  "nfs4",
  "orangefs",
  "panfs",
  "smb3",
  "virtiofs",
  "wekafs",
]);

/** The tier a filesystem type implies, or undefined for a type ckpt does not know. Pure. */
export function classifyFilesystem(fsType: string): VolumeTier | undefined {
  if (LOCAL_TYPES.has(fsType)) return "local";
  if (VOLATILE_TYPES.has(fsType)) return "volatile";
  if (SHARED_SAFE_TYPES.has(fsType)) return "shared-safe";
  if (fsType === "fuse" || fsType.startsWith("fuse.") || fsType === "fuseblk") return "shared-unsafe";
  return undefined;
}

/** One line of /proc/self/mountinfo, the fields the probe uses. */
export interface MountEntry {
  readonly mountPoint: string;
  /** With a FUSE subtype when there is one: `fuse.s3fs`. */
  readonly fsType: string;
  readonly source: string;
}

/** mountinfo escapes space, tab, newline and backslash as three octal digits. */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** Parses /proc/self/mountinfo (proc(5)); malformed lines are skipped. Pure. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split("\n")) {
    const fields = line.trim().split(" ");
    const separator = fields.indexOf("-", 6);
    if (fields.length < 10 || separator < 0 || separator + 2 >= fields.length) continue;
    entries.push({
      mountPoint: unescapeMountField(fields[4]!),
      fsType: unescapeMountField(fields[separator + 1]!),
      source: unescapeMountField(fields[separator + 2]!),
    });
  }
  return entries;
}

/** The mount holding `realPath` (an absolute path without symlinks): the longest mount point above it, the later mount winning. Pure. */
export function mountOf(mounts: readonly MountEntry[], realPath: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const mount of mounts) {
    const point = mount.mountPoint;
    const covers = point === "/" || realPath === point || realPath.startsWith(`${point}/`);
    if (covers && (best === undefined || point.length >= best.mountPoint.length)) best = mount;
  }
  return best;
}

/** statfs(2) magic numbers, for systems without /proc/self/mountinfo. */
const STATFS_TYPES: Record<number, string> = {
  198183888: "lustre",
  16914836: "tmpfs",
  2240043254: "ramfs",
  16914839: "9p",
  12805120: "ceph",
  428016422: "beegfs",
  801189825: "zfs",
  1196443219: "gpfs",
  1481003842: "xfs",
  26985: "nfs",
  1702057286: "fuse",
  2035054128: "overlay",
  2435016766: "btrfs",
  61267: "ext4",
  4076150800: "f2fs",
  4266872130: "smb3",
  4283649346: "cifs",
};

interface ProbeFilesystem {
  /** As mountinfo names it (`ext4`, `nfs4`, `fuse.s3fs`), or statfs's magic number in hex when unknown. */
  readonly type: string;
  readonly mountPoint: string | undefined;
  readonly source: string | undefined;
  readonly detectedBy: "mountinfo" | "statfs";
}

async function detectFilesystem(realDir: string): Promise<ProbeFilesystem> {
  try {
    const mount = mountOf(parseMountInfo(await readFile("/proc/self/mountinfo", "utf8")), realDir);
    if (mount !== undefined) {
      return {
        type: mount.fsType,
        mountPoint: mount.mountPoint,
        source: mount.source,
        detectedBy: "mountinfo",
      };
    }
  } catch {
    // Not Linux: statfs below.
  }
  const { type } = await statfs(realDir);
  return {
    type: STATFS_TYPES[type] ?? `0x${type.toString(16)}`,
    mountPoint: undefined,
    source: undefined,
    detectedBy: "statfs",
  };
}

type ProbeStepName = "write" | "fsync-file" | "rename" | "fsync-dir" | "read-back" | "cleanup";

export interface ProbeStep {
  readonly name: ProbeStepName;
  readonly ok: boolean;
  readonly durationMs: number;
  readonly detail: string;
}

export interface StorageProbeReport {
  readonly dir: string;
  readonly realDir: string;
  readonly filesystem: ProbeFilesystem;
  /** The tier the filesystem type implies; unknown types are `shared-unsafe`, with `known: false`. */
  readonly tier: VolumeTier;
  readonly known: boolean;
  readonly promise: string;
  /** Every step, in order; a step after a failed one is not run. */
  readonly steps: readonly ProbeStep[];
  /** All steps passed. */
  readonly probeOk: boolean;
}

export interface ProbeStorageOptions {
  /** Bytes written by the probe (default 1 MiB). */
  readonly bytes?: number;
  /**
   * Reads the committed file back from another process and returns its size and SHA-256.
   * Default: a fresh `node` process (process.execPath) that opens and hashes the file.
   */
  readonly readBack?: (path: string) => Promise<{ size: number; sha256: string }>;
}

const READ_BACK_SCRIPT = `
const { createHash } = require("node:crypto");
const { readFileSync } = require("node:fs");
const bytes = readFileSync(process.argv[1]);
process.stdout.write(JSON.stringify({ size: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") }));
`;

/** The default read-back: a second process, so the answer does not come from this process's handles. */
export function readBackInChildProcess(path: string): Promise<{ size: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["-e", READ_BACK_SCRIPT, path],
      { timeout: 60_000, maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the reading process failed: ${stderr.trim() || error.message}`));
        else resolve(JSON.parse(stdout) as { size: number; sha256: string });
      },
    );
  });
}

/** A volume as its filesystem type describes it, without writing anything (`StorageProbeReport` less the steps). */
export type VolumeDescription = Omit<StorageProbeReport, "steps" | "probeOk">;

/**
 * The filesystem holding `dir` and the tier its type implies, read from the mount table (or
 * statfs) without writing anything: the read-only half of {@link probeStorage}. A path that is not
 * an existing directory is `STORAGE_PROBE_NOT_A_DIRECTORY` (kind input).
 */
export async function describeVolume(dir: string): Promise<VolumeDescription> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new DiagnosticsError(
      "STORAGE_PROBE_NOT_A_DIRECTORY",
      `probe storage ${dir}: ${info === undefined ? "no such directory" : "not a directory"}. Pass the directory checkpoints will be written to.`,
      { kind: "input", subject: dir },
    );
  }
  const realDir = await realpath(dir);
  const filesystem = await detectFilesystem(realDir);
  const classified = classifyFilesystem(filesystem.type);
  const tier = classified ?? "shared-unsafe";
  return {
    dir,
    realDir,
    filesystem,
    tier,
    known: classified !== undefined,
    promise: VOLUME_TIER_PROMISES[tier],
  };
}

/**
 * Probes a directory the way ckpt commits a file: writes a probe file under a temporary name,
 * fsyncs it, renames it, fsyncs the directory, then has a second process read it back and
 * compare size and SHA-256; finally removes the probe file (only the files it created). Reports
 * each step and the tier the volume's filesystem type implies ({@link describeVolume}). A path
 * that is not an existing directory is `STORAGE_PROBE_NOT_A_DIRECTORY` (kind input); a failed
 * step is reported, not thrown.
 */
export async function probeStorage(
  dir: string,
  options: ProbeStorageOptions = {},
): Promise<StorageProbeReport> {
  const volume = await describeVolume(dir);

  const token = `${process.pid}-${randomBytes(6).toString("hex")}`;
  const finalPath = join(dir, `.ckpt-storage-probe-${token}`);
  const tempPath = `${finalPath}.tmp`;
  const payload = randomBytes(options.bytes ?? 1024 * 1024);
  const expected = sha256Hex(payload);
  const readBack = options.readBack ?? readBackInChildProcess;
  const steps: ProbeStep[] = [];
  const step = async (name: ProbeStepName, action: () => Promise<string>): Promise<boolean> => {
    const started = performance.now();
    try {
      const detail = await action();
      steps.push({ name, ok: true, durationMs: performance.now() - started, detail });
      return true;
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      steps.push({ name, ok: false, durationMs: performance.now() - started, detail });
      return false;
    }
  };

  let handle: Awaited<ReturnType<typeof open>> | undefined;
  const ran =
    (await step("write", async () => {
      handle = await open(tempPath, "wx");
      await handle.writeFile(payload);
      return `${payload.length} bytes to ${tempPath}`;
    })) &&
    (await step("fsync-file", async () => {
      await handle!.sync();
      await handle!.close();
      handle = undefined;
      return "the file's data reached the device";
    })) &&
    (await step("rename", async () => {
      await rename(tempPath, finalPath);
      return `renamed to ${finalPath}`;
    })) &&
    (await step("fsync-dir", async () => {
      await fsyncDirectory(dir);
      return "the rename reached the device";
    })) &&
    (await step("read-back", async () => {
      const seen = await readBack(finalPath);
      if (seen.size !== payload.length || seen.sha256 !== expected) {
        throw new Error(
          `another process read ${seen.size} bytes with sha256 ${seen.sha256}; ${payload.length} bytes with ${expected} were written`,
        );
      }
      return "another process read the same size and sha256";
    }));
  await handle?.close().catch(() => {});
  await step("cleanup", async () => {
    await rm(tempPath, { force: true });
    await rm(finalPath, { force: true });
    return "removed the probe file";
  });
  return { ...volume, steps, probeOk: ran && steps.every((s) => s.ok) };
}

/**
 * The verdict on a probe: sound when every step passed and the tier is `local` or `shared-safe`
 * (`expect: "shared"` also refuses `local`, for a checkpoint directory several nodes must read);
 * a `volatile` volume is refused: a checkpoint there is lost at the next power cut or reboot. Pure.
 */
export function storageVerdict(
  report: Pick<StorageProbeReport, "tier" | "probeOk" | "known" | "filesystem" | "steps">,
  expect: "any" | "shared" = "any",
): { ok: boolean; reasons: string[] } {
  const reasons: string[] = [];
  for (const s of report.steps) if (!s.ok) reasons.push(`${s.name} failed: ${s.detail}`);
  if (report.tier === "shared-unsafe") {
    reasons.push(
      report.known
        ? `${report.filesystem.type} is shared-unsafe: ${VOLUME_TIER_PROMISES["shared-unsafe"]}`
        : `${report.filesystem.type} is a filesystem type ckpt does not know; it is treated as shared-unsafe`,
    );
  }
  if (report.tier === "volatile") {
    reasons.push(
      `${report.filesystem.type} is volatile: ${VOLUME_TIER_PROMISES.volatile}; write checkpoints to a disk-backed volume`,
    );
  } else if (expect === "shared" && report.tier === "local") {
    reasons.push(`${report.filesystem.type} is local: other nodes cannot read what is written here`);
  }
  return { ok: reasons.length === 0, reasons };
}
