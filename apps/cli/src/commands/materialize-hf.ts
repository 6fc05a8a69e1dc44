import type { MaterializeReport, MaterializeRequest } from "@ckpt/hf-conversion";
import { UsageError } from "../errors.js";
import { createProgress, drainWithProgress } from "../progress.js";
import { formatBytes } from "../render.js";
import { resolveStoreDefaults, withCredentialsOption } from "../store-options.js";
import { lockWaitOption, parseLockWait } from "./lock-wait.js";
import type { CkptCommand } from "./registry.js";

interface MaterializeArgs {
  "artifact-dir"?: string;
  "artifact-uri"?: string;
  base: string;
  out: string;
  "stage-dir"?: string;
  "keep-staged": boolean;
  credentials?: string;
  "expect-tensors"?: number;
  "min-tensors"?: number;
  verify: boolean;
  force: boolean;
  "dry-run": boolean;
  "unified-chat-template": boolean;
  "loader-check"?: string;
  "lock-wait-seconds"?: string;
  quiet: boolean;
  json: boolean;
}

function summary(report: MaterializeReport): string {
  const m = report.marker;
  const shards = m.shards.filter((s) => s.path.endsWith(".safetensors"));
  const bytes = shards.reduce((n, s) => n + s.size, 0);
  const source = `${m.source.source} (sha256 ${m.source.sha256.slice(0, 12)}…)`;
  const head =
    report.action === "skipped"
      ? `skipped ${report.out}: already materialized from ${source}`
      : `${report.action} ${report.out}: ${m.tensor_count} tensors in ${shards.length} shards (${formatBytes(bytes)}) from ${source}`;
  const v = report.verification;
  const verified =
    report.action === "skipped"
      ? []
      : [
          v?.tensorsVerified
            ? `verified: ${v.probedTensors} copied tensors (${formatBytes(v.probedBytes)}) bit for bit, ${v.sampledExpertParts} expert matrices sampled`
            : "tensors not probed (--no-verify); layout, count and sidecars checked",
        ];
  const loaders = report.loaderCheck
    ? [
        `loader check: ${report.loaderCheck.calls.join(", ")} passed with transformers ${report.loaderCheck.transformers_version} (${report.loaderCheck.seconds.toFixed(1)} s)`,
      ]
    : [];
  const staging = report.staging
    ? [`staging ${report.staging.dir}: ${report.staging.removed.length > 0 ? "removed" : "kept"}`]
    : [];
  return [
    head,
    ...verified,
    ...loaders,
    ...report.recovered.map((r) => `recovered: ${r}`),
    ...report.notes.map((n) => `note: ${n}`),
    ...staging,
  ].join("\n");
}

export const materializeHfCommand: CkptCommand<MaterializeArgs> = {
  command: "materialize-hf",
  describe:
    "Convert a consolidated artifact's model.pt into a verified Hugging Face directory laid out like a base (staged, swapped in atomically)",
  builder: (yargs) =>
    withCredentialsOption(
      yargs
        .option("artifact-dir", {
          type: "string",
          // Its earlier name; artifact commit, publish and verify call the directory --artifact-dir.
          alias: "ckpt-dir",
          describe: "A committed checkpoint_artifacts/iter_* directory holding a consolidated model.pt",
        })
        .option("artifact-uri", {
          type: "string",
          describe: "An archived artifact (s3://, gs://, file://); fetched only when a build needs its bytes",
        })
        .option("base", {
          type: "string",
          demandOption: true,
          describe:
            "The Hugging Face base directory: index and shard layout, config.json, tokenizer/processor files",
        })
        .option("out", {
          type: "string",
          demandOption: true,
          describe: "The Hugging Face directory to produce",
        })
        .option("stage-dir", {
          type: "string",
          describe:
            "Where an archived artifact is fetched (default <out>.stage); only what this run created is removed",
        })
        .option("keep-staged", {
          type: "boolean",
          default: false,
          describe: "Keep what this run fetched into the staging directory",
        })
        .option("expect-tensors", {
          type: "number",
          describe: "Exact number of output tensors (default: no exact count)",
        })
        .option("min-tensors", { type: "number", describe: "Fewest output tensors accepted (default 800)" })
        .option("verify", {
          type: "boolean",
          default: true,
          describe:
            "Probe tensors against the source; --no-verify skips only that (layout, count and sidecars are still checked)",
        })
        .option("force", {
          type: "boolean",
          default: false,
          describe:
            "Rebuild over a completed output of another request (or of this one); a leftover <out>.previous goes at the swap",
        })
        .option("dry-run", {
          type: "boolean",
          default: false,
          describe:
            "Decide as a real run would (skip, publish, build, or what --force replaces) and touch nothing: no lock, no staging",
        })
        .option("unified-chat-template", {
          type: "boolean",
          default: false,
          describe:
            "Write the processor's template (canonical form) into both chat_template.json and tokenizer_config.json",
        })
        .option("loader-check", {
          type: "string",
          describe:
            "A Python with transformers: the staged build must load with it (AutoConfig, the architecture's class, AutoTokenizer, AutoProcessor, GenerationConfig) before it is published; the verdict goes into the marker",
        })
        .option("lock-wait-seconds", lockWaitOption("materializer"))
        .example(
          "ckpt materialize-hf --artifact-dir run/20260901120000/checkpoint_artifacts/iter_000000300 --base /models/qwen3-vl-8b --out /teachers/run-a-300",
          "build the teacher directory (skips when it is already there for the same source and base)",
        )
        .example(
          "ckpt materialize-hf --ckpt-dir run/20260901120000/checkpoint_artifacts/iter_000000300 --base /models/qwen3-vl-8b --out /teachers/run-a-300 --force --dry-run",
          "what a forced rebuild would replace, and why; nothing is touched",
        )
        .example(
          "ckpt materialize-hf --artifact-uri s3://bkt/.../checkpoint_artifacts/iter_000000300 --base /models/qwen3-vl-8b --out /teachers/run-a-300 --credentials creds.json --json",
          "from an archive: the identity comes from the remote manifest; payloads are fetched only to build",
        ),
    ),
  abortCode: "MATERIALIZE_ABORTED",
  async run(args, io, { signal, leaves }) {
    const local = args["artifact-dir"];
    const uri = args["artifact-uri"];
    if ((local === undefined) === (uri === undefined)) {
      throw new UsageError("name the source with exactly one of --artifact-dir or --artifact-uri.");
    }
    const lockWaitSeconds = parseLockWait(args["lock-wait-seconds"]);
    const { dryRunMaterializeHf, materializeHfIter } = await import("@ckpt/hf-conversion");
    let source: MaterializeRequest["source"];
    if (uri !== undefined) {
      const { openStore } = await import("@ckpt/object-store");
      const { credentials } = resolveStoreDefaults({ credentials: args.credentials }, io);
      source = {
        kind: "archive",
        uri,
        store: await openStore(uri, credentials === undefined ? {} : { credentials }),
      };
    } else {
      source = { kind: "local", ckptDir: local! };
    }
    const request: MaterializeRequest = {
      source,
      base: args.base,
      out: args.out,
      ...(args["stage-dir"] === undefined ? {} : { stageDir: args["stage-dir"] }),
      keepStaged: args["keep-staged"],
      ...(args["expect-tensors"] === undefined ? {} : { expectTensors: args["expect-tensors"] }),
      ...(args["min-tensors"] === undefined ? {} : { minTensors: args["min-tensors"] }),
      verify: args.verify,
      force: args.force,
      unifiedChatTemplate: args["unified-chat-template"],
      ...(args["loader-check"] === undefined ? {} : { loaderCheck: args["loader-check"] }),
      ...(lockWaitSeconds === undefined ? {} : { lockWaitSeconds }),
      signal,
    };
    if (args["dry-run"]) {
      const would = await dryRunMaterializeHf(request);
      const replacing = would.would_replace.map((w) => `\nwould replace ${w.path}: ${w.reason}`).join("");
      return {
        exitCode: 0,
        report: { ok: true, ...would },
        human: `dry run: nothing was written; would ${would.action} ${would.out} (${would.reason})${replacing}`,
      };
    }
    const quiet = args.quiet || args.json;
    const fetching = createProgress(io, "fetch", { quiet });
    const converting = createProgress(io, "convert", { quiet });
    let waited: string | undefined;
    leaves(
      `${args.out} was not changed (${uri === undefined ? "this run's partial build was removed" : "this run's partial build and what it fetched were removed"}); run the same command again to build it`,
    );
    const report = await drainWithProgress(materializeHfIter(request), [fetching, converting], (event) => {
      if (event.type === "fetch" && event.event.type === "bytes") {
        fetching.update(event.event.doneBytes, event.event.totalBytes, event.event.path);
      } else if (event.type === "convert") {
        fetching.finish();
        converting.update(event.doneBytes, event.totalBytes, event.file);
      } else if (event.type === "lock") {
        waited = event.waitedFor;
      }
    });
    const human =
      waited === undefined ? summary(report) : `${summary(report)}\nwaited for the lock held by ${waited}`;
    return {
      exitCode: 0,
      report: { ok: true, ...report, lockWaitedFor: waited ?? null },
      result: report.out,
      human,
    };
  },
};
