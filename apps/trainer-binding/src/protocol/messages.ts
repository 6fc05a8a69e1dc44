import { pathProblem } from "@ckpt/manifest";
import { z } from "zod";
import { type BindingErrorCode, TrainerBindingError } from "../errors.js";

/** The protocol versions this sidecar speaks; `hello` picks the highest one the client offers too. */
export const PROTOCOL_VERSIONS: readonly number[] = [1];

/**
 * The longest request line accepted. A request is a few hundred bytes; the largest, `open`, carries
 * a config of a few KiB. 1 MiB leaves room for any real config and bounds a runaway writer.
 */
export const MAX_LINE_BYTES = 1 << 20;

/** Request ids are echoed verbatim: an integer or a short string chosen by the client. */
const requestId = z.union([
  z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  z.string().min(1).max(64),
]);
export type RequestId = z.infer<typeof requestId>;

const envelopeSchema = z.strictObject({
  id: requestId,
  op: z.string().min(1).max(64),
  args: z.record(z.string(), z.unknown()).optional(),
});

const pathText = z.string().min(1).max(4096);
const nameText = z.string().min(1).max(255);

/** A zod issue that carries the binding code to refuse with (instead of PROTOCOL_BAD_REQUEST). */
function codedIssue(ctx: z.RefinementCtx, code: BindingErrorCode, message: string): void {
  ctx.addIssue({ code: "custom", message, params: { bindingCode: code } });
}

/**
 * One file the trainer wrote and hashed while writing it (ckpt_dcp's writer): its path relative
 * to the save directory, POSIX, staying below it; checked here so a hostile path is refused before
 * the manager touches anything.
 */
const inventoryEntry = z.strictObject({
  path: z.string().superRefine((path, ctx) => {
    const problem = pathProblem(path);
    if (problem !== undefined) {
      codedIssue(
        ctx,
        "INVENTORY_UNSAFE_PATH",
        `${JSON.stringify(path.slice(0, 200))}: ${problem.reason} (${problem.code})`,
      );
    }
  }),
  size: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, "64 lower-case hex digits"),
});

/** At most one entry per path: two digests for one file cannot both be right. */
const inventory = z
  .array(inventoryEntry)
  .max(1 << 16)
  .superRefine((entries, ctx) => {
    const seen = new Set<string>();
    for (const { path } of entries) {
      if (seen.has(path))
        codedIssue(ctx, "INVENTORY_DUPLICATE_PATH", `${JSON.stringify(path)} is listed twice`);
      seen.add(path);
    }
  });

/**
 * The arguments of every op of protocol v1. Objects are strict: an unknown field is refused
 * rather than ignored, so a misspelled option never silently does nothing.
 */
const OP_ARGS = {
  hello: z.strictObject({
    protocol: z.array(z.number().int().positive()).min(1).max(16),
    client: z.string().max(200).optional(),
  }),
  open: z
    .strictObject({
      config: z.record(z.string(), z.unknown()).default({}),
      output_root: pathText,
      project: nameText,
      group: nameText,
      name: nameText,
      run_ts: z.string().max(64).optional(),
      rank: z
        .number()
        .int()
        .nonnegative()
        .max(1 << 20)
        .default(0),
      world_size: z
        .number()
        .int()
        .positive()
        .max(1 << 20)
        .default(1),
      credentials: pathText.optional(),
    })
    .refine((a) => a.rank < a.world_size, {
      message: "rank must be smaller than world_size",
      path: ["rank"],
    }),
  resume: z.strictObject({}),
  begin_save: z.strictObject({
    step: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    /** Omitted: the manager's save_every decides; given: the loop's own cadence counter decided. */
    cadence: z.boolean().optional(),
    final: z.boolean().default(false),
    validation: z.boolean().default(false),
    emergency: z.boolean().default(false),
  }),
  commit: z.strictObject({ save_id: z.string().min(1).max(128), inventory: inventory.optional() }),
  complete_validation: z.strictObject({
    iteration: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  }),
  should_stop: z.strictObject({
    signals: z
      .array(z.enum(["SIGUSR1", "SIGTERM"]))
      .max(2)
      .default([]),
  }),
  finalize: z.strictObject({}),
} as const;

export type OpName = keyof typeof OP_ARGS;
export const OP_NAMES = Object.keys(OP_ARGS) as OpName[];
export type OpArgs<O extends OpName> = z.output<(typeof OP_ARGS)[O]>;

/** One parsed, validated request. */
export type Request = { [O in OpName]: { id: RequestId; op: O; args: OpArgs<O> } }[OpName];

/** A request line that could not be turned into a Request, with the id to answer when one was readable. */
export interface RejectedLine {
  readonly id: RequestId | null;
  readonly error: TrainerBindingError;
}

function describeIssues(error: z.ZodError, where: string): string {
  const issues = error.issues.slice(0, 5).map((i) => {
    const path = i.path.length === 0 ? where : `${where}.${i.path.join(".")}`;
    return `${path}: ${i.message}`;
  });
  return issues.join("; ");
}

/** The binding code a coded issue asks for, when one of the issues is coded. */
function issueCode(error: z.ZodError): BindingErrorCode | undefined {
  for (const issue of error.issues) {
    const code =
      issue.code === "custom"
        ? (issue.params as { bindingCode?: BindingErrorCode } | undefined)?.bindingCode
        : undefined;
    if (code !== undefined) return code;
  }
  return undefined;
}

function isOpName(op: string): op is OpName {
  return Object.hasOwn(OP_ARGS, op);
}

/** Parses and validates one request line (without its newline). */
export function parseRequest(line: string): Request | RejectedLine {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch (error) {
    const shown = line.length > 80 ? `${line.slice(0, 80)}...` : line;
    return {
      id: null,
      error: new TrainerBindingError("PROTOCOL_PARSE", `request is not JSON (${shown}): ${String(error)}`, {
        kind: "input",
      }),
    };
  }
  const idOnly = requestId.safeParse((raw as { id?: unknown } | null)?.id);
  const id = idOnly.success ? idOnly.data : null;
  const envelope = envelopeSchema.safeParse(raw);
  if (!envelope.success) {
    return {
      id,
      error: new TrainerBindingError(
        "PROTOCOL_BAD_REQUEST",
        `malformed request: ${describeIssues(envelope.error, "request")}. Expected {"id": ..., "op": ..., "args": {...}}`,
        { kind: "input" },
      ),
    };
  }
  const { op } = envelope.data;
  if (!isOpName(op)) {
    return {
      id,
      error: new TrainerBindingError(
        "PROTOCOL_UNKNOWN_OP",
        `unknown op ${JSON.stringify(op)}; protocol v1 ops are ${OP_NAMES.join(", ")}`,
        { kind: "input" },
      ),
    };
  }
  const args = OP_ARGS[op].safeParse(envelope.data.args ?? {});
  if (!args.success) {
    return {
      id,
      error: new TrainerBindingError(
        issueCode(args.error) ?? "PROTOCOL_BAD_REQUEST",
        `bad arguments for ${op}: ${describeIssues(args.error, "args")}`,
        { kind: "input" },
      ),
    };
  }
  return { id: envelope.data.id, op, args: args.data } as Request;
}

export function isRejected(parsed: Request | RejectedLine): parsed is RejectedLine {
  return "error" in parsed;
}

/** The error object of a failed response. `source` says whether the sidecar or the manager refused. */
export interface WireError {
  readonly code: string;
  readonly kind: string;
  readonly message: string;
  readonly source: "protocol" | "manager";
}

export type Response =
  | { readonly id: RequestId; readonly ok: true; readonly result: unknown }
  | { readonly id: RequestId | null; readonly ok: false; readonly error: WireError };

/** One response line, newline included. */
export function encodeResponse(response: Response): string {
  return `${JSON.stringify(response)}\n`;
}

/**
 * The version both sides speak: the highest of the client's offer this sidecar supports. Refuses
 * with the supported list when there is none, so an old sidecar tells a new client what it can do.
 */
export function negotiateVersion(offered: readonly number[]): number {
  const common = offered.filter((v) => PROTOCOL_VERSIONS.includes(v));
  if (common.length === 0) {
    throw new TrainerBindingError(
      "PROTOCOL_VERSION",
      `no common protocol version: the client offers ${offered.join(", ")}, this sidecar speaks ${PROTOCOL_VERSIONS.join(", ")}. Use a client and a ckpt-trainer of matching releases`,
      { kind: "input" },
    );
  }
  return Math.max(...common);
}
