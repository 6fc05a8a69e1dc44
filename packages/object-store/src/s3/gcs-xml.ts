import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { GOOG4, sha256Hex, signingTimestamp, signRequest, uriEncode } from "./sigv4.js";
import { readAnswer } from "./wire.js";

/** What the GCS XML conditional PUT needs; the secret never leaves this module's signing step. */
export interface GcsXmlPutInput {
  /** `https://storage.googleapis.com` or a configured GCS-compatible endpoint. */
  readonly endpoint: string;
  readonly bucket: string;
  /** Full object name (store prefix included). */
  readonly key: string;
  readonly body: Uint8Array;
  readonly contentType?: string;
  /** User metadata, sent as `x-goog-meta-<name>`. */
  readonly metadata: Readonly<Record<string, string>>;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** Signing region; GCS accepts `auto`. */
  readonly region: string;
  readonly now: Date;
  readonly signal?: AbortSignal;
}

export interface GcsXmlPutResult {
  readonly etag?: string;
  readonly generation?: string;
}

/** The request headers (signed, Authorization included) for a create-once XML PUT. */
export function buildGcsConditionalPut(input: GcsXmlPutInput): {
  url: URL;
  headers: Record<string, string>;
} {
  const base = new URL(input.endpoint);
  const basePath = base.pathname.replace(/\/+$/, "");
  const path = `${basePath}/${uriEncode(input.bucket, false)}/${uriEncode(input.key, true)}`;
  const url = new URL(path, base);
  const timestamp = signingTimestamp(input.now);
  const payloadHash = sha256Hex(input.body);
  const signed: Record<string, string> = {
    host: url.host,
    "x-goog-date": timestamp,
    "x-goog-content-sha256": payloadHash,
    "x-goog-if-generation-match": "0",
  };
  if (input.contentType !== undefined) signed["content-type"] = input.contentType;
  for (const [name, value] of Object.entries(input.metadata))
    signed[`x-goog-meta-${name.toLowerCase()}`] = value;
  const signature = signRequest(
    GOOG4,
    { method: "PUT", path, headers: signed, payloadHash },
    {
      accessKeyId: input.credentials.accessKeyId,
      secretAccessKey: input.credentials.secretAccessKey,
      region: input.region,
      service: "storage",
      timestamp,
    },
  );
  return {
    url,
    headers: {
      ...signed,
      "content-length": String(input.body.byteLength),
      authorization: signature.authorization,
    },
  };
}

/**
 * PUT `key` only if no live generation exists (`x-goog-if-generation-match: 0`), signed with
 * GOOG4-HMAC-SHA256. GCS rejects that header inside an AWS4-signed request, so this is a separate
 * request instead of an SDK command.
 */
export function gcsConditionalPut(input: GcsXmlPutInput): Promise<GcsXmlPutResult> {
  const { url, headers } = buildGcsConditionalPut(input);
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, { method: "PUT", headers, signal: input.signal }, (res) =>
      readAnswer(res).then((answer) => {
        const etag = answer.headers.etag;
        const generation = answer.headers["x-goog-generation"];
        resolve({
          ...(typeof etag === "string" ? { etag } : {}),
          ...(typeof generation === "string" ? { generation } : {}),
        });
      }, reject),
    );
    req.on("error", reject);
    req.end(input.body);
  });
}
