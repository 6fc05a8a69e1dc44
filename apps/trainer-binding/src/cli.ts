import type { Readable, Writable } from "node:stream";
import type { Argv } from "yargs";
import {
  describeFailure,
  type ExitCodes,
  exitCodesEpilogue,
  failureLines,
  runCommandLine,
} from "@ckpt/command-line";
import { TrainerBindingError } from "./errors.js";
import { PYTHON_CLIENT_DIR, serverVersion } from "./package-files.js";
import { serveData } from "./data/server.js";
import { serveConnection } from "./protocol/connection.js";
import { handleSidecarSignals, serveSocket, sidecarSignalAction } from "./serve.js";
import { SidecarSession } from "./session.js";
import { renderSlurmTemplate } from "./slurm-template.js";

export interface BinIo {
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** Ends the process with `code` (a signal with no trainer session to protect); none in tests. */
  readonly exit?: (code: number) => void;
}

/** What the exit codes of the commands that serve mean beyond the standard ones. */
const SERVE_EXIT_CODES: ExitCodes = {
  1: "failed, refused, or the trainer went away without finalize",
};

/**
 * `ckpt-trainer <command>`: resolves to the exit code (0 ok; 1 failed, refused, or the trainer went
 * away without finalize; 2 bad usage). Never calls process.exit.
 */
export async function runTrainerBin(argv: readonly string[], io: BinIo): Promise<number> {
  let code = 0;
  let help = "";
  const log = (line: string) => io.stderr.write(`[ckpt-trainer] ${line}\n`);
  const register = (parser: Argv) =>
    parser
      .command(
        "serve",
        "Serve one trainer session: line-delimited JSON on stdin/stdout, or on a unix socket",
        (y) =>
          y
            .option("socket", {
              type: "string",
              describe:
                "Listen on this unix socket path instead of stdin/stdout (owner-only; must not exist)",
            })
            .example("ckpt-trainer serve", "spawned by the Python client (Sidecar.spawn) as its child")
            .example(
              "ckpt-trainer serve --socket /tmp/ckpt-$SLURM_JOB_ID.sock &",
              "started by a launcher; the trainer calls Sidecar.connect(path)",
            )
            .epilogue(exitCodesEpilogue(SERVE_EXIT_CODES)),
        async (args) => {
          let session: SidecarSession | undefined;
          let closeSocket: () => Promise<void> = async () => {};
          const release = handleSidecarSignals(
            (signal) => sidecarSignalAction(signal, session?.holdsAttempt ?? false),
            log,
            (exitCode) => {
              closeSocket().then(() => io.exit?.(exitCode));
            },
          );
          const factory = () => {
            session = new SidecarSession({ log, serverVersion: serverVersion() });
            return session;
          };
          try {
            if (args.socket !== undefined) {
              await serveSocket(args.socket, factory, log, (close) => {
                closeSocket = close;
              });
            } else {
              const end = await serveConnection(io.stdin, io.stdout, factory());
              if (end === "abandoned") {
                log("the trainer closed the session without finalize");
                code = 1;
              }
            }
          } finally {
            release();
          }
        },
      )
      .command(
        "data",
        "Serve one rank's DCP bytes to and from the object store (ckpt_dcp's direct writer and reader); ends when stdin closes",
        (y) =>
          y
            .option("socket", {
              type: "string",
              demandOption: true,
              describe: "Listen on this unix socket path (owner-only; must not exist)",
            })
            .option("credentials", {
              type: "string",
              describe: "The store's credentials file (default: the environment's AWS_* variables)",
            })
            .example(
              "ckpt-trainer data --socket /tmp/ckpt-data-$RANK.sock",
              "spawned by each rank (ckpt_dcp.DataProcess.spawn), which holds its stdin",
            )
            .epilogue(exitCodesEpilogue(SERVE_EXIT_CODES)),
        async (args) => {
          // A rank's data server lives as long as its rank holds stdin: a signal is the rank's to act on.
          const release = handleSidecarSignals(
            (signal) => ({
              line: `${signal} received: the data server keeps serving until its rank closes stdin`,
            }),
            log,
            () => {},
          );
          const stdinClosed = new Promise<void>((resolve) => {
            io.stdin
              .on("end", resolve)
              .on("close", resolve)
              .on("error", () => resolve());
            io.stdin.resume();
          });
          try {
            await serveData(args.socket, stdinClosed, {
              log,
              ...(args.credentials === undefined ? {} : { credentials: args.credentials }),
            });
          } finally {
            release();
          }
        },
      )
      .command(
        "slurm-template",
        "Print an sbatch script that turns Slurm's SIGUSR1 warning into an emergency checkpoint",
        (y) =>
          y
            .option("grace-seconds", {
              type: "number",
              default: 600,
              describe:
                "Seconds of warning before the time limit (--signal=B:SIGUSR1@N): one step plus one save",
            })
            .option("launcher", {
              type: "string",
              default: "launch.sh",
              describe: "The script that runs srun ... <training entry>; it runs in the background",
            })
            .option("log-dir", {
              type: "string",
              describe:
                "Directory of the sentinel file, on a file system the containers see (default: one per job window under $SLURM_SUBMIT_DIR/slurm-logs)",
            })
            .option("job-name", { type: "string", default: "ckpt-train" })
            .option("sbatch", {
              type: "string",
              array: true,
              default: [],
              describe: "Further #SBATCH options, e.g. --sbatch=--nodes=4 --sbatch=--time=04:00:00",
            })
            .example("ckpt-trainer slurm-template > job.sbatch", "the default wiring (600 s of warning)")
            .example(
              "ckpt-trainer slurm-template --grace-seconds 900 --launcher ./srun_train.sh --sbatch=--nodes=8",
              "a longer grace for long steps, eight nodes",
            )
            .epilogue(exitCodesEpilogue({ 2: "bad usage, or an option that would break the wiring" })),
        (args) => {
          io.stdout.write(
            renderSlurmTemplate({
              graceSeconds: args["grace-seconds"],
              launcher: args.launcher,
              ...(args["log-dir"] === undefined ? {} : { logDir: args["log-dir"] }),
              jobName: args["job-name"],
              sbatch: args.sbatch.map(String),
            }),
          );
        },
      )
      .command(
        "python-path",
        "Print the directory holding ckpt_trainer_client.py (put it on PYTHONPATH)",
        (y) =>
          y
            .example('PYTHONPATH="$(ckpt-trainer python-path)" python3 train.py', "import the client")
            .epilogue(exitCodesEpilogue()),
        () => {
          io.stdout.write(`${PYTHON_CLIENT_DIR}\n`);
        },
      );
  try {
    help = await runCommandLine(
      argv,
      {
        name: "ckpt-trainer",
        version: serverVersion(),
        summary: "The checkpoint sidecar a training loop drives (docs/trainer-binding.md).",
        width: Math.min(110, (io.stdout as { columns?: number }).columns ?? 110),
        usageError: (message) => new TrainerBindingError("CLI_USAGE", message, { kind: "input" }),
      },
      register,
    );
  } catch (error) {
    const failure = describeFailure(error);
    for (const line of failureLines("ckpt-trainer", failure)) io.stderr.write(`${line}\n`);
    return failure.exitCode;
  }
  if (help !== "") io.stdout.write(help.endsWith("\n") ? help : `${help}\n`);
  return code;
}
