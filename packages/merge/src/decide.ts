import type { ArtifactManifest, FileDigest, MergeComplete, MergeRequest } from "@ckpt/manifest";
import { MergeError } from "./errors.js";
import type { DiagnosticsTarget } from "./request.js";

/** A record file as found at the output: absent, unreadable (with the reader's code), or parsed. */
export type RecordRead<T> =
  | { readonly status: "absent" }
  | { readonly status: "invalid"; readonly code: string; readonly message: string }
  | { readonly status: "ok"; readonly value: T };

/** The completion record as found: JSON that is not this schema is another writer's record, not a torn one. */
export type CompletionRead =
  | RecordRead<MergeComplete>
  | { readonly status: "unrecognised"; readonly label: string };

/** The native manifest as found: a legacy merge manifest (retired tool) is recognised apart. */
export type ManifestRead =
  | RecordRead<ArtifactManifest>
  | { readonly status: "legacy-merge"; readonly tool: string };

/** What is at the output directory, read without hashing payloads. */
export interface OutputFacts {
  readonly exists: boolean;
  /** Top-level names in the directory. */
  readonly entries: readonly string[];
  readonly completion: CompletionRead;
  readonly manifest: ManifestRead;
}

/** The output directory's state, before the request is compared with it. */
export type OutputState =
  | { readonly kind: "absent" }
  /** Some of a merge's files but no usable completion record (a build that stopped, a removed record). */
  | { readonly kind: "incomplete"; readonly reason: string }
  /** A completion record whose files no longer match it. */
  | { readonly kind: "damaged"; readonly problems: readonly string[] }
  /** A committed artifact that no merge completed (e.g. a trainer's). */
  | { readonly kind: "foreign-artifact"; readonly producer: string | undefined }
  /** Completed by another version of the merge tool (or the retired one). */
  | { readonly kind: "other-tool"; readonly version: string }
  | { readonly kind: "completed"; readonly record: MergeComplete };

/** Names a merge writes into an artifact directory, given the diagnostics it records or is asked for. */
export function mergeOwnedNames(
  modelFile: string,
  manifestFile: string,
  completionFile: string,
  diagnostics: readonly (string | undefined)[],
): Set<string> {
  const names = new Set([modelFile, manifestFile, completionFile]);
  for (const d of diagnostics) if (d !== undefined) names.add(d);
  return names;
}

/**
 * Classifies the output from its records alone (pure). A completion record of this tool version
 * comes back as `completed` and must still pass {@link checkIntact}.
 */
export function classifyOutput(
  facts: OutputFacts,
  toolVersion: string,
  modelFile: string,
): Exclude<OutputState, { kind: "damaged" }> {
  const { completion, manifest } = facts;
  if (completion.status === "ok") {
    if (completion.value.tool_version !== toolVersion) {
      return { kind: "other-tool", version: completion.value.tool_version };
    }
    return { kind: "completed", record: completion.value };
  }
  if (completion.status === "unrecognised") return { kind: "other-tool", version: completion.label };
  if (manifest.status === "legacy-merge")
    return { kind: "other-tool", version: `${manifest.tool} (retired)` };
  if (manifest.status === "ok" && !manifest.value.producer?.startsWith(toolVersion.split("/")[0]!)) {
    return { kind: "foreign-artifact", producer: manifest.value.producer };
  }
  if (!facts.exists || facts.entries.length === 0) return { kind: "absent" };
  const reason =
    completion.status === "invalid"
      ? `its completion record is unreadable (${completion.code})`
      : facts.entries.includes(modelFile)
        ? "it has no completion record"
        : "it holds no model";
  return { kind: "incomplete", reason };
}

/** Problems that make a completed output damaged: recorded files missing or changed (pure). */
export function checkIntact(
  record: MergeComplete,
  actual: ReadonlyMap<string, FileDigest | undefined>,
  manifest: ManifestRead,
  modelFile: string,
): string[] {
  const problems: string[] = [];
  const expect = [...record.files];
  if (record.diagnostics?.location === "artifact") expect.push(record.diagnostics);
  for (const entry of expect) {
    const got = actual.get(entry.path);
    if (got === undefined) problems.push(`${entry.path} is missing`);
    else if (got.size !== entry.size || got.sha256 !== entry.sha256) {
      problems.push(`${entry.path} has changed (size ${got.size}, recorded ${entry.size})`);
    }
  }
  if (manifest.status !== "ok") problems.push(`the native manifest is ${manifest.status}`);
  else {
    const model = manifest.value.physical_components.find((c) => c.name === "model");
    const recorded = record.files.find((f) => f.path === modelFile);
    if (
      model?.kind !== "file" ||
      recorded === undefined ||
      model.size !== recorded.size ||
      model.sha256 !== recorded.sha256
    ) {
      problems.push("the native manifest does not describe the recorded model");
    }
  }
  return problems;
}

/** The request as the completion record states it, with expert digests possibly not yet known. */
export interface RequestedIdentity {
  readonly request: Omit<MergeRequest, "experts" | "base"> & {
    readonly experts: readonly { readonly source: string; readonly size: number; readonly sha256?: string }[];
    readonly base: { readonly source: string; readonly fingerprint?: string } | null;
  };
  readonly diagnostics: DiagnosticsTarget;
}

/**
 * Fields in which a completed merge's request differs from a new one (pure). Sources are labels:
 * the same bytes at another path are the same request. Expert digests and the base fingerprint are
 * compared only when the requested ones are known, so a cheap comparison can run before hashing.
 */
export function compareRequests(recorded: MergeComplete, requested: RequestedIdentity): string[] {
  const a = recorded.request;
  const b = requested.request;
  const differences: string[] = [];
  if (a.mode !== b.mode) differences.push("mode");
  if (a.lam !== b.lam) differences.push("lam");
  if (a.iteration !== b.iteration) differences.push("iteration");
  if (
    (a.base === null) !== (b.base === null) ||
    (a.base && b.base?.fingerprint !== undefined && a.base.fingerprint !== b.base.fingerprint)
  ) {
    differences.push("base");
  }
  if (a.experts.length !== b.experts.length) differences.push("experts (count)");
  else {
    a.experts.forEach((e, i) => {
      const want = b.experts[i]!;
      if (e.size !== want.size || (want.sha256 !== undefined && e.sha256 !== want.sha256)) {
        differences.push(`experts[${i}]`);
      }
    });
  }
  const d = recorded.diagnostics;
  const want = requested.diagnostics;
  const sameDiagnostics =
    d !== null &&
    d.location === want.location &&
    (d.location === "artifact" ? d.path === want.path : d.source === want.path);
  if (!sameDiagnostics) differences.push("diagnostics");
  return differences;
}

export type MergeDecision =
  | { readonly action: "skip"; readonly reason: string }
  | { readonly action: "build"; readonly reason: string }
  | { readonly action: "refuse"; readonly error: MergeError };

export interface DecisionInput {
  /** The artifact directory, for messages. */
  readonly iterDir: string;
  readonly state: OutputState;
  /** For `completed`: how the request differs from the recorded one (empty: the same request). */
  readonly differences?: readonly string[];
  readonly force: boolean;
  readonly toolVersion: string;
  /** Entries of the directory a merge did not write; a build never removes them. */
  readonly foreignEntries: readonly string[];
}

/**
 * Skip, build or refuse (pure). The same request over an intact output skips; an absent,
 * incomplete or damaged output is built; a completed output of another request, another tool
 * version or another writer is refused unless `force`. Whatever else, a build never replaces a
 * directory holding files a merge did not write.
 */
export function decideMerge(input: DecisionInput): MergeDecision {
  const { iterDir, state, force } = input;
  const refuse = (code: ConstructorParameters<typeof MergeError>[0], message: string): MergeDecision => ({
    action: "refuse",
    error: new MergeError(code, message, { kind: "refused", file: iterDir }),
  });
  let decision: MergeDecision;
  switch (state.kind) {
    case "absent":
      decision = { action: "build", reason: "no output yet" };
      break;
    case "incomplete":
      decision = { action: "build", reason: `the output is incomplete: ${state.reason}` };
      break;
    case "damaged":
      decision = { action: "build", reason: `the output is damaged: ${state.problems.join("; ")}` };
      break;
    case "completed": {
      const differences = input.differences ?? [];
      if (differences.length === 0) {
        decision = force
          ? { action: "build", reason: "--force rebuilds an identical completed output" }
          : { action: "skip", reason: "the same request completed here and its files are intact" };
      } else if (force) {
        decision = {
          action: "build",
          reason: `--force replaces a merge of another request (${differences.join(", ")})`,
        };
      } else {
        return refuse(
          "MERGE_DIFFERENT_REQUEST",
          `merge into ${iterDir}: it holds a completed merge of another request (differs in ${differences.join(", ")}). ` +
            "Pass --force to replace it, or choose another --out.",
        );
      }
      break;
    }
    case "other-tool":
      if (!force) {
        return refuse(
          "MERGE_OTHER_TOOL_VERSION",
          `merge into ${iterDir}: it was completed by ${state.version}, not ${input.toolVersion}. ` +
            "Pass --force to rebuild it with this version, or choose another --out.",
        );
      }
      decision = { action: "build", reason: `--force rebuilds an output of ${state.version}` };
      break;
    case "foreign-artifact":
      if (!force) {
        return refuse(
          "MERGE_FOREIGN_ARTIFACT",
          `merge into ${iterDir}: it holds a committed artifact written by ${state.producer ?? "an unnamed producer"}, not by a merge. ` +
            "Pass --force to replace it, or choose another --out.",
        );
      }
      decision = {
        action: "build",
        reason: `--force replaces an artifact of ${state.producer ?? "an unnamed producer"}`,
      };
      break;
  }
  if (decision.action === "build" && input.foreignEntries.length > 0) {
    const listed = input.foreignEntries.slice(0, 5).join(", ");
    const more = input.foreignEntries.length > 5 ? ` and ${input.foreignEntries.length - 5} more` : "";
    return refuse(
      "MERGE_FOREIGN_FILES",
      `merge into ${iterDir}: it holds files a merge does not write (${listed}${more}), which replacing the output would remove. ` +
        "Move them elsewhere, or choose another --out. Nothing was changed.",
    );
  }
  return decision;
}
