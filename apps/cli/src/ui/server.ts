// `ckpt ui`'s HTTP server: the page's three static files and JSON endpoints that answer from the
// evidence model, read-only, on the loopback interface only. A request names a path inside the
// served root (resolved by the MCP server's guard); anything else is refused before a file is read.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { buildEvidence, explainProblem } from "@ckpt/evidence";
import { describeFailure } from "@ckpt/command-line";
import { type GuardedRoot, resolveInsideRoot } from "../mcp/path-guard.js";
import { type RetentionKnobs, retentionOutlook } from "./retention-outlook.js";
import type { UiAssets } from "./assets.js";

/** The interface the server listens on; no other is ever bound. */
export const UI_HOST = "127.0.0.1";

export interface UiServerOptions {
  /** Bound on one request's evidence collection (buildEvidence's timeoutMs). */
  readonly timeoutMs: number;
  /** Entries read from one directory (buildEvidence's maxEntries). */
  readonly maxEntries: number;
}

/**
 * Headers on every answer: the page loads only its own files (no inline script, nothing external),
 * is never framed, sniffed, cached or sent as a referrer.
 */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "cache-control": "no-store",
} as const;

const VERIFY_CHOICES = ["none", "newest", "all"] as const;
const MAX_KNOB = 1_000_000;

type Answer = { readonly status: number; readonly body: unknown };

/** The codes the server answers a refused request with (the guard's and CLI_USAGE besides). */
type UiAnswerCode = "UI_METHOD_REFUSED" | "UI_HOST_REFUSED" | "UI_NOT_FOUND" | "UI_UNKNOWN_PROBLEM";

/**
 * Why a request is refused before it is routed, or undefined: only GET (and HEAD), and only with
 * a Host header naming this server on the loopback address, so a page elsewhere that rebinds its
 * DNS name to 127.0.0.1 cannot read the answers. Pure.
 */
export function requestRefusal(
  method: string | undefined,
  host: string | undefined,
  port: number,
): Answer | undefined {
  if (method !== "GET" && method !== "HEAD")
    return refusal(405, "UI_METHOD_REFUSED", `${method}: the web view is read-only; only GET is answered`);
  const allowed = [`${UI_HOST}:${port}`, `localhost:${port}`];
  if (host === undefined || !allowed.includes(host.toLowerCase()))
    return refusal(
      421,
      "UI_HOST_REFUSED",
      `Host ${JSON.stringify(host ?? "")} refused: open the page as http://${UI_HOST}:${port}/ (a DNS name pointing here is not answered)`,
    );
  return undefined;
}

function refusal(status: number, code: UiAnswerCode | "CLI_USAGE", message: string): Answer {
  return { status, body: { ok: false, error: { code, message } } };
}

/** A whole number in 0..MAX_KNOB from a query parameter, the default when absent; undefined when malformed. Pure. */
function knob(value: string | null, fallback: number): number | undefined {
  if (value === null || value === "") return fallback;
  if (!/^\d{1,7}$/.test(value)) return undefined;
  const n = Number(value);
  return n <= MAX_KNOB ? n : undefined;
}

/** The retention knobs a query names (`keep_model_last`, `keep_optim_last`, `upload=1`), or why not. Pure. */
export function knobsOf(query: URLSearchParams): RetentionKnobs | string {
  const keepModel = knob(query.get("keep_model_last"), 0);
  const keepOptim = knob(query.get("keep_optim_last"), 0);
  if (keepModel === undefined || keepOptim === undefined)
    return `keep_model_last and keep_optim_last are whole numbers from 0 to ${MAX_KNOB}`;
  const upload = query.get("upload") ?? "0";
  if (upload !== "0" && upload !== "1") return "upload is 0 or 1";
  return { keep_model_last: keepModel, keep_optim_last: keepOptim, upload: upload === "1" };
}

/** The coded error a request failed with, as its JSON answer (a path refusal is the client's fault). */
function failure(error: unknown): Answer {
  const described = describeFailure(error);
  const status = described.code === "MCP_PATH_NOT_FOUND" ? 404 : described.exitCode === 2 ? 400 : 500;
  return { status, body: { ok: false, error: { code: described.code, message: described.message } } };
}

async function api(url: URL, guarded: GuardedRoot, options: UiServerOptions): Promise<Answer | undefined> {
  const evidenceOf = async (verify: (typeof VERIFY_CHOICES)[number]) =>
    buildEvidence(await resolveInsideRoot(guarded, url.searchParams.get("path") ?? "."), {
      verify,
      maxEntries: options.maxEntries,
      timeoutMs: options.timeoutMs,
    });
  switch (url.pathname) {
    case "/api/root":
      return { status: 200, body: { ok: true, root: guarded.root } };
    case "/api/evidence": {
      const verify = url.searchParams.get("verify") ?? "none";
      if (!(VERIFY_CHOICES as readonly string[]).includes(verify))
        return refusal(400, "CLI_USAGE", `verify=${verify}: expected one of ${VERIFY_CHOICES.join(", ")}`);
      return { status: 200, body: await evidenceOf(verify as (typeof VERIFY_CHOICES)[number]) };
    }
    case "/api/retention": {
      const knobs = knobsOf(url.searchParams);
      if (typeof knobs === "string") return refusal(400, "CLI_USAGE", knobs);
      const bundle = await evidenceOf("none");
      const attempt = bundle.attempts.at(-1);
      return {
        status: 200,
        body: {
          ok: true,
          attempt: attempt?.dir ?? null,
          outlook: attempt === undefined ? null : retentionOutlook(attempt, knobs),
          problems: bundle.problems,
        },
      };
    }
    case "/api/explain": {
      const code = url.searchParams.get("code") ?? "";
      const entry = explainProblem(code);
      return entry === undefined
        ? refusal(404, "UI_UNKNOWN_PROBLEM", `${JSON.stringify(code)} is not an evidence problem code`)
        : { status: 200, body: { ok: true, ...entry } };
    }
    default:
      return undefined;
  }
}

function send(
  response: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  head: boolean,
): void {
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": type,
    "content-length": Buffer.byteLength(body),
  });
  response.end(head ? undefined : body);
}

/** The page's server for `guarded`; the caller listens (on UI_HOST) and closes it. */
export function createUiServer(guarded: GuardedRoot, assets: UiAssets, options: UiServerOptions): Server {
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const port = (server.address() as { port: number } | null)?.port ?? 0;
    const head = request.method === "HEAD";
    const json = (answer: Answer) =>
      send(response, answer.status, "application/json; charset=utf-8", JSON.stringify(answer.body), head);
    const refused = requestRefusal(request.method, request.headers.host, port);
    if (refused !== undefined) {
      response.setHeader("allow", "GET, HEAD");
      json(refused);
      return;
    }
    const url = new URL(request.url ?? "/", `http://${UI_HOST}:${port}`);
    const asset = assets.files.get(url.pathname === "/" ? "/index.html" : url.pathname);
    if (asset !== undefined) {
      send(response, 200, asset.type, asset.body, head);
      return;
    }
    try {
      const answer = await api(url, guarded, options);
      json(answer ?? refusal(404, "UI_NOT_FOUND", `${url.pathname}: no such page or endpoint`));
    } catch (error) {
      json(failure(error));
    }
  });
  // A client that never finishes its request does not hold a connection for long.
  server.requestTimeout = options.timeoutMs + 5_000;
  server.headersTimeout = 10_000;
  return server;
}
