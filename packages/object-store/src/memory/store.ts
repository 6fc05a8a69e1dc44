import { createHash } from "node:crypto";
import { addAbortSignal, Readable } from "node:stream";
import { ObjectStoreError, isTransientStoreError } from "../errors.js";
import { abortError, checkedChunks, DEFAULT_PART_SIZE, isMultipart, openBody } from "../internal/body.js";
import { compareKeys, joinPrefix, keyBelow, validateKey, validateListPrefix } from "../internal/keys.js";
import { infoMetadata, putMetadata } from "../internal/put-options.js";
import { noSuchObject, resolveRange } from "../internal/get.js";
import { abortableSleep, withRetry } from "../internal/retry.js";
import type {
  CallOptions,
  CreateResult,
  DestinationIdentity,
  GetOptions,
  ListOptions,
  ObjectInfo,
  ObjectStore,
  PutBody,
  PutOptions,
} from "../types.js";
import { formatStoreUri, parseStoreUri } from "../uri.js";
import { faultFires, faultOperation, type MemoryFault, type StoreOperation } from "./faults.js";

const DEFAULT_PAGE_SIZE = 1000;

/** One attempt of one call, in the order the store saw them. */
export interface MemoryCall {
  readonly seq: number;
  readonly op: StoreOperation;
  /** The key relative to the store (for list: the prefix). */
  readonly key: string;
  /** 1 for the first attempt, 2+ for retries. */
  readonly attempt: number;
  /** The faults that fired on this attempt. */
  readonly faults: readonly MemoryFault["type"][];
  /** For a put: the number of parts it was uploaded in (1 below the multipart threshold). */
  readonly parts?: number;
}

export interface MemoryStoreOptions {
  /**
   * Stores opened with the same name in one process share their objects (openStore("memory://name")
   * does this). Without a name the store is private.
   */
  readonly name?: string;
  readonly prefix?: string;
  readonly faults?: readonly MemoryFault[];
  /** Retries of transient failures, as a real backend does. Default: 3 retries, 1 ms backoff. */
  readonly retry?: { readonly retries?: number; readonly baseDelayMs?: number; readonly maxDelayMs?: number };
  /** Default per-attempt timeout (ms). */
  readonly timeoutMs?: number;
  readonly now?: () => Date;
}

/** The in-memory store: an ObjectStore plus fault injection and a call log for tests. */
export interface MemoryStore extends ObjectStore {
  /** Every attempt of every call, oldest first. */
  readonly calls: readonly MemoryCall[];
  inject(fault: MemoryFault): void;
  clearFaults(): void;
  clearCalls(): void;
}

interface StoredObject {
  readonly body: Buffer;
  readonly metadata: Readonly<Record<string, string>>;
  readonly etag: string;
  readonly lastModified: Date;
}

const sharedBackings = new Map<string, Map<string, StoredObject>>();
let privateStores = 0;

function backingFor(name: string | undefined): { name: string; objects: Map<string, StoredObject> } {
  if (name === undefined) {
    privateStores += 1;
    return { name: `private-${privateStores}`, objects: new Map() };
  }
  let objects = sharedBackings.get(name);
  if (objects === undefined) {
    objects = new Map();
    sharedBackings.set(name, objects);
  }
  return { name, objects };
}

interface ArmedFault {
  readonly fault: MemoryFault;
  matches: number;
}

class InMemoryStore implements MemoryStore {
  readonly identity: DestinationIdentity;
  readonly uri: string;
  readonly calls: MemoryCall[] = [];
  private readonly objects: Map<string, StoredObject>;
  private readonly prefix: string;
  private faults: ArmedFault[] = [];
  private seq = 0;

  constructor(private readonly options: MemoryStoreOptions) {
    const backing = backingFor(options.name);
    this.objects = backing.objects;
    const parsed = parseStoreUri(
      formatStoreUri({ scheme: "memory", bucket: backing.name, prefix: options.prefix ?? "" }),
    );
    this.prefix = parsed.prefix;
    this.identity = {
      scheme: "memory",
      endpoint: parsed.bucket,
      bucket: parsed.bucket,
      prefix: parsed.prefix,
    };
    this.uri = formatStoreUri(parsed);
    for (const fault of options.faults ?? []) this.inject(fault);
  }

  inject(fault: MemoryFault): void {
    this.faults.push({ fault, matches: 0 });
  }

  clearFaults(): void {
    this.faults = [];
  }

  clearCalls(): void {
    this.calls.length = 0;
  }

  private now(): Date {
    return this.options.now?.() ?? new Date();
  }

  /** Logs one attempt and returns the faults that fire on it. */
  private fire(op: StoreOperation, key: string, attempt: number, parts?: number): MemoryFault[] {
    const fired: MemoryFault[] = [];
    for (const armed of this.faults) {
      if (faultOperation(armed.fault) !== op) continue;
      if (armed.fault.key !== undefined && armed.fault.key !== key) continue;
      armed.matches += 1;
      if (faultFires(armed.fault, armed.matches)) fired.push(armed.fault);
    }
    this.seq += 1;
    this.calls.push({
      seq: this.seq,
      op,
      key,
      attempt,
      faults: fired.map((f) => f.type),
      ...(parts === undefined ? {} : { parts }),
    });
    return fired;
  }

  /** Runs one call through retries, faults (fail, delay) and the per-attempt timeout. */
  private call<T>(
    op: StoreOperation,
    key: string,
    options: CallOptions | undefined,
    body: (fired: MemoryFault[], signal: AbortSignal) => T,
    parts?: number,
  ): Promise<T> {
    const retry = this.options.retry ?? {};
    const timeoutMs = options?.timeoutMs ?? this.options.timeoutMs;
    return withRetry(
      async (attempt, signal) => {
        const fired = this.fire(op, key, attempt, parts);
        for (const fault of fired) {
          if (fault.type === "delay") await abortableSleep(fault.ms, signal);
        }
        const failure = fired.find((f) => f.type === "fail");
        if (failure !== undefined) {
          throw failure.transient
            ? new ObjectStoreError("STORE_TRANSIENT", `${op} ${key}: injected transient failure (503).`, {
                kind: "transient",
                subject: key,
              })
            : new ObjectStoreError("STORE_REQUEST_FAILED", `${op} ${key}: injected failure (500).`, {
                kind: "failed",
                subject: key,
              });
        }
        return body(fired, signal);
      },
      {
        retries: retry.retries ?? 3,
        baseDelayMs: retry.baseDelayMs ?? 1,
        maxDelayMs: retry.maxDelayMs ?? 10,
        isTransient: isTransientStoreError,
        subject: `${this.uri} ${key}`,
        ...(options?.signal === undefined ? {} : { signal: options.signal }),
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
      },
    );
  }

  private info(key: string, object: StoredObject): ObjectInfo {
    return {
      key,
      size: object.body.length,
      etag: object.etag,
      lastModified: object.lastModified,
      ...infoMetadata(object.metadata),
    };
  }

  private store(key: string, body: Buffer, metadata: Record<string, string>): StoredObject {
    const object: StoredObject = {
      body,
      metadata,
      etag: createHash("md5").update(body).digest("hex"),
      lastModified: this.now(),
    };
    this.objects.set(joinPrefix(this.prefix, key), object);
    return object;
  }

  /** Reads a whole put body, honouring the signal, and checks its size and declared digest. */
  private async collect(key: string, body: PutBody, options: PutOptions | undefined): Promise<Buffer> {
    const signal = options?.signal;
    if (signal?.aborted) throw abortError(key, signal);
    const { stream, size } = await openBody(key, body);
    if (signal !== undefined) addAbortSignal(signal, stream);
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of checkedChunks(key, stream, size, options?.sha256))
        chunks.push(Buffer.from(chunk));
    } catch (error) {
      if (signal?.aborted) throw abortError(key, signal);
      throw error;
    }
    return Buffer.concat(chunks, size);
  }

  async createIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<CreateResult> {
    validateKey(key);
    const metadata = putMetadata(key, options);
    const bytes = await this.collect(key, body, options);
    return this.call("createIfAbsent", key, options, (fired) => {
      const existing = this.objects.get(joinPrefix(this.prefix, key));
      if (existing !== undefined && !fired.some((f) => f.type === "ignoreConditional")) {
        return { status: "exists", info: this.info(key, existing) };
      }
      const created = this.store(key, bytes, metadata);
      options?.onProgress?.(bytes.length);
      return { status: "created", info: this.info(key, created) };
    });
  }

  async put(key: string, body: PutBody, options?: PutOptions): Promise<ObjectInfo> {
    validateKey(key);
    const metadata = putMetadata(key, options);
    const bytes = await this.collect(key, body, options);
    const partSize = options?.partSize ?? DEFAULT_PART_SIZE;
    const parts = isMultipart(bytes.length, options) ? Math.ceil(bytes.length / partSize) : 1;
    return this.call(
      "put",
      key,
      options,
      () => {
        const stored = this.store(key, bytes, metadata);
        for (let part = 1; part <= parts; part++) {
          options?.onProgress?.(Math.min(bytes.length, part * partSize));
        }
        return this.info(key, stored);
      },
      parts,
    );
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | undefined> {
    validateKey(key);
    return this.call("head", key, options, (fired) => {
      const object = this.objects.get(joinPrefix(this.prefix, key));
      if (object === undefined) return undefined;
      let info = this.info(key, object);
      for (const fault of fired) {
        if (fault.type !== "lieOnHead") continue;
        info = {
          ...info,
          ...(fault.sha256 === undefined ? {} : { sha256: fault.sha256 }),
          ...(fault.size === undefined ? {} : { size: fault.size }),
        };
      }
      return info;
    });
  }

  async get(key: string, options?: GetOptions): Promise<Readable> {
    validateKey(key);
    return this.call("get", key, options, (fired) => {
      const object = this.objects.get(joinPrefix(this.prefix, key));
      if (object === undefined) throw noSuchObject(key, this.uri);
      const { start, end } = resolveRange(key, options?.range, object.body.length);
      let bytes = object.body.subarray(start, end);
      for (const fault of fired) {
        if (fault.type === "truncateGet") bytes = bytes.subarray(0, fault.bytes);
      }
      return Readable.from(bytes.length === 0 ? [] : [bytes]);
    });
  }

  async *list(prefix: string, options?: ListOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    const pageSize = options?.pageSize ?? DEFAULT_PAGE_SIZE;
    const full = joinPrefix(this.prefix, prefix);
    let after: string | undefined;
    for (;;) {
      const page = await this.call("list", prefix, options, () =>
        [...this.objects.entries()]
          .filter(
            ([name]) => name.startsWith(full) && (this.prefix === "" || name.startsWith(`${this.prefix}/`)),
          )
          .filter(([name]) => after === undefined || compareKeys(name, after) > 0)
          .sort(([a], [b]) => compareKeys(a, b))
          .slice(0, pageSize),
      );
      for (const [name, object] of page) {
        yield {
          key: keyBelow(this.prefix, name),
          size: object.body.length,
          etag: object.etag,
          lastModified: object.lastModified,
          metadata: {},
        };
      }
      if (page.length < pageSize) return;
      after = page.at(-1)![0];
    }
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    validateKey(key);
    await this.call("delete", key, options, () => {
      this.objects.delete(joinPrefix(this.prefix, key));
    });
  }
}

/**
 * An in-memory ObjectStore for tests: same contract as the remote backends (including internal
 * retries of transient failures), plus fault injection and a log of every attempt.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new InMemoryStore(options);
}
