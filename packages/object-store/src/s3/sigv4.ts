import { createHash, createHmac } from "node:crypto";

/**
 * The names that distinguish Google's GOOG4-HMAC-SHA256 from AWS Signature Version 4. The
 * algorithm is the same; only these strings differ.
 */
export interface SigningScheme {
  /** `GOOG4-HMAC-SHA256` or `AWS4-HMAC-SHA256`. */
  readonly algorithm: string;
  /** Prefix of the secret in the first HMAC key: `GOOG4` or `AWS4`. */
  readonly keyPrefix: string;
  /** Last element of the credential scope: `goog4_request` or `aws4_request`. */
  readonly terminator: string;
  /** Header carrying the request time: `x-goog-date` or `x-amz-date`. */
  readonly dateHeader: string;
}

export const GOOG4: SigningScheme = {
  algorithm: "GOOG4-HMAC-SHA256",
  keyPrefix: "GOOG4",
  terminator: "goog4_request",
  dateHeader: "x-goog-date",
};

export const AWS4: SigningScheme = {
  algorithm: "AWS4-HMAC-SHA256",
  keyPrefix: "AWS4",
  terminator: "aws4_request",
  dateHeader: "x-amz-date",
};

export interface SignableRequest {
  readonly method: string;
  /** Already URI-encoded path, e.g. `/bucket/a%20b/c.json`. */
  readonly path: string;
  /** Query parameters (unencoded); sorted and encoded by the signer. */
  readonly query?: Readonly<Record<string, string>>;
  /** Headers to sign (names in any case); `host` and the scheme's date header must be present. */
  readonly headers: Readonly<Record<string, string>>;
  /** Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`. */
  readonly payloadHash: string;
}

export interface SigningKeyInput {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly region: string;
  readonly service: string;
  /** `YYYYMMDDTHHMMSSZ`, identical to the date header's value. */
  readonly timestamp: string;
}

export interface Signature {
  readonly canonicalRequest: string;
  readonly stringToSign: string;
  readonly signedHeaders: string;
  readonly signature: string;
  readonly authorization: string;
}

const sha256Hex = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string): Buffer => createHmac("sha256", key).update(data).digest();

/** RFC 3986 encoding as SigV4 requires: everything but unreserved characters is %XX (upper case). */
export function uriEncode(value: string, keepSlash: boolean): string {
  let out = "";
  for (const byte of Buffer.from(value, "utf8")) {
    const ch = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-._~]/.test(ch) || (keepSlash && ch === "/")) out += ch;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** `YYYYMMDDTHHMMSSZ` for a date. */
export function signingTimestamp(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}

/** Sign a request with the SigV4 algorithm under `scheme`'s names. Pure: the time is an input. */
export function signRequest(
  scheme: SigningScheme,
  request: SignableRequest,
  key: SigningKeyInput,
): Signature {
  const headers = new Map<string, string>();
  for (const [name, value] of Object.entries(request.headers)) {
    headers.set(name.toLowerCase(), value.trim().replace(/\s+/g, " "));
  }
  if (!headers.has("host")) throw new TypeError("signRequest: the host header is required");
  if (headers.get(scheme.dateHeader) !== key.timestamp) {
    throw new TypeError(`signRequest: the ${scheme.dateHeader} header must equal the signing timestamp`);
  }
  const names = [...headers.keys()].sort();
  const canonicalHeaders = names.map((name) => `${name}:${headers.get(name)}\n`).join("");
  const signedHeaders = names.join(";");
  const canonicalQuery = Object.entries(request.query ?? {})
    .map(([k, v]) => [uriEncode(k, false), uriEncode(v, false)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const canonicalRequest = [
    request.method.toUpperCase(),
    request.path,
    canonicalQuery,
    canonicalHeaders,
    signedHeaders,
    request.payloadHash,
  ].join("\n");
  const day = key.timestamp.slice(0, 8);
  const scope = `${day}/${key.region}/${key.service}/${scheme.terminator}`;
  const stringToSign = [scheme.algorithm, key.timestamp, scope, sha256Hex(canonicalRequest)].join("\n");
  const kDate = hmac(`${scheme.keyPrefix}${key.secretAccessKey}`, day);
  const kSigning = hmac(hmac(hmac(kDate, key.region), key.service), scheme.terminator);
  const signature = createHmac("sha256", kSigning).update(stringToSign).digest("hex");
  const authorization = `${scheme.algorithm} Credential=${key.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return { canonicalRequest, stringToSign, signedHeaders, signature, authorization };
}

export { sha256Hex };
