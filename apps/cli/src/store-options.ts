import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Argv } from "yargs";
import { UsageError } from "./errors.js";
import type { CliIo } from "./io.js";

/**
 * Where `--bucket` and `--credentials` come from when not given: the environment
 * (CKPT_BUCKET, CKPT_CREDENTIALS), then a config file (CKPT_CONFIG, else
 * ~/.config/ckpt/config.json: `{ "bucket": "...", "credentials": "/path/creds.json" }`).
 * Never a hard-coded path. Documented in docs/cli.md.
 */
export interface StoreDefaults {
  readonly bucket?: string;
  readonly credentials?: string;
}

function configPath(env: NodeJS.ProcessEnv): string {
  return env.CKPT_CONFIG ?? join(env.HOME ?? homedir(), ".config", "ckpt", "config.json");
}

function readConfig(env: NodeJS.ProcessEnv): StoreDefaults {
  const path = configPath(env);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && env.CKPT_CONFIG === undefined) return {};
    throw new UsageError(`read ckpt config ${path}: ${(error as Error).message}. Fix or unset CKPT_CONFIG.`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(
      `read ckpt config ${path}: not valid JSON. Expected {"bucket": "...", "credentials": "..."}.`,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new UsageError(
      `read ckpt config ${path}: expected a JSON object with "bucket" and/or "credentials".`,
    );
  }
  const { bucket, credentials } = parsed as Record<string, unknown>;
  for (const [key, value] of Object.entries({ bucket, credentials })) {
    if (value !== undefined && typeof value !== "string") {
      throw new UsageError(`read ckpt config ${path}: "${key}" must be a string.`);
    }
  }
  return { bucket: bucket as string | undefined, credentials: credentials as string | undefined };
}

/**
 * Why a bucket setting cannot be used, or undefined: a bare name means s3://<name>, and no bucket
 * name holds a "/", so a path is a directory archive written without its file:// scheme. Pure.
 */
function bucketRefusal(bucket: string, source: string): string | undefined {
  if (bucket.includes("://") || !bucket.includes("/")) return undefined;
  const absolute = bucket.startsWith("/");
  return (
    `${source} ${bucket} is a path, not a bucket name. A directory archive is file:///absolute/dir` +
    (absolute ? ` (here file://${bucket})` : " (an absolute path)") +
    "; a bare name means s3://<name>. `ckpt doctor object-store file:///dir` checks a directory archive."
  );
}

/** Flag, then environment, then config file. */
export function resolveStoreDefaults(
  args: { bucket?: string; credentials?: string },
  io: CliIo,
): StoreDefaults {
  const fromFile = args.bucket !== undefined && args.credentials !== undefined ? {} : readConfig(io.env);
  const [bucket, source] =
    args.bucket !== undefined
      ? [args.bucket, "--bucket"]
      : io.env.CKPT_BUCKET !== undefined
        ? [io.env.CKPT_BUCKET, "CKPT_BUCKET"]
        : [fromFile.bucket, `"bucket" in ${configPath(io.env)}`];
  const refusal = bucket === undefined ? undefined : bucketRefusal(bucket, source);
  if (refusal !== undefined) throw new UsageError(refusal);
  return {
    bucket,
    credentials: args.credentials ?? io.env.CKPT_CREDENTIALS ?? fromFile.credentials,
  };
}

/** `--credentials` as every store-touching command declares it. */
export function withCredentialsOption<T>(yargs: Argv<T>): Argv<T> {
  return yargs.option("credentials", {
    type: "string",
    describe:
      "Credentials JSON {aws_access_key_id, aws_secret_access_key, endpoint_url, region_name}; default $CKPT_CREDENTIALS, then the config file, then the provider's default chain",
  }) as unknown as Argv<T>;
}
