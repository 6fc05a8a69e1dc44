import { MAX_RECORD_BYTES } from "@ckpt/manifest";
import { type ObjectStore, openStore, type StoreCredentials } from "@ckpt/object-store";
import { kindOf, ManagerError, messageOf } from "../errors.js";

/** A bucket setting as a store URI: a bare name means s3://<name> (the CLI's rule). Pure. */
export function bucketUri(bucket: string): string {
  const root = bucket.includes("://") ? bucket : `s3://${bucket}`;
  return root.endsWith("/") ? root.slice(0, -1) : root;
}

/** `<bucket uri>/<prefix>` with one slash between. Pure. */
export function joinUri(root: string, prefix: string): string {
  const trimmed = prefix.replace(/^\/+|\/+$/g, "");
  return trimmed === "" ? root : `${root}/${trimmed}`;
}

export interface StoreAccess {
  readonly credentials?: StoreCredentials | string;
  readonly timeoutMs?: number;
}

export async function openAt(uri: string, access: StoreAccess): Promise<ObjectStore> {
  return openStore(uri, {
    ...(access.credentials === undefined ? {} : { credentials: access.credentials }),
    ...(access.timeoutMs === undefined ? {} : { timeoutMs: access.timeoutMs }),
  });
}

/** Wraps a store failure as MANAGER_STORE_FAILED naming the object (kind kept: transient stays transient). */
export function storeFailure(what: string, subject: string, error: unknown): ManagerError {
  if (error instanceof ManagerError) return error;
  const kind = kindOf(error);
  return new ManagerError("MANAGER_STORE_FAILED", `${what} ${subject}: ${messageOf(error)}`, {
    kind: kind === "transient" ? "transient" : kind === "input" ? "input" : "failed",
    subject,
    cause: error,
  });
}

/** The bytes of a small object, or undefined when it does not exist; refuses one larger than `max`. */
export async function readSmallObject(
  store: ObjectStore,
  key: string,
  max: number = MAX_RECORD_BYTES,
): Promise<Uint8Array | undefined> {
  const subject = `${store.uri}/${key}`;
  try {
    const info = await store.head(key);
    if (info === undefined) return undefined;
    if (info.size > max) {
      throw new ManagerError(
        "MANAGER_REMOTE_INVALID",
        `read ${subject}: it is ${info.size} bytes; at most ${max} are expected. It is not a ckpt record.`,
        { kind: "refused", subject },
      );
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of await store.get(key)) {
      const buffer = chunk as Buffer;
      total += buffer.length;
      if (total > max) {
        throw new ManagerError(
          "MANAGER_REMOTE_INVALID",
          `read ${subject}: it grew past ${max} bytes while read.`,
          {
            kind: "refused",
            subject,
          },
        );
      }
      chunks.push(buffer);
    }
    return new Uint8Array(Buffer.concat(chunks));
  } catch (error) {
    if ((error as { code?: string }).code === "STORE_NOT_FOUND") return undefined;
    throw storeFailure("read", subject, error);
  }
}
