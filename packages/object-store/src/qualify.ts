import { createHash, randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Readable } from "node:stream";
import { ObjectStoreError } from "./errors.js";
import { redact } from "./redact.js";
import type { DestinationIdentity, ObjectInfo, ObjectStore } from "./types.js";

/** S3 refuses parts below 5 MiB (except the last), so the multipart probe uses 5 MiB parts. */
export const DEFAULT_QUALIFY_PART_SIZE = 5 * 1024 * 1024;

/** Probes live under this prefix, one random directory per run, and are deleted at the end. */
export const QUALIFY_PREFIX = ".ckpt-qualify";

export type QualificationCheckName =
  | "conditional-create"
  | "sha256-metadata"
  | "ranged-get"
  | "multipart-put"
  | "multipart-conditional-create"
  | "list"
  | "delete";

export interface QualificationCheck {
  readonly name: QualificationCheckName;
  readonly ok: boolean;
  /** A failed required check disqualifies the store; the others are informational. */
  readonly required: boolean;
  readonly detail: string;
  readonly durationMs: number;
}

export interface QualificationReport {
  readonly uri: string;
  readonly identity: DestinationIdentity;
  /** True only when every required check passed (fail closed). */
  readonly qualified: boolean;
  readonly checks: readonly QualificationCheck[];
}

export interface QualifyOptions {
  readonly signal?: AbortSignal;
  /** Part size (and threshold) of the multipart probes; the probe body is one part plus 1 KiB. */
  readonly partSize?: number;
  /** Names the probe directory (default: 8 random bytes in hex). */
  readonly probeId?: string;
  /** Millisecond clock for durations (default performance.now). */
  readonly now?: () => number;
}

interface Outcome {
  readonly ok: boolean;
  readonly detail: string;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Whether a store is fit to hold ckpt archives, decided from the checks' outcomes. Pure. */
export function isQualified(checks: readonly Pick<QualificationCheck, "ok" | "required">[]): boolean {
  return checks.length > 0 && checks.every((c) => c.ok || !c.required);
}

/**
 * Proves what ckpt relies on against a live store, with probe objects under
 * `.ckpt-qualify/<random>/` that are removed afterwards: conditional create refuses a second
 * create and keeps the first body; sha256 metadata round-trips through HEAD; a multipart put reads
 * back intact; ranged gets; list; delete. Conditional create above the multipart threshold is
 * reported on its own informational line (Ceph does not enforce If-None-Match on
 * CompleteMultipartUpload, which is why once-only records are single PUTs). A store that does not
 * enforce conditional create is not qualified. Rejects only when aborted (`STORE_ABORTED`).
 */
export async function qualify(
  store: ObjectStore,
  options: QualifyOptions = {},
): Promise<QualificationReport> {
  const now = options.now ?? (() => performance.now());
  const signal = options.signal;
  const call = signal === undefined ? {} : { signal };
  const partSize = options.partSize ?? DEFAULT_QUALIFY_PART_SIZE;
  const multipart = { multipartThreshold: partSize, partSize };
  const base = `${QUALIFY_PREFIX}/${options.probeId ?? randomBytes(8).toString("hex")}`;
  const keys = {
    create: `${base}/create`,
    digest: `${base}/digest`,
    multipart: `${base}/multipart`,
    multipartCreate: `${base}/multipart-create`,
  };
  const checks: QualificationCheck[] = [];

  const run = async (name: QualificationCheckName, required: boolean, body: () => Promise<Outcome>) => {
    const started = now();
    let outcome: Outcome;
    try {
      outcome = await body();
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === "STORE_ABORTED") throw error;
      const message = error instanceof Error ? error.message : String(error);
      const code = error instanceof ObjectStoreError ? `${error.code}: ` : "";
      outcome = { ok: false, detail: redact(`${code}${message}`) };
    }
    checks.push({ name, required, ...outcome, durationMs: Math.round((now() - started) * 10) / 10 });
  };

  const conditional = async (key: string, size: number, extra: object, what: string): Promise<Outcome> => {
    const first = randomBytes(size);
    const second = randomBytes(size);
    const a = await store.createIfAbsent(key, first, { ...call, ...extra });
    if (a.status !== "created")
      return { ok: false, detail: `the first create of a fresh key reported '${a.status}'` };
    const b = await store.createIfAbsent(key, second, { ...call, ...extra });
    const kept = (await readAll(await store.get(key, call))).equals(first);
    if (b.status === "created" || !kept) {
      return {
        ok: false,
        detail:
          `${what}: a second create of the same key ${b.status === "created" ? "reported 'created'" : "was refused"}` +
          `${kept ? "" : " and overwrote the first body"}; the endpoint does not enforce the condition`,
      };
    }
    return { ok: true, detail: `${what}: the second create was refused as 'exists' and the first body kept` };
  };

  try {
    await run("conditional-create", true, () => conditional(keys.create, 64, {}, "single PUT"));

    const digestBody = randomBytes(4096);
    await run("sha256-metadata", true, async () => {
      const digest = sha256(digestBody);
      await store.put(keys.digest, digestBody, { ...call, sha256: digest });
      const head: ObjectInfo | undefined = await store.head(keys.digest, call);
      if (head === undefined) return { ok: false, detail: "HEAD after put found no object" };
      if (head.sha256 !== digest) {
        return { ok: false, detail: `HEAD returned sha256 ${head.sha256 ?? "(none)"}, expected ${digest}` };
      }
      if (head.size !== digestBody.length) {
        return { ok: false, detail: `HEAD returned size ${head.size}, expected ${digestBody.length}` };
      }
      return { ok: true, detail: "sha256 user metadata and size round-trip through HEAD" };
    });

    await run("ranged-get", true, async () => {
      const windows = [{ start: 100, end: 1100 }, { start: digestBody.length - 1 }, { start: 0, end: 1 }];
      for (const range of windows) {
        const got = await readAll(await store.get(keys.digest, { ...call, range }));
        if (!got.equals(digestBody.subarray(range.start, range.end))) {
          return { ok: false, detail: `range ${JSON.stringify(range)} returned ${got.length} wrong bytes` };
        }
      }
      return { ok: true, detail: "start-end, tail and first-byte ranges return the right bytes" };
    });

    await run("multipart-put", true, async () => {
      const body = randomBytes(partSize + 1024);
      const info = await store.put(keys.multipart, body, { ...call, ...multipart, sha256: sha256(body) });
      const back = await readAll(await store.get(keys.multipart, call));
      if (!back.equals(body)) {
        return {
          ok: false,
          detail: `read back ${back.length} bytes that differ from the ${body.length} written`,
        };
      }
      const head = await store.head(keys.multipart, call);
      if (head?.sha256 !== sha256(body))
        return { ok: false, detail: "the multipart object lost its sha256 metadata" };
      return {
        ok: true,
        detail: `${info.size} bytes in ${partSize}-byte parts read back intact with their sha256`,
      };
    });

    await run("multipart-conditional-create", false, async () => {
      const outcome = await conditional(
        keys.multipartCreate,
        partSize + 1024,
        multipart,
        "above the multipart threshold",
      );
      return outcome.ok
        ? outcome
        : { ok: false, detail: `${outcome.detail}; records that must be created once are single PUTs` };
    });

    await run("list", true, async () => {
      const listed: string[] = [];
      for await (const info of store.list(`${base}/`, { ...call, pageSize: 1 })) listed.push(info.key);
      const present = await Promise.all(
        Object.values(keys).map(async (k) => ((await store.head(k, call)) ? [k] : [])),
      );
      const expected = present.flat().sort();
      if (JSON.stringify(listed) !== JSON.stringify(expected)) {
        return {
          ok: false,
          detail: `listed ${JSON.stringify(listed)}, expected ${JSON.stringify(expected)}`,
        };
      }
      return { ok: true, detail: `${listed.length} probes listed in order with one key per page` };
    });

    await run("delete", true, async () => {
      for (const key of Object.values(keys)) await store.delete(key, call);
      for (const key of Object.values(keys)) {
        if ((await store.head(key, call)) !== undefined)
          return { ok: false, detail: `${key} is still there after delete` };
      }
      await store.delete(keys.create, call);
      return { ok: true, detail: "probes deleted; deleting a missing key succeeds" };
    });
  } finally {
    await Promise.all(Object.values(keys).map((key) => store.delete(key).catch(() => {})));
  }

  return { uri: store.uri, identity: store.identity, qualified: isQualified(checks), checks };
}
