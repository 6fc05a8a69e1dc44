// What the S3 store and its multipart upload share: the store context, one put, the write headers.
import type { S3Client } from "@aws-sdk/client-s3";
import type { PartBuffers } from "../internal/parts.js";
import type { RemoteContext } from "../internal/remote.js";
import type { ObjectInfo, PutBody, PutOptions } from "../types.js";
import type { S3Dialect, S3Sdk } from "./client.js";
import type { WireTarget } from "./wire.js";
import { infoMetadata } from "../internal/put-options.js";

/** The SDK module and this store's client, created on first use. */
interface Sdk {
  readonly sdk: S3Sdk;
  readonly client: S3Client;
}

export interface Ctx extends RemoteContext {
  readonly load: () => Promise<Sdk>;
  /** Plain signed HTTP for the requests of an upload (see wire.ts). */
  readonly wire: WireTarget;
  readonly parts: PartBuffers;
  readonly bucket: string;
  readonly prefix: string;
  readonly dialect: S3Dialect;
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly now: () => Date;
}

/** The user metadata and content type every write request carries. */
export function objectHeaders(metadata: Record<string, string>, options: PutOptions | undefined) {
  return {
    Metadata: metadata,
    ...(options?.contentType === undefined ? {} : { ContentType: options.contentType }),
  };
}

export function putInfo(
  key: string,
  size: number,
  metadata: Record<string, string>,
  etag?: string,
): ObjectInfo {
  return { key, size, ...infoMetadata(metadata), ...(etag === undefined ? {} : { etag }) };
}

/** One put, sized and named: what the single-request and the multipart paths both need. */
export interface Upload {
  readonly key: string;
  /** The full object name below the bucket. */
  readonly name: string;
  readonly subject: string;
  readonly body: PutBody;
  /** Undefined for an unsized stream (multipart only): the size is what arrived. */
  readonly size: number | undefined;
  readonly metadata: Record<string, string>;
  readonly options: PutOptions | undefined;
}
