// The one place `ckpt mcp` meets the evidence libraries: every tool answers through these
// functions. status and evidence answer from the ckpt.evidence.v2 model (@ckpt/evidence), whose
// problems come from its closed set. Each returns a JSON-able report; paths given here are already
// resolved inside the served root (path-guard.ts). Nothing here writes.
import type { VolumeDescription } from "@ckpt/diagnostics";
import type { Evidence } from "@ckpt/evidence";
import type { VerifyKind } from "@ckpt/verify";
import { requireRunOrAttemptDir } from "../attempt-dir.js";

/** code -> its docs/troubleshooting.md row, embedded at build time (apps/cli/tsup.config.ts). */
declare const __CKPT_TROUBLESHOOTING__: Record<string, { section: string; meaning: string; remedy: string }>;

/**
 * Loads the libraries the tools answer from while the client is still deciding what to ask, so the
 * first request does not pay for compiling them (on a busy machine, about a second). A failure
 * here is left to the request that needs the library, which reports it.
 */
export function preloadLibraries(): void {
  import("@ckpt/evidence").catch(() => {});
}

/** The ckpt.evidence.v2 bundle of a run or one attempt; `signal` (the request's budget) cancels its collection. */
export async function runEvidence(path: string, signal: AbortSignal): Promise<Evidence & { ok: boolean }> {
  await requireRunOrAttemptDir(path);
  const { buildEvidence, withoutErrors } = await import("@ckpt/evidence");
  const bundle = await buildEvidence(path, { signal });
  return { ok: withoutErrors(bundle.problems), ...bundle };
}

/** `ckpt run status`: a run attempt at a glance, in the v2 model (the command's own report). */
export { attemptStatus } from "../commands/run-status.js";

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

/**
 * The volume holding `dir` and `ckpt doctor volume`'s verdict on its tier, without the write
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
