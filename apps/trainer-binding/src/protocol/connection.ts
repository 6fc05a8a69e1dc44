import type { Readable, Writable } from "node:stream";
import { TrainerBindingError } from "../errors.js";
import { readLines } from "./lines.js";
import {
  encodeResponse,
  isRejected,
  MAX_LINE_BYTES,
  parseRequest,
  type Request,
  type RequestId,
  type Response,
  type WireError,
} from "./messages.js";

/** What a connection needs from the session behind it. */
export interface RequestHandler {
  /** Answers one request; `end` closes the connection after the response (finalize). */
  handle(request: Request): Promise<{ result: unknown; end?: boolean }>;
  /** The peer went away without finalizing (EOF, broken pipe): drop open saves, keep commits. */
  abandon(): Promise<void>;
}

/** How a connection ended: the client finalized, or it went away first. */
export type ConnectionEnd = "finalized" | "abandoned";

interface CodedError {
  readonly code: string;
  readonly kind?: unknown;
  readonly message: string;
}

function isCoded(error: unknown): error is CodedError {
  return error instanceof Error && typeof (error as { code?: unknown }).code === "string";
}

/**
 * The wire form of a failure. Our own errors are `protocol`; any other coded error (the manager's,
 * the stores' it uses) passes through with its code and kind as `manager`; anything else is an
 * internal fault.
 */
export function toWireError(error: unknown): WireError {
  if (error instanceof TrainerBindingError) {
    return { code: error.code, kind: error.kind, message: error.message, source: "protocol" };
  }
  if (isCoded(error)) {
    const kind = typeof error.kind === "string" ? error.kind : "failed";
    return { code: error.code, kind, message: error.message, source: "manager" };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { code: "INTERNAL", kind: "failed", message: `internal error: ${message}`, source: "protocol" };
}

function failure(id: RequestId | null, error: unknown): Response {
  return { id, ok: false, error: toWireError(error) };
}

async function send(output: Writable, response: Response): Promise<void> {
  if (output.destroyed || output.writableEnded)
    throw new Error("the client's end of the connection is closed");
  const line = encodeResponse(response);
  await new Promise<void>((resolve, reject) => {
    output.write(line, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * Serves one connection: one request at a time, in order, each answered by exactly one response
 * line. Requests may be pipelined; they are still answered in order. Ends at `finalize` or when the
 * input ends or the output breaks, in which case the handler abandons what is open.
 */
export async function serveConnection(
  input: Readable,
  output: Writable,
  handler: RequestHandler,
): Promise<ConnectionEnd> {
  // A broken pipe reaches the write's callback (send rejects) and, later, the stream's 'error'
  // event, which without a listener crashes the process (a trainer SIGKILLed mid-answer). It stays
  // attached: the event may come after this function has returned.
  output.on("error", () => {});
  try {
    for await (const line of readLines(input, MAX_LINE_BYTES)) {
      if ("tooLongBytes" in line) {
        const error = new TrainerBindingError(
          "PROTOCOL_LINE_TOO_LONG",
          `request line of ${line.tooLongBytes} bytes exceeds the ${MAX_LINE_BYTES}-byte limit; it was dropped`,
          { kind: "input" },
        );
        await send(output, failure(null, error));
        continue;
      }
      if (line.text.trim() === "") continue;
      const parsed = parseRequest(line.text);
      if (isRejected(parsed)) {
        await send(output, failure(parsed.id, parsed.error));
        continue;
      }
      let outcome: { result: unknown; end?: boolean };
      try {
        outcome = await handler.handle(parsed);
      } catch (error) {
        await send(output, failure(parsed.id, error));
        continue;
      }
      await send(output, { id: parsed.id, ok: true, result: outcome.result });
      if (outcome.end) return "finalized";
    }
  } catch {
    // A broken pipe or a reset socket: the client is gone, exactly like EOF.
  }
  await handler.abandon();
  return "abandoned";
}
