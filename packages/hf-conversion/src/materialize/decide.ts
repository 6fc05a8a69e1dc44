import type { BaseIdentity, MaterializedMarker, MaterializeOptions, SourceFile } from "@ckpt/manifest";
import type { HfConversionErrorCode } from "../errors.js";

/** What a request is: the same identity means the same output bytes. */
export interface RequestIdentity {
  readonly conversion_version: string;
  readonly source: SourceFile;
  readonly base: BaseIdentity;
  readonly options: MaterializeOptions;
}

/** What one of `<out>`, `<out>.tmp`, `<out>.previous` holds, as far as a decision needs to know. */
export type TreeState =
  | { readonly kind: "absent" }
  /** A valid marker over an intact tree. */
  | { readonly kind: "complete"; readonly marker: MaterializedMarker }
  /** This tool's (a valid marker over a damaged tree, a valid overlay record, or only a record's temporary) but not complete. */
  | { readonly kind: "incomplete"; readonly reason: string }
  /** Holds files this tool did not write, or is not a directory. */
  | { readonly kind: "foreign"; readonly reason: string };

export interface OutputStates {
  readonly out: TreeState;
  readonly staged: TreeState;
  readonly previous: TreeState;
}

/** Repairs done before the action, in order. */
export type Recovery =
  /** `<out>.previous` -> `<out>`: undo the first rename of an interrupted swap. */
  | "restore-previous"
  /** Remove an abandoned, incomplete `<out>.tmp` (it holds this tool's record or nothing). */
  | "discard-staged";

export type MaterializeDecision =
  /** A complete tree must be compared with the request, whose source digest is not known yet. */
  | { readonly action: "need-identity" }
  | {
      readonly action: "refuse";
      readonly code: HfConversionErrorCode;
      readonly found: string;
      readonly consequence: string;
      readonly remedy: string;
      /** Which path the refusal is about. */
      readonly path: "out" | "staged" | "previous";
    }
  | {
      readonly action: "skip";
      readonly recover: readonly Recovery[];
      /** A `<out>.previous` is left beside the complete output (only --force removes it). */
      readonly previousKept: boolean;
    }
  | {
      /** Verify the complete staged tree and swap it in; `thenBuild` under --force. */
      readonly action: "publish";
      readonly recover: readonly Recovery[];
      readonly thenBuild: boolean;
      /** `<out>.previous` is the tail of the interrupted swap this publish finishes. */
      readonly finishesSwap: boolean;
    }
  | {
      readonly action: "build";
      readonly recover: readonly Recovery[];
      /** An existing `<out>.tmp` (abandoned, or a complete tree no longer the only one) goes first. */
      readonly discardStaged: boolean;
      /** A leftover `<out>.previous` beside `<out>` is removed at the swap (--force). */
      readonly previousAtSwap: boolean;
    };

/** The differences between a recorded identity and a request, as phrases; empty when they are the same output. */
export function identityDifferences(recorded: RequestIdentity, request: RequestIdentity): string[] {
  const out: string[] = [];
  if (recorded.conversion_version !== request.conversion_version) {
    out.push(`conversion ${recorded.conversion_version} (this tool writes ${request.conversion_version})`);
  }
  if (recorded.source.sha256 !== request.source.sha256 || recorded.source.size !== request.source.size) {
    out.push(
      `source ${recorded.source.source} (${recorded.source.size} bytes, sha256 ${recorded.source.sha256.slice(0, 12)}…), not ${request.source.source} (${request.source.size} bytes, sha256 ${request.source.sha256.slice(0, 12)}…)`,
    );
  }
  if (recorded.base.fingerprint !== request.base.fingerprint) {
    out.push(
      `base ${recorded.base.source} (fingerprint ${recorded.base.fingerprint.slice(0, 12)}…), not ${request.base.source} (${request.base.fingerprint.slice(0, 12)}…)`,
    );
  }
  if (recorded.options.unified_chat_template !== request.options.unified_chat_template) {
    out.push(
      `unified_chat_template ${recorded.options.unified_chat_template}, not ${request.options.unified_chat_template}`,
    );
  }
  return out;
}

const present = (s: TreeState) => s.kind !== "absent";
const NAMES = { out: "<out>", staged: "<out>.tmp", previous: "<out>.previous" } as const;

/**
 * Decides what a request does with what is at `<out>`, `<out>.tmp` and `<out>.previous`, taken
 * under the output's lock. Pure. The rules (docs/hf-conversion.md, "Identity and skip"):
 * a foreign tree anywhere is refused; the state between the swap's two renames is recovered
 * (finished when the staged tree is this request's, else `<out>.previous` is renamed back); a
 * complete `<out>.tmp` that is the only complete tree is never discarded (published when it is
 * this request's, refused otherwise); an intact output of the same request skips (`--force`
 * rebuilds); another request's complete output is refused without `--force`; anything else is
 * built; a leftover `<out>.previous` beside `<out>` is refused before a build without `--force`.
 */
export function decideMaterialize(
  states: OutputStates,
  identity: RequestIdentity | undefined,
  force: boolean,
): MaterializeDecision {
  for (const path of ["out", "staged", "previous"] as const) {
    const state = states[path];
    if (state.kind === "foreign") {
      return {
        action: "refuse",
        code: "MATERIALIZE_OUTPUT_FOREIGN",
        found: `${NAMES[path]} ${state.reason}`,
        consequence: "the build would have replaced or removed files ckpt did not write",
        remedy: "Move them away or choose another --out; ckpt never deletes what it did not create.",
        path,
      };
    }
  }
  try {
    return decideComparing(states, identity, force);
  } catch (error) {
    if (error === NEED_IDENTITY) return { action: "need-identity" };
    throw error;
  }
}

const NEED_IDENTITY = Symbol("need-identity");

/** The rules past the foreign check; throws NEED_IDENTITY where a comparison needs the missing identity. */
function decideComparing(
  states: OutputStates,
  identity: RequestIdentity | undefined,
  force: boolean,
): MaterializeDecision {
  // Asked for only where a complete tree is compared with the request, so a --force rebuild over
  // a complete output does not wait for a local source to be hashed before it starts.
  const differences = (s: TreeState & { kind: "complete" }) => {
    if (identity === undefined) throw NEED_IDENTITY;
    return identityDifferences(s.marker, identity);
  };
  const same = (s: TreeState) => s.kind === "complete" && differences(s).length === 0;
  const recover: Recovery[] = [];
  let out = states.out;
  let previous = states.previous;
  const staged = states.staged;

  // Between the swap's two renames: <out> is gone, <out>.previous holds the tree it replaced.
  if (!present(out) && present(previous)) {
    if (!force && same(staged)) return { action: "publish", recover, thenBuild: false, finishesSwap: true };
    recover.push("restore-previous");
    out = previous;
    previous = { kind: "absent" };
  }
  // The staged tree is the only complete one: never discarded.
  if (staged.kind === "complete" && out.kind !== "complete") {
    const found = differences(staged);
    if (found.length > 0) {
      return {
        action: "refuse",
        code: "MATERIALIZE_STAGED_OTHER_REQUEST",
        found: `<out>.tmp holds a complete output of another request (${found.join("; ")}) and no complete output is at <out>`,
        consequence: "the build would have discarded the only complete tree",
        remedy: "Re-run the request that built it (it publishes it), or move <out>.tmp away.",
        path: "staged",
      };
    }
    if (present(previous) && !force) return leftover();
    return { action: "publish", recover, thenBuild: force, finishesSwap: false };
  }
  if (out.kind === "complete" && !force) {
    const found = differences(out);
    if (found.length > 0) {
      return {
        action: "refuse",
        code: "MATERIALIZE_OUTPUT_MISMATCH",
        found: `<out> is a completed output of another request: ${found.join("; ")}`,
        consequence: "the build would have replaced it",
        remedy: "Pass --force to rebuild it, or choose another --out.",
        path: "out",
      };
    }
    if (staged.kind === "incomplete") recover.push("discard-staged");
    return { action: "skip", recover, previousKept: present(previous) };
  }
  if (present(previous) && !force) return leftover();
  return { action: "build", recover, discardStaged: present(staged), previousAtSwap: present(previous) };
}

function leftover(): MaterializeDecision {
  return {
    action: "refuse",
    code: "MATERIALIZE_PREVIOUS_LEFTOVER",
    found: "<out>.previous is left beside <out> by an interrupted swap",
    consequence: "the build's swap moves <out> to that name",
    remedy: "Pass --force (the leftover is removed at the swap), or inspect and remove <out>.previous.",
    path: "previous",
  };
}

/** What a decided request would do, in words: `--dry-run`'s report. */
interface DecisionExplanation {
  readonly reason: string;
  /** Paths (`<out>`, `<out>.tmp`, `<out>.previous`) a run would replace, remove or rename, each with why. */
  readonly wouldReplace: readonly { readonly path: "out" | "staged" | "previous"; readonly reason: string }[];
}

const describeState = (s: TreeState): string =>
  s.kind === "complete" ? "a complete output" : s.kind === "absent" ? "nothing" : `${s.kind}: ${s.reason}`;

/**
 * Says why `decision` was taken over `states` and what it would replace. Pure; the decision is
 * {@link decideMaterialize}'s for the same states, identity and `force`.
 */
export function explainDecision(
  decision: Exclude<MaterializeDecision, { action: "need-identity" | "refuse" }>,
  states: OutputStates,
  identity: RequestIdentity,
): DecisionExplanation {
  const would: { path: "out" | "staged" | "previous"; reason: string }[] = [];
  for (const step of decision.recover) {
    if (step === "restore-previous")
      would.push({
        path: "previous",
        reason: "renamed back to <out>: a swap was interrupted between its renames",
      });
    else would.push({ path: "staged", reason: `removed: ${describeState(states.staged)}` });
  }
  const differences = (s: TreeState) =>
    s.kind === "complete" ? identityDifferences(s.marker, identity) : [];
  switch (decision.action) {
    case "skip":
      return {
        reason: "the same request completed here (its marker records this source, base and options)",
        wouldReplace: would,
      };
    case "publish": {
      if (!decision.finishesSwap && states.out.kind !== "absent")
        would.push({
          path: "out",
          reason: `replaced by <out>.tmp at the swap: it holds ${describeState(states.out)}`,
        });
      const then = decision.thenBuild ? "; then --force rebuilds it" : "";
      return {
        reason: decision.finishesSwap
          ? `a swap was interrupted between its renames and <out>.tmp is this request's complete build: the swap is finished${then}`
          : `<out>.tmp is this request's complete build and the only complete one: it is verified and swapped in${then}`,
        wouldReplace: would,
      };
    }
    case "build": {
      if (decision.discardStaged)
        would.push({
          path: "staged",
          reason: `removed before the build: it holds ${describeState(states.staged)}`,
        });
      if (decision.previousAtSwap)
        would.push({
          path: "previous",
          reason: "left by an interrupted swap; --force removes it at the swap",
        });
      const out = decision.recover.includes("restore-previous") ? states.previous : states.out;
      const found = differences(out);
      let reason: string;
      if (out.kind === "complete") {
        reason =
          found.length > 0
            ? `--force replaces a completed output of another request: ${found.join("; ")}`
            : "--force rebuilds a completed output of this same request";
      } else if (out.kind === "absent") reason = "nothing is at <out>";
      else reason = `<out> is ${describeState(out)}`;
      if (out.kind !== "absent")
        would.push({
          path: "out",
          reason: `replaced by the new build at the swap: it holds ${describeState(out)}`,
        });
      return { reason, wouldReplace: would };
    }
  }
}
