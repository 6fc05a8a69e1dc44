import {
  Agent as HttpAgent,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request as httpRequest,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { Readable } from "node:stream";
import { AWS4, signingTimestamp, signRequest, uriEncode } from "./sigv4.js";

/**
 * The requests an upload is made of (HEAD, PUT of an object or a part), sent as plain signed
 * HTTP on a keep-alive agent instead of through the SDK: the SDK's middleware costs several
 * milliseconds of CPU per request, which for an artifact of hundreds of shards is more than the
 * server's own work. Everything else (conditional creates, GETs, listings, multipart bookkeeping)
 * stays with the SDK. Failures are shaped like SDK errors (`name`, `$metadata.httpStatusCode`),
 * so one mapping (`toStoreError`) reads both.
 */

/** Signing keys; `sessionToken` for temporary credentials. */
export interface WireCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Where a bucket's objects are and how requests to them are signed. */
export interface WireTarget {
  /** The endpoint URL (scheme, host, port, optional base path). */
  readonly endpoint: URL;
  readonly bucket: string;
  /** The bucket is addressed as a host name (`bucket.s3.<region>.amazonaws.com`), not a path segment. */
  readonly virtualHost: boolean;
  readonly region: string;
  readonly credentials: () => Promise<WireCredentials>;
  readonly agent: HttpAgent | HttpsAgent;
  readonly now: () => Date;
}

export interface WireRequest {
  readonly method: "HEAD" | "PUT";
  /** The full object name below the bucket. */
  readonly name: string;
  readonly query?: Readonly<Record<string, string>>;
  /** Extra headers, signed: user metadata (`x-amz-meta-*`), content type. */
  readonly headers?: Readonly<Record<string, string>>;
  /** A PUT's body: bytes, or a stream of exactly `length` bytes (destroyed on failure). */
  readonly body?: Uint8Array | { readonly stream: Readable; readonly length: number };
  readonly signal: AbortSignal;
}

export interface WireResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
}

/** A non-2xx answer, shaped like an SDK service error so the shared error mapping reads it. */
class WireResponseError extends Error {
  override readonly name: string;
  readonly $metadata: { readonly httpStatusCode: number };

  constructor(status: number, code: string) {
    super(`the endpoint answered HTTP ${status} ${code}`);
    this.name = code;
    this.$metadata = { httpStatusCode: status };
  }
}

/** Longest error body read back; S3 error documents are a few hundred bytes. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

/** What a body-less error answer (HEAD) is called, as the SDK names it. */
function codeOfStatus(status: number): string {
  switch (status) {
    case 404:
      return "NotFound";
    case 403:
      return "Forbidden";
    case 412:
      return "PreconditionFailed";
    case 503:
      return "ServiceUnavailable";
    default:
      return status >= 500 ? "InternalError" : `HTTP${status}`;
  }
}

/** A keep-alive agent for the endpoint's scheme, with sockets enough for every transfer in flight. */
export function wireAgent(endpoint: URL): HttpAgent | HttpsAgent {
  const options = { keepAlive: true, maxSockets: 64, scheduling: "lifo" as const };
  return endpoint.protocol === "https:" ? new HttpsAgent(options) : new HttpAgent(options);
}

/** Whether a bucket name can be a DNS label (the SDK's rule for virtual-hosted addressing). */
export function isVirtualHostable(bucket: string): boolean {
  return /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(bucket) && !/^\d+\.\d+\.\d+\.\d+$/.test(bucket);
}

/** The URL and the signed headers of a request. Pure apart from the clock. */
export function signWireRequest(
  target: WireTarget,
  request: Omit<WireRequest, "body" | "signal">,
  credentials: WireCredentials,
  contentLength: number | undefined,
): { url: URL; headers: Record<string, string> } {
  const base = target.endpoint;
  const basePath = base.pathname.replace(/\/+$/, "");
  const host = target.virtualHost ? `${target.bucket}.${base.host}` : base.host;
  const path = target.virtualHost
    ? `${basePath}/${uriEncode(request.name, true)}`
    : `${basePath}/${uriEncode(target.bucket, false)}/${uriEncode(request.name, true)}`;
  const url = new URL(`${base.protocol}//${host}${path}`);
  for (const [k, v] of Object.entries(request.query ?? {})) url.searchParams.set(k, v);
  const timestamp = signingTimestamp(target.now());
  const signed: Record<string, string> = {
    host,
    "x-amz-date": timestamp,
    "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    ...(credentials.sessionToken === undefined ? {} : { "x-amz-security-token": credentials.sessionToken }),
  };
  for (const [name, value] of Object.entries(request.headers ?? {})) signed[name.toLowerCase()] = value;
  const signature = signRequest(
    AWS4,
    {
      method: request.method,
      path,
      ...(request.query === undefined ? {} : { query: request.query }),
      headers: signed,
      payloadHash: "UNSIGNED-PAYLOAD",
    },
    {
      accessKeyId: credentials.accessKeyId,
      secretAccessKey: credentials.secretAccessKey,
      region: target.region,
      service: "s3",
      timestamp,
    },
  );
  return {
    url,
    headers: {
      ...signed,
      ...(contentLength === undefined ? {} : { "content-length": String(contentLength) }),
      authorization: signature.authorization,
    },
  };
}

function errorCodeFromXml(body: string): string | undefined {
  return /<Code>([^<]{1,100})<\/Code>/.exec(body)?.[1];
}

/**
 * Reads a response to its end: resolves with its status and headers when it is 2xx, else
 * rejects with a {@link WireResponseError} named by its error document's `<Code>` (or, without
 * one, by the status).
 */
export function readAnswer(res: IncomingMessage): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    const status = res.statusCode ?? 0;
    const chunks: Buffer[] = [];
    let received = 0;
    res.on("data", (chunk: Buffer) => {
      received += chunk.byteLength;
      if (received <= MAX_ERROR_BODY_BYTES) chunks.push(chunk);
    });
    res.once("error", reject);
    res.once("end", () => {
      if (status >= 200 && status < 300) {
        resolve({ status, headers: res.headers });
        return;
      }
      const code = errorCodeFromXml(Buffer.concat(chunks).toString("utf8")) ?? codeOfStatus(status);
      reject(new WireResponseError(status, code));
    });
  });
}

/**
 * Sends one signed request and resolves with its status and headers once the response has been
 * read to its end. A non-2xx answer rejects with a {@link WireResponseError} named by the error
 * document's `<Code>` (or, without a body, by the status); network failures reject with Node's
 * error (its `code`, e.g. ECONNRESET) and an abort with an `AbortError`. A stream body that fails
 * ends the request short of its Content-Length, so the server cannot complete it.
 */
export async function sendWire(target: WireTarget, request: WireRequest): Promise<WireResponse> {
  const credentials = await target.credentials();
  const body = request.body;
  const length = body === undefined ? undefined : body instanceof Uint8Array ? body.byteLength : body.length;
  const { url, headers } = signWireRequest(
    target,
    request,
    credentials,
    request.method === "PUT" ? (length ?? 0) : undefined,
  );
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise<WireResponse>((resolve, reject) => {
    const req = send(
      url,
      { method: request.method, headers, agent: target.agent, signal: request.signal },
      (res) => readAnswer(res).then(resolve, reject),
    );
    req.once("error", (error) => {
      if (body !== undefined && !(body instanceof Uint8Array)) body.stream.destroy();
      reject(error);
    });
    if (body === undefined || body instanceof Uint8Array) {
      req.end(body);
      return;
    }
    // A failing body (a read error, a digest that does not match) cuts the request.
    body.stream.once("error", (error) => req.destroy(error));
    body.stream.pipe(req);
  });
}

/** User metadata from response headers (`x-amz-meta-*`; GCS's XML API may answer `x-goog-meta-*`). */
export function metadataOf(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== "string") continue;
    const match = /^x-(?:amz|goog)-meta-(.+)$/.exec(name);
    if (match !== null) out[match[1]!] = value;
  }
  return out;
}
