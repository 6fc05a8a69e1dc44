import { execFile } from "node:child_process";
import type { MaterializedMarker } from "@ckpt/manifest";
import { truncateForMessage } from "@ckpt/errors";

/** The loader calls of `--loader-check`, run by the given Python on a directory (its one argument). */
// Offline, with every warning transformers logs recorded: a key it did not expect or could not
// fill fails the model call even when from_pretrained returns (transformers 5's "LOAD REPORT",
// 4.x's sentences; not bare words: config validation logs "unexpected behavior" for defaults no
// checkpoint uses). Prints one JSON line.
const LOADER_CHECK_SCRIPT = `
import json, logging, os, sys, warnings
os.environ["HF_HUB_OFFLINE"] = "1"
out = sys.argv[1]
KEY_WARNINGS = ("load report", "newly initialized", "not initialized from", "were not used when initializing")
calls = []
def done(version):
    print(json.dumps({"transformers_version": version, "calls": calls}))
    sys.exit(0)
try:
    import transformers
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging
except Exception as error:
    calls.append({"call": "import transformers", "ok": False, "detail": f"{type(error).__name__}: {error}"})
    done(None)
class Recorder(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage())
recorder = Recorder()
hf_logging.get_logger("transformers").addHandler(recorder)
def call(name, load):
    recorder.messages.clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value, problems = load()
        messages = recorder.messages + [str(w.message) for w in caught]
        problems = problems + [m for m in messages if any(w in m.lower() for w in KEY_WARNINGS)]
        calls.append({"call": name, "ok": not problems, "detail": "; ".join(problems)[:2000]})
        return value if not problems else None
    except Exception as error:
        calls.append({"call": name, "ok": False, "detail": f"{type(error).__name__}: {error}"[:2000]})
        return None
def model(cls):
    loaded, info = cls.from_pretrained(out, dtype="auto", output_loading_info=True)
    problems = [f"{k}: {', '.join(sorted(map(str, v))[:5])}" for k, v in info.items() if v]
    return loaded, problems
config = call("AutoConfig", lambda: (AutoConfig.from_pretrained(out), []))
if config is not None:
    names = getattr(config, "architectures", None) or []
    cls = getattr(transformers, names[0], None) if names else None
    if cls is None:
        calls.append({"call": "architecture", "ok": False,
                      "detail": f"config.json names architectures {names}, which transformers {transformers.__version__} does not have"})
    else:
        call(names[0], lambda: model(cls))
call("AutoTokenizer", lambda: (AutoTokenizer.from_pretrained(out), []))
if any(os.path.isfile(os.path.join(out, f)) for f in ("processor_config.json", "preprocessor_config.json")):
    call("AutoProcessor", lambda: (AutoProcessor.from_pretrained(out), []))
if os.path.isfile(os.path.join(out, "generation_config.json")):
    call("GenerationConfig", lambda: (GenerationConfig.from_pretrained(out), []))
done(transformers.__version__)
`;

/** The record a passed check leaves in the marker. */
export type LoaderCheckRecord = NonNullable<MaterializedMarker["loader_check"]>;

type LoaderCheckVerdict =
  | { readonly passed: true; readonly record: LoaderCheckRecord }
  /** `problem` names the failed calls with the loader's own messages. */
  | { readonly passed: false; readonly problem: string };

interface CallResult {
  readonly call: string;
  readonly ok: boolean;
  readonly detail?: string;
}

/** What the child's exit and output say about the build. Pure. */
function judgeLoaderCheck(
  python: string,
  exit: {
    readonly code: number | null;
    readonly signal: string | null;
    readonly stdout: string;
    readonly stderr: string;
  },
): LoaderCheckVerdict {
  const tail = (text: string) => truncateForMessage(text.trim().split("\n").slice(-3).join(" | "), 600);
  const last = exit.stdout.trim().split("\n").at(-1) ?? "";
  let parsed: { transformers_version?: unknown; calls?: unknown } | undefined;
  try {
    parsed = JSON.parse(last) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  const calls = Array.isArray(parsed?.calls) ? (parsed.calls as CallResult[]) : undefined;
  if (exit.code !== 0 || calls === undefined) {
    const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with ${exit.code}`;
    return {
      passed: false,
      problem: `${python} ${how}${exit.stderr.trim() === "" ? "" : `: ${tail(exit.stderr)}`}`,
    };
  }
  const failed = calls.filter((c) => !c.ok);
  if (failed.length > 0 || typeof parsed?.transformers_version !== "string") {
    return {
      passed: false,
      problem: failed.map((c) => `${c.call}: ${truncateForMessage(c.detail ?? "failed", 600)}`).join("; "),
    };
  }
  return {
    passed: true,
    record: {
      verdict: "passed",
      python,
      transformers_version: parsed.transformers_version,
      calls: calls.map((c) => c.call),
    },
  };
}

/** Runs the loader calls on `dir` in a child process of `python`; never throws for the loader's failures. */
export function runLoaderCheck(
  python: string,
  dir: string,
  signal?: AbortSignal,
): Promise<LoaderCheckVerdict> {
  return new Promise((resolve, reject) => {
    execFile(
      python,
      ["-c", LOADER_CHECK_SCRIPT, dir],
      {
        maxBuffer: 16 * 1024 * 1024,
        env: { ...process.env, HF_HUB_OFFLINE: "1", PYTHONDONTWRITEBYTECODE: "1" },
        ...(signal === undefined ? {} : { signal }),
      },
      (error, stdout, stderr) => {
        const failure = error as (NodeJS.ErrnoException & { code?: unknown; signal?: string | null }) | null;
        if (failure?.name === "AbortError") return reject(failure);
        if (failure !== null && typeof failure.code === "string") {
          // The interpreter could not be started at all (ENOENT, EACCES).
          return resolve({
            passed: false,
            problem: `${python} cannot be run (${failure.code}: ${failure.message})`,
          });
        }
        resolve(
          judgeLoaderCheck(python, {
            code: failure === null ? 0 : typeof failure.code === "number" ? failure.code : null,
            signal: failure?.signal ?? null,
            stdout,
            stderr,
          }),
        );
      },
    );
  });
}
