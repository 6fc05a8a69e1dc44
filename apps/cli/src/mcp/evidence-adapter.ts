// The one place `ckpt mcp` meets the evidence libraries: every tool answers through these
// functions, so moving the server to another evidence model (a versioned bundle with a closed set
// of problem codes) changes this module only. Each returns a JSON-able report; paths given here
// are already resolved inside the served root (path-guard.ts). Nothing here writes.
import type { VolumeDescription } from "@ckpt/diagnostics";
import type { VerifyKind } from "@ckpt/verify";
import { requireAttemptDir } from "../attempt-dir.js";

/** code -> its docs/troubleshooting.md row, embedded at build time (apps/cli/tsup.config.ts). */
declare const __CKPT_TROUBLESHOOTING__: Record<string, { section: string; meaning: string; remedy: string }>;

/** `ckpt run status`: a run attempt's checkpoints, pointer, receipts and the resume decision. */
export async function attemptStatus(attemptDir: string) {
  await requireAttemptDir(attemptDir);
  const { runStatus } = await import("@ckpt/trainer-checkpoint-manager");
  return runStatus(attemptDir);
}

/** `ckpt resumable`: would training resume from this checkpoint, and why not. */
export async function checkpointResumable(iterDir: string, sha256: string | null) {
  const { checkResumable } = await import("@ckpt/trainer-checkpoint-manager");
  return checkResumable(iterDir, sha256);
}

/** `ckpt verify`: a checkpoint, artifact, stage, DCP, HF directory or tensor file against its records. */
export async function verifyTarget(
  path: string,
  options: { kind?: VerifyKind; deep: boolean; finite: boolean; signal: AbortSignal },
) {
  const { verifyPath } = await import("@ckpt/verify");
  return verifyPath(path, options);
}

/** `ckpt evidence`: one bundle of a run attempt. */
export async function attemptEvidence(attemptDir: string) {
  await requireAttemptDir(attemptDir);
  const { collectEvidence } = await import("@ckpt/trainer-checkpoint-manager");
  const bundle = await collectEvidence(attemptDir);
  return { ok: bundle.problems.length === 0, ...bundle };
}

/**
 * The volume holding `dir` and `ckpt doctor storage`'s verdict on its tier, without the write
 * probe (the server writes nothing): `probed: false` says the commit sequence itself was not run.
 */
export async function volumeVerdict(
  dir: string,
  expect: "any" | "shared",
): Promise<VolumeDescription & { ok: boolean; expect: string; probed: false; reasons: string[] }> {
  const { describeVolume, storageVerdict } = await import("@ckpt/diagnostics");
  const volume = await describeVolume(dir);
  const verdict = storageVerdict({ ...volume, steps: [], probeOk: true }, expect);
  return { ok: verdict.ok, ...volume, expect, probed: false, reasons: verdict.reasons };
}

/** What a code means and what to do about it, from the documented registry; unknown codes get the nearest known ones. */
export function explainCode(code: string) {
  const wanted = code.trim().toUpperCase();
  const entry = __CKPT_TROUBLESHOOTING__[wanted];
  if (entry !== undefined) return { code: wanted, known: true as const, ...entry };
  const prefix = wanted.split("_")[0] ?? "";
  const related = Object.keys(__CKPT_TROUBLESHOOTING__)
    .filter((known) => prefix.length > 0 && known.startsWith(`${prefix}_`))
    .sort()
    .slice(0, 20);
  return { code: wanted, known: false as const, related };
}
