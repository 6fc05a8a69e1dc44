/**
 * Secret scrubbing for every string that may reach a message, a log or a report. Pattern-based
 * (URL user-info, AWS key ids, signed-URL query parameters, credential-file fields) plus any
 * literal secrets the caller knows (the loaded credentials' values).
 */

const REDACTED = "[redacted]";

/** Secrets shorter than this are not scrubbed literally: they would shred ordinary words. */
const MIN_LITERAL_SECRET_LENGTH = 4;

const PATTERNS: ReadonlyArray<readonly [RegExp, string]> = [
  // scheme://user:pass@host -> scheme://[redacted]@host
  [/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]*@/gi, `$1${REDACTED}@`],
  // AWS access key ids (long-term AKIA, temporary ASIA)
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, REDACTED],
  // signed URL query parameters (SigV4, SigV2, GOOG4)
  [
    /([?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|X-Goog-Signature|X-Goog-Credential|Signature|AWSAccessKeyId)=)[^&\s"']*/gi,
    `$1${REDACTED}`,
  ],
  // "aws_secret_access_key": "..." / aws_secret_access_key=... (JSON, INI, env)
  [
    /((?:aws_secret_access_key|aws_access_key_id|aws_session_token|secret_access_key|secretAccessKey|accessKeyId|sessionToken)["']?\s*[:=]\s*["']?)[^"',\s}]+/gi,
    `$1${REDACTED}`,
  ],
  // Authorization headers
  [/(authorization["']?\s*[:=]\s*["']?)[^"'\n]+/gi, `$1${REDACTED}`],
];

export interface RedactOptions {
  /** Literal secret values to remove wherever they appear (e.g. a loaded secret access key). */
  readonly secrets?: ReadonlyArray<string | undefined>;
}

/** `text` with every recognisable secret replaced by `[redacted]`. */
export function redact(text: string, options: RedactOptions = {}): string {
  let out = text;
  for (const secret of options.secrets ?? []) {
    if (secret !== undefined && secret.length >= MIN_LITERAL_SECRET_LENGTH) {
      out = out.split(secret).join(REDACTED);
    }
  }
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
