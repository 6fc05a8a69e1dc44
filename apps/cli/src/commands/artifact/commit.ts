import { CHECKPOINT_FORMATS, type CheckpointFormat, type LogicalComponent } from "@ckpt/manifest";
import { UsageError } from "../../errors.js";
import { createProgress, drainWithProgress } from "../../progress.js";
import { formatBytes } from "../../render.js";
import type { CkptCommand } from "../registry.js";

interface CommitArgs {
  artifactDir?: string;
  iteration?: number;
  format: CheckpointFormat;
  components?: string;
}

export const commitCommand: CkptCommand<CommitArgs> = {
  // The directory as a positional or as --artifact-dir, the name publish and verify give it.
  command: "commit [artifact-dir]",
  interruptLeaves:
    "the artifact is committed only if its manifest, written last and atomically, is there; run the same command again (a committed artifact is refused as such)",
  describe: "Describe an artifact's written payloads and commit its manifest last",
  builder: (yargs) =>
    yargs
      .positional("artifact-dir", {
        type: "string",
        describe: "The checkpoint_artifacts/iter_* directory whose payloads are written (or --artifact-dir)",
      })
      .option("iteration", { type: "number", describe: "Must match the directory name when given" })
      .option("format", {
        choices: CHECKPOINT_FORMATS,
        default: "consolidated" as CheckpointFormat,
        describe: "consolidated (model.pt, ...) or dcp (model/, optim/ shard directories)",
      })
      .option("components", {
        type: "string",
        describe:
          "Logical plan, comma-separated: model,optimizer,training_state (default: all three; optim means optimizer)",
      })
      .example(
        "ckpt artifact commit run/20260901120000/checkpoint_artifacts/iter_000000300 --components model",
        "commit a model-only artifact",
      )
      .example(
        "ckpt artifact commit run/ts/checkpoint_artifacts/iter_000000100 --format dcp --components model,training_state --json",
        "commit DCP shards and trainer state, report as JSON",
      ),
  async run(args, io) {
    const dir = args.artifactDir;
    if (dir === undefined) {
      throw new UsageError(
        "name the artifact directory: ckpt artifact commit <artifact-dir> (or --artifact-dir).",
      );
    }
    const { commitArtifactIter } = await import("@ckpt/archive-publisher");
    if (args.iteration !== undefined && (!Number.isSafeInteger(args.iteration) || args.iteration < 0)) {
      throw new UsageError(`--iteration ${args.iteration} is not a non-negative integer.`);
    }
    // Names are checked by the library (COMMIT_BAD_COMPONENTS, exit 2).
    const components = args.components?.split(",").map((c) => c.trim());
    const progress = createProgress(io, "hash", { quiet: args.quiet || args.json });
    const committed = await drainWithProgress(
      commitArtifactIter(dir, {
        format: args.format,
        ...(args.iteration === undefined ? {} : { iteration: args.iteration }),
        ...(components === undefined ? {} : { components: components as LogicalComponent[] }),
      }),
      [progress],
      (event) => {
        if (event.type === "hash") progress.update(event.doneBytes, event.totalBytes, event.path);
      },
    );
    const names = committed.manifest.physical_components.map((c) => c.path).join(", ");
    const ignored =
      committed.ignored.length > 0 ? `\nnot part of the plan, left out: ${committed.ignored.join(", ")}` : "";
    return {
      exitCode: 0,
      report: { ok: true, ...committed },
      result: dir,
      human: `committed ${committed.manifestPath}: ${names} (${formatBytes(committed.bytes)})${ignored}`,
    };
  },
};
