import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { UsageError } from "../errors.js";
import type { GcOutcome } from "../gc/apply.js";
import { formatBytes, table } from "../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../store-options.js";
import type { CkptCommand } from "./registry.js";

interface GcArgs {
  target: string;
  apply: boolean;
  "dry-run": boolean;
  "older-than": string;
  credentials?: string;
}

/** Said for a store whose backend has no incomplete uploads to list. */
const NO_UPLOAD_LISTING =
  "gs:// has no incomplete uploads ckpt can list: a GCS resumable session cannot be listed and expires by itself after a week";

/** One row per item, then what was (or would be) freed. */
function renderGc(outcomes: readonly GcOutcome[], dryRun: boolean, note: string | undefined): string {
  const rows = outcomes.map((o) => [
    o.kind,
    o.action,
    formatBytes(o.bytes),
    `${o.age_s} s`,
    o.path,
    o.reason,
  ]);
  const going = outcomes.filter((o) => o.action !== "kept" && o.action !== "failed");
  const bytes = formatBytes(going.reduce((sum, o) => sum + o.bytes, 0));
  const notOurs = outcomes.filter((o) => !o.ours).length;
  const summary =
    (dryRun
      ? `dry run: nothing was changed; --apply would remove ${going.length} (${bytes})`
      : `removed ${going.length} (${bytes} freed)`) +
    `, kept ${outcomes.length - going.length}${notOurs === 0 ? "" : ` (${notOurs} not ours)`}`;
  const listing =
    rows.length === 0
      ? "nothing ckpt left behind here"
      : table(["kind", "action", "size", "age", "path", "reason"], rows, new Set([2, 3]));
  return [listing, ...(note === undefined ? [] : [note]), "", summary].join("\n");
}

export const gcCommand: CkptCommand<GcArgs> = {
  command: "gc <target>",
  interruptLeaves:
    "without --apply nothing was changed; with it, the leftovers removed so far are gone and the rest stay; run the same command again",
  describe:
    "List (then with --apply remove) what ckpt left behind and can prove it made: store temporaries, incomplete uploads and stages, stale .part files, locks of dead holders",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .positional("target", {
          type: "string",
          demandOption: true,
          describe:
            "A directory (a file:// store, a fetch --stage-dir, a run), file:///dir, or s3://bucket/prefix",
        })
        .option("apply", {
          type: "boolean",
          default: false,
          describe: "Remove (abort) what the listing says would go",
        })
        .option("dry-run", {
          type: "boolean",
          default: false,
          describe: "List only (the default without --apply)",
        })
        .option("older-than", {
          type: "string",
          default: "1h",
          describe:
            "Leave anything changed more recently (<n>s|m|h|d): it may be a write, fetch or upload in flight",
        })
        .epilogue(
          "Only what a ckpt marker proves ckpt made can go: a file store temporary's exact name (.ckpt-tmp.<16 hex>), a .staged.json naming the file (an incomplete stage goes whole, its record last; a complete one loses its stale .part files), a lock holding only its holder record whose holder ran on this host and is gone (whatever its age), an S3 multipart upload below the prefix. Everything else stays and is reported (a look-alike as 'not ours'); a lock of a live holder or of another host always stays. gs:// stores have no incomplete uploads to list (GCS resumable sessions expire by themselves).\n\nExit codes: 0 listed or removed, 1 a removal failed (the report names it), 2 bad usage.",
        )
        .example(
          "ckpt gc /shared/archive",
          "list what ckpt left in a file:// store's directory; nothing is changed",
        )
        .example("ckpt gc /shared/archive --apply", "remove it")
        .example(
          "ckpt gc s3://bkt/proj/run --older-than 1d --json",
          "incomplete multipart uploads below the prefix, as JSON",
        )
        .example("ckpt gc s3://bkt/proj/run --apply", "abort them"),
    ),
  async run(args, io) {
    if (args.apply && args["dry-run"])
      throw new UsageError("--apply and --dry-run contradict each other; pass one.");
    const olderThanMs = (await import("../gc/plan.js")).parseAge(args["older-than"]);
    if (olderThanMs === undefined) {
      throw new UsageError(`--older-than ${args["older-than"]}: expected <number><s|m|h|d>, e.g. 30m or 1h.`);
    }
    const [{ decideGc }, { scanDirectory, scanUploads }, { applyGc }, { openStore, parseStoreUri }] =
      await Promise.all([
        import("../gc/plan.js"),
        import("../gc/scan.js"),
        import("../gc/apply.js"),
        import("@ckpt/object-store"),
      ]);
    const remote = args.target.includes("://") ? parseStoreUri(args.target) : undefined;
    const dir =
      remote === undefined ? resolve(args.target) : remote.scheme === "file" ? remote.bucket : undefined;
    let store: Awaited<ReturnType<typeof openStore>> | undefined;
    let note: string | undefined;
    const observations = [];
    if (dir !== undefined) {
      if ((await stat(dir).catch(() => undefined))?.isDirectory() !== true) {
        throw new UsageError(
          `ckpt gc ${args.target}: not a directory. Pass a directory, file:///dir or s3://bucket/prefix.`,
        );
      }
      observations.push(...(await scanDirectory(dir)));
    } else {
      const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
      store = await openStore(args.target, credentials === undefined ? {} : { credentials });
      if (store.listIncompleteUploads === undefined) note = NO_UPLOAD_LISTING;
      observations.push(...(await scanUploads(store)));
    }
    const items = decideGc(observations, { olderThanMs, nowMs: Date.now() });
    const dryRun = !args.apply;
    const outcomes = await applyGc(items, { dryRun, ...(store === undefined ? {} : { store }) });
    const failed = outcomes.some((o) => o.action === "failed");
    const moved = outcomes.filter((o) => o.action !== "kept" && o.action !== "failed");
    const bytes = moved.reduce((sum, o) => sum + o.bytes, 0);
    return {
      exitCode: failed ? 1 : 0,
      report: {
        ok: !failed,
        target: args.target,
        dry_run: dryRun,
        older_than_s: olderThanMs / 1000,
        ...(note === undefined ? {} : { note }),
        items: outcomes,
        ...(dryRun ? { would_free_bytes: bytes } : { freed_bytes: bytes }),
      },
      human: renderGc(outcomes, dryRun, note),
    };
  },
};
