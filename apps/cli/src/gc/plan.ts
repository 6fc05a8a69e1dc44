import { ownedStagePaths } from "@ckpt/archive-reader";
import { type LockHolder, type LockHolderState, STAGED_RECORD, type StagedRecord } from "@ckpt/manifest";
import type { IncompleteUpload } from "@ckpt/object-store";

// What `ckpt gc` found, and the pure decision of what goes and why. The scan (./scan.ts) observes,
// the executor (./apply.ts) acts on exactly what this decided.

/** A file or directory seen, with its size in bytes and its last change (ms since the epoch). */
export interface SeenEntry {
  readonly bytes: number;
  readonly mtimeMs: number;
  readonly regular: boolean;
}

/** What the scan observed; nothing is judged yet. */
export type GcObservation =
  /** A file named like a file store's temporary (`.ckpt-tmp.` prefix). */
  | {
      readonly type: "temporary";
      readonly path: string;
      readonly exactName: boolean;
      readonly entry: SeenEntry;
    }
  /** A directory holding a `.staged.json`: its ownership (the record when it parses) and its files. */
  | {
      readonly type: "stage";
      readonly dir: string;
      readonly record: StagedRecord | undefined;
      readonly notOurs?: string;
      readonly recordEntry: SeenEntry;
      /** Every other file below it, by path relative to `dir`. */
      readonly entries: ReadonlyMap<string, SeenEntry>;
    }
  /** A `.part` file outside any stage. */
  | { readonly type: "part"; readonly path: string; readonly entry: SeenEntry }
  /** A directory named `*.lock`: its holder, where that holder stands, and whether it holds only the record. */
  | {
      readonly type: "lock";
      readonly path: string;
      readonly holder: LockHolder | undefined;
      readonly state: LockHolderState;
      readonly onlyRecord: boolean;
      readonly mtimeMs: number;
    }
  | { readonly type: "upload"; readonly uri: string; readonly upload: IncompleteUpload };

export type GcKind = "temporary" | "incomplete-stage" | "stale-part" | "lock" | "incomplete-upload";

/** One decided item: `remove`/`abort` are ckpt's own leftovers, `keep` says why not. */
export interface GcItem {
  readonly kind: GcKind;
  /** Local path, or `<store-uri>/<key>` for an upload. */
  readonly path: string;
  readonly bytes: number;
  readonly age_s: number;
  /** Whether a ckpt marker (exact name, record, holder) proves ckpt made it. */
  readonly ours: boolean;
  readonly action: "remove" | "abort" | "keep";
  readonly reason: string;
  /** Stage only: the files its record names that are removed, record last. */
  readonly files?: readonly string[];
  /** Upload only. */
  readonly upload?: IncompleteUpload;
}

export interface GcPolicy {
  /** Leftovers younger than this may be work in flight and stay. */
  readonly olderThanMs: number;
  readonly nowMs: number;
}

/** `90 s`, `12 min`, `3.0 h`, `2.0 d`. Pure. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

/** Parses `--older-than`: `<number><s|m|h|d>` (e.g. `30m`, `1h`, `0s`). Undefined when malformed. Pure. */
export function parseAge(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(text.trim());
  if (match === null) return undefined;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as "s" | "m" | "h" | "d"];
  return Number(match[1]) * unit;
}

function young(ageMs: number, policy: GcPolicy): string | undefined {
  return ageMs < policy.olderThanMs
    ? `changed ${formatAge(ageMs)} ago, younger than --older-than ${formatAge(policy.olderThanMs)}: may be work in flight`
    : undefined;
}

type ItemBase = Omit<GcItem, "action" | "reason" | "age_s" | "ours"> & { readonly ageMs: number };

function decided(base: ItemBase, ours: boolean, action: GcItem["action"], reason: string): GcItem {
  const { ageMs, ...rest } = base;
  return { ...rest, age_s: Math.max(0, Math.round(ageMs / 1000)), ours, action, reason };
}

/** Ours: goes with `reason`, unless younger than the policy's age. */
function ours(base: ItemBase, policy: GcPolicy, action: "remove" | "abort", reason: string): GcItem {
  const wait = young(base.ageMs, policy);
  return wait === undefined ? decided(base, true, action, reason) : decided(base, true, "keep", wait);
}

function notOurs(base: ItemBase, why: string): GcItem {
  return decided(base, false, "keep", `not ours: ${why}`);
}

function decideStage(o: Extract<GcObservation, { type: "stage" }>, policy: GcPolicy): GcItem[] {
  const join = (rel: string) => `${o.dir}/${rel}`;
  const recordAge = policy.nowMs - o.recordEntry.mtimeMs;
  if (o.record === undefined) {
    return [
      notOurs(
        { kind: "incomplete-stage", path: o.dir, bytes: 0, ageMs: recordAge },
        o.notOurs ?? "its staging record is not ckpt's",
      ),
    ];
  }
  const owned = ownedStagePaths(o.record);
  const items: GcItem[] = [];
  const foreign = [...o.entries].filter(([rel]) => !owned.has(rel));
  if (!o.record.complete) {
    const present = [...o.entries].filter(([rel]) => owned.has(rel));
    const newest = Math.max(o.recordEntry.mtimeMs, ...present.map(([, e]) => e.mtimeMs));
    const bytes = present.reduce((sum, [, e]) => sum + e.bytes, o.recordEntry.bytes);
    const files = [...present.map(([rel]) => rel).sort(), STAGED_RECORD.fileName];
    items.push(
      ours(
        { kind: "incomplete-stage", path: o.dir, bytes, ageMs: policy.nowMs - newest, files },
        policy,
        "remove",
        `an unfinished fetch of ${o.record.source.uri} (.staged.json says incomplete): the ${files.length} files it names go, record last`,
      ),
    );
    for (const [rel, e] of foreign.sort(([a], [b]) => a.localeCompare(b))) {
      items.push(
        notOurs(
          { kind: "incomplete-stage", path: join(rel), bytes: e.bytes, ageMs: policy.nowMs - e.mtimeMs },
          "its .staged.json does not name it",
        ),
      );
    }
    return items;
  }
  for (const [rel, e] of [...o.entries].sort(([a], [b]) => a.localeCompare(b))) {
    if (!rel.endsWith(".part")) continue;
    const base = {
      kind: "stale-part" as const,
      path: join(rel),
      bytes: e.bytes,
      ageMs: policy.nowMs - e.mtimeMs,
    };
    items.push(
      owned.has(rel)
        ? ours(
            base,
            policy,
            "remove",
            "a download's partial file in a complete stage (.staged.json names its file)",
          )
        : notOurs(base, "its .staged.json does not name it"),
    );
  }
  return items;
}

function decideLock(o: Extract<GcObservation, { type: "lock" }>, policy: GcPolicy): GcItem {
  const base = { kind: "lock" as const, path: o.path, bytes: 0, ageMs: policy.nowMs - o.mtimeMs };
  if (!o.onlyRecord) return notOurs(base, "the directory holds files a ckpt lock does not write");
  const holder = `pid ${o.holder?.pid} on host ${o.holder?.host}`;
  switch (o.state) {
    case "unnamed":
      return decided(
        base,
        true,
        "keep",
        "the lock names no holder yet (being taken); it is left to its taker",
      );
    case "other-host":
      return decided(base, true, "keep", `held by ${holder}: its liveness cannot be checked from this host`);
    case "live":
      return decided(base, true, "keep", `held by ${holder}, which is running`);
    case "dead":
      // A holder known dead is proof enough whatever the age: the lock's next taker would clear it too.
      return decided(base, true, "remove", `its holder ${holder} (this host) is gone`);
  }
}

/**
 * Decides, for everything the scan saw, what goes and why. Only what a ckpt marker proves ckpt
 * made can go (the exact temporary name, a staging record naming the file, a lock holding only
 * its holder record); of that, only what is older than the policy's age, except a lock whose
 * holder is known dead. Everything else is kept with its reason. Pure.
 */
export function decideGc(observations: readonly GcObservation[], policy: GcPolicy): GcItem[] {
  const items: GcItem[] = [];
  for (const o of observations) {
    switch (o.type) {
      case "temporary": {
        const base = {
          kind: "temporary" as const,
          path: o.path,
          bytes: o.entry.bytes,
          ageMs: policy.nowMs - o.entry.mtimeMs,
        };
        if (!o.exactName)
          items.push(notOurs(base, "a file store names its temporaries .ckpt-tmp.<16 hex digits>"));
        else if (!o.entry.regular) items.push(notOurs(base, "not a regular file"));
        else
          items.push(ours(base, policy, "remove", "a file store's temporary left by an interrupted write"));
        break;
      }
      case "stage":
        items.push(...decideStage(o, policy));
        break;
      case "part":
        items.push(
          notOurs(
            { kind: "stale-part", path: o.path, bytes: o.entry.bytes, ageMs: policy.nowMs - o.entry.mtimeMs },
            "no .staged.json names it (a store download's .part carries no marker)",
          ),
        );
        break;
      case "lock":
        items.push(decideLock(o, policy));
        break;
      case "upload": {
        const { upload } = o;
        const ageMs =
          upload.initiated === undefined ? policy.olderThanMs : policy.nowMs - upload.initiated.getTime();
        items.push(
          ours(
            { kind: "incomplete-upload", path: `${o.uri}/${upload.key}`, bytes: upload.bytes, ageMs, upload },
            policy,
            "abort",
            "a multipart upload under the prefix never completed nor aborted: its parts are billed storage",
          ),
        );
        break;
      }
    }
  }
  return items;
}
