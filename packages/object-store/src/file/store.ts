import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import {
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  statfs,
  unlink,
} from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { describeRefusal, readRegularFile } from "@ckpt/errors";
import { addAbortSignal, Readable } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import { abortError, checkedChunks, openBody } from "../internal/body.js";
import { compareKeys, validateKey, validateListPrefix } from "../internal/keys.js";
import { infoMetadata, putMetadata } from "../internal/put-options.js";
import { noSuchObject, resolveRange } from "../internal/get.js";
import { withRetry } from "../internal/retry.js";
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
import { errnoCode } from "./layout.js";
import {
  fileError,
  linkOutcome,
  META_DIR,
  noSpace,
  payloadPath,
  type Sidecar,
  sidecarMetadata,
  sidecarPath,
  TEMP_PREFIX,
} from "./layout.js";

export interface FileStoreOptions {
  /** Absolute root directory; created on the first write. */
  readonly root: string;
  /** Default per-call timeout (ms). */
  readonly timeoutMs?: number;
}

/** A sidecar holds a few metadata values; anything larger is not one this store wrote. */
const MAX_SIDECAR_BYTES = 64 * 1024;

/** mkdir -p racing a concurrent delete's empty-directory pruning settles within a few rounds. */
const MAX_DIRECTORY_RACES = 5;

function isMissing(error: unknown): boolean {
  const code = errnoCode(error);
  return code === "ENOENT" || code === "ENOTDIR";
}

interface WrittenTemp {
  readonly path: string;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
}

/** A write ready to commit: the fsync'ed temporary, its sidecar's path and the stored metadata. */
interface Staged {
  readonly temp: WrittenTemp;
  readonly sidecar: string;
  readonly metadata: Record<string, string>;
}

class FileStore implements ObjectStore {
  readonly identity: DestinationIdentity;
  readonly uri: string;
  private readonly root: string;

  constructor(private readonly options: FileStoreOptions) {
    const parsed = parseStoreUri(formatStoreUri({ scheme: "file", bucket: options.root, prefix: "" }));
    this.root = parsed.bucket;
    this.identity = { scheme: "file", endpoint: "local", bucket: parsed.bucket, prefix: "" };
    this.uri = formatStoreUri(parsed);
  }

  /** Runs an operation under the caller's signal and timeout (no retries: local I/O errors are final). */
  private run<T>(
    key: string,
    options: CallOptions | undefined,
    operation: (signal: AbortSignal) => Promise<T>,
  ) {
    const timeoutMs = options?.timeoutMs ?? this.options.timeoutMs;
    return withRetry((_attempt, signal) => operation(signal), {
      retries: 0,
      isTransient: () => false,
      subject: `${this.uri} ${key}`,
      ...(options?.signal === undefined ? {} : { signal: options.signal }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
  }

  private failure(action: string, key: string, error: unknown): ObjectStoreError {
    return fileError(action, key, this.uri, error);
  }

  /**
   * Refuses `dir` (a directory at or below the root) when one of its components below the root is
   * a symbolic link: the store writes, reads, lists and deletes only inside its root, and a link
   * there (a prefix or `.ckpt-meta` swapped for one) could lead anywhere (issue 16). Components
   * that do not exist yet are fine: mkdir creates real directories. The root itself may be a link.
   */
  private async confine(action: string, key: string, dir: string): Promise<void> {
    const below = relative(this.root, dir);
    if (below === "") return;
    let current = this.root;
    for (const name of below.split(sep)) {
      current = join(current, name);
      let linked: boolean;
      try {
        linked = (await lstat(current)).isSymbolicLink();
      } catch (error) {
        if (isMissing(error)) return;
        throw error;
      }
      if (linked) {
        throw new ObjectStoreError(
          "STORE_UNSAFE_PATH",
          `${action} ${key} in ${this.uri}: ${current} is a symbolic link; a file store never follows a link ` +
            "below its root, which could lead outside it. Replace the link with a real directory, or point the store at the directory itself.",
          { kind: "refused", subject: key },
        );
      }
    }
  }

  /** mkdir -p, then `attempt`, repeating when a concurrent prune removed the directory in between. */
  private async inDirectory<T>(dir: string, attempt: () => Promise<T>): Promise<T> {
    for (let round = 1; ; round++) {
      await mkdir(dir, { recursive: true });
      try {
        return await attempt();
      } catch (error) {
        if (errnoCode(error) !== "ENOENT" || round >= MAX_DIRECTORY_RACES) throw error;
      }
    }
  }

  private async syncDirectory(dir: string): Promise<void> {
    const handle = await open(dir, constants.O_RDONLY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  /**
   * Refuses early a write whose size is known to exceed the free space of the store's filesystem
   * (statfs of the root, or of its nearest existing parent before the first write).
   */
  private async checkRoom(key: string, size: number): Promise<void> {
    for (let dir = this.root; ; dir = dirname(dir)) {
      try {
        const { bavail, bsize } = await statfs(dir);
        const free = bavail * bsize;
        if (size > free) throw noSpace("put", key, this.uri, `${size} bytes to write, ${free} free`);
        return;
      } catch (error) {
        if (!isMissing(error) || dir === dirname(dir)) throw error;
      }
    }
  }

  /** Writes the body to a fresh temporary beside `final`, fsyncs it and checks size and digest. */
  private async writeTemp(
    key: string,
    final: string,
    body: PutBody,
    options: PutOptions | undefined,
    signal: AbortSignal,
  ): Promise<WrittenTemp> {
    const { stream, size } = await openBody(key, body);
    addAbortSignal(signal, stream);
    const dir = dirname(final);
    await this.confine("write", key, dir);
    if (size !== undefined) await this.checkRoom(key, size);
    const path = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString("hex")}`);
    const handle: FileHandle = await this.inDirectory(dir, () => open(path, "wx", 0o644));
    try {
      let written = 0;
      for await (const bytes of checkedChunks(key, stream, size, options?.sha256)) {
        written += bytes.byteLength;
        await handle.write(bytes);
        options?.onProgress?.(written);
      }
      await handle.sync();
      const stat = await handle.stat({ bigint: true });
      await handle.close();
      return { path, ino: stat.ino, size: stat.size, mtimeNs: stat.mtimeNs };
    } catch (error) {
      stream.destroy();
      await handle.close().catch(() => {});
      await unlink(path).catch(() => {});
      if (signal.aborted) throw abortError(key, signal);
      throw error;
    }
  }

  /** Writes the sidecar of a payload inode (through a temporary + rename) before the payload appears. */
  private async writeSidecar(
    key: string,
    temp: WrittenTemp,
    metadata: Record<string, string>,
  ): Promise<string> {
    const path = sidecarPath(this.root, key, temp.ino);
    const sidecar: Sidecar = {
      version: 1,
      ino: String(temp.ino),
      size: Number(temp.size),
      mtimeNs: String(temp.mtimeNs),
      metadata,
    };
    const dir = dirname(path);
    await this.confine("write", key, dir);
    const tempPath = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString("hex")}`);
    try {
      await this.inDirectory(dir, async () => {
        const handle = await open(tempPath, "wx", 0o644);
        try {
          await handle.writeFile(`${JSON.stringify(sidecar)}\n`);
          await handle.sync();
        } finally {
          await handle.close();
        }
      });
      await rename(tempPath, path);
    } catch (error) {
      // A full disk fails here too: leave no temporary behind.
      await unlink(tempPath).catch(() => {});
      throw error;
    }
    return path;
  }

  /**
   * The parsed sidecar of payload inode `ino`, or undefined when there is none or it is not JSON.
   * Read through the guarded open: a FIFO, device or link planted there is refused, never waited on.
   */
  private async readSidecar(key: string, ino: bigint): Promise<unknown> {
    const path = sidecarPath(this.root, key, ino);
    await this.confine("read metadata of", key, dirname(path));
    const read = await readRegularFile(path, { maxBytes: MAX_SIDECAR_BYTES, noFollow: true });
    if (!read.ok) {
      if (read.reason === "missing") return undefined;
      throw new ObjectStoreError(
        "STORE_UNSAFE_PATH",
        `read metadata of ${key} in ${this.uri}: ${describeRefusal(read)}; this store writes its sidecars as small regular files. Remove it.`,
        { kind: "refused", subject: key },
      );
    }
    try {
      return JSON.parse(new TextDecoder().decode(read.bytes));
    } catch {
      return undefined;
    }
  }

  private async readInfo(key: string): Promise<ObjectInfo | undefined> {
    const final = payloadPath(this.root, key);
    await this.confine("read", key, dirname(final));
    let stat: Awaited<ReturnType<typeof lstat>> & { ino: bigint; size: bigint; mtimeNs: bigint };
    try {
      stat = await lstat(final, { bigint: true });
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
    if (!stat.isFile()) return undefined;
    const stored = sidecarMetadata(await this.readSidecar(key, stat.ino), stat);
    return {
      key,
      size: Number(stat.size),
      lastModified: new Date(Number(stat.mtimeMs)),
      etag: `${stat.ino}-${stat.mtimeNs}`,
      ...infoMetadata(stored),
    };
  }

  /**
   * Validates the key, writes the body to a temporary and its sidecar, then hands both to `commit`,
   * all under the call's signal and timeout. A failure is reported as one of `action`.
   */
  private write<T>(
    action: "create" | "put",
    key: string,
    body: PutBody,
    options: PutOptions | undefined,
    commit: (staged: Staged, final: string) => Promise<T>,
  ): Promise<T> {
    validateKey(key);
    const metadata = putMetadata(key, options);
    const final = payloadPath(this.root, key);
    return this.run(key, options, async (signal) => {
      try {
        const temp = await this.writeTemp(key, final, body, options, signal);
        const sidecar = await this.writeSidecar(key, temp, metadata).catch(async (error: unknown) => {
          await unlink(temp.path).catch(() => {});
          throw error;
        });
        return await commit({ temp, sidecar, metadata }, final);
      } catch (error) {
        if (signal.aborted) throw abortError(key, signal);
        throw this.failure(action, key, error);
      }
    });
  }

  async createIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<CreateResult> {
    return this.write("create", key, body, options, async ({ temp, sidecar }, final) => {
      let code: string | undefined;
      try {
        await link(temp.path, final);
      } catch (error) {
        code = errnoCode(error) ?? "unknown error";
      }
      const links =
        code === undefined
          ? 2
          : await lstat(temp.path).then(
              (s) => s.nlink,
              () => undefined,
            );
      const outcome = linkOutcome(code, links);
      await unlink(temp.path).catch(() => {});
      if (outcome !== "created") await unlink(sidecar).catch(() => {});
      if (outcome === "failed") throw this.failure("create", key, Object.assign(new Error(code), { code }));
      if (
        outcome === "exists" &&
        (await lstat(final).then(
          (st) => st.isDirectory(),
          () => false,
        ))
      ) {
        throw this.failure("create", key, Object.assign(new Error("EISDIR"), { code: "EISDIR" }));
      }
      if (outcome === "created") await this.syncDirectory(dirname(final));
      const info = await this.readInfo(key);
      if (info === undefined) {
        throw new ObjectStoreError(
          "STORE_PRECONDITION_UNCONFIRMED",
          `create ${key} in ${this.uri}: the object was ${outcome} but vanished before it could be read back; ` +
            "something else deletes in this directory.",
          { kind: "transient", subject: key },
        );
      }
      return { status: outcome, info };
    });
  }

  async put(key: string, body: PutBody, options?: PutOptions): Promise<ObjectInfo> {
    return this.write("put", key, body, options, async ({ temp, sidecar, metadata }, final) => {
      const previous = await lstat(final, { bigint: true }).then(
        (s) => (s.isFile() ? s.ino : undefined),
        () => undefined,
      );
      try {
        await rename(temp.path, final);
      } catch (error) {
        await unlink(temp.path).catch(() => {});
        await unlink(sidecar).catch(() => {});
        throw error;
      }
      if (previous !== undefined && previous !== temp.ino) {
        await unlink(sidecarPath(this.root, key, previous)).catch(() => {});
      }
      await this.syncDirectory(dirname(final));
      return {
        key,
        size: Number(temp.size),
        lastModified: new Date(Number(temp.mtimeNs / 1_000_000n)),
        etag: `${temp.ino}-${temp.mtimeNs}`,
        ...infoMetadata(metadata),
      };
    });
  }

  async head(key: string, options?: CallOptions): Promise<ObjectInfo | undefined> {
    validateKey(key);
    return this.run(key, options, async () => {
      try {
        return await this.readInfo(key);
      } catch (error) {
        throw this.failure("head", key, error);
      }
    });
  }

  async get(key: string, options?: GetOptions): Promise<Readable> {
    validateKey(key);
    return this.run(key, options, async (signal) => {
      let handle: FileHandle;
      const final = payloadPath(this.root, key);
      try {
        await this.confine("get", key, dirname(final));
        // Non-blocking, so a FIFO at the key opens at once and is then refused by its fstat.
        handle = await open(final, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      } catch (error) {
        if (isMissing(error) || errnoCode(error) === "ELOOP") throw noSuchObject(key, this.uri);
        throw this.failure("get", key, error);
      }
      try {
        const stat = await handle.stat();
        if (!stat.isFile()) throw noSuchObject(key, this.uri);
        const { start, end } = resolveRange(key, options?.range, stat.size);
        if (start === end) {
          await handle.close();
          return Readable.from([]);
        }
        const stream = handle.createReadStream({ start, end: end - 1 });
        return options?.signal === undefined ? stream : addAbortSignal(options.signal, stream);
      } catch (error) {
        await handle.close().catch(() => {});
        if (signal.aborted) throw abortError(key, signal);
        throw this.failure("get", key, error);
      }
    });
  }

  /** Keys under `dir` (whose key is `dirKey`, "" for the root) matching `prefix`, in byte order. */
  private async *walk(
    dir: string,
    dirKey: string,
    prefix: string,
    signal?: AbortSignal,
  ): AsyncGenerator<ObjectInfo> {
    if (signal?.aborted) throw abortError(prefix, signal);
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isMissing(error)) return;
      throw this.failure("list", prefix, error);
    }
    const visible = entries
      .filter((e) => !e.name.startsWith(TEMP_PREFIX) && !(dirKey === "" && e.name === META_DIR))
      .filter((e) => e.isDirectory() || e.isFile())
      .map((e) => ({ entry: e, sortKey: e.isDirectory() ? `${e.name}/` : e.name }))
      .sort((a, b) => compareKeys(a.sortKey, b.sortKey));
    for (const { entry } of visible) {
      const key = dirKey === "" ? entry.name : `${dirKey}/${entry.name}`;
      if (entry.isDirectory()) {
        const below = `${key}/`;
        if (prefix.startsWith(below) || below.startsWith(prefix)) {
          yield* this.walk(join(dir, entry.name), key, prefix, signal);
        }
      } else if (key.startsWith(prefix)) {
        if (signal?.aborted) throw abortError(prefix, signal);
        let stat: import("node:fs").BigIntStats;
        try {
          stat = await lstat(join(dir, entry.name), { bigint: true });
        } catch (error) {
          if (isMissing(error)) continue;
          throw this.failure("list", prefix, error);
        }
        yield {
          key,
          size: Number(stat.size),
          lastModified: new Date(Number(stat.mtimeMs)),
          etag: `${stat.ino}-${stat.mtimeNs}`,
          metadata: {},
        };
      }
    }
  }

  async *list(prefix: string, options?: ListOptions): AsyncIterable<ObjectInfo> {
    validateListPrefix(prefix);
    if (options?.signal?.aborted) throw abortError(prefix, options.signal);
    const slash = prefix.lastIndexOf("/");
    const startKey = slash === -1 ? "" : prefix.slice(0, slash);
    const startDir = startKey === "" ? this.root : payloadPath(this.root, startKey);
    try {
      await this.confine("list", prefix, startDir);
    } catch (error) {
      throw this.failure("list", prefix, error);
    }
    yield* this.walk(startDir, startKey, prefix, options?.signal);
  }

  /** Removes now-empty directories from `dir` up to (not including) `stop`. */
  private async prune(dir: string, stop: string): Promise<void> {
    for (let current = dir; current !== stop && current.startsWith(`${stop}/`); current = dirname(current)) {
      try {
        await rmdir(current);
      } catch {
        return;
      }
    }
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    validateKey(key);
    const final = payloadPath(this.root, key);
    await this.run(key, options, async () => {
      try {
        await this.confine("delete", key, dirname(final));
        let ino: bigint;
        try {
          const stat = await lstat(final, { bigint: true });
          if (stat.isDirectory()) return;
          ino = stat.ino;
          await unlink(final);
        } catch (error) {
          if (isMissing(error)) return;
          throw error;
        }
        const sidecar = sidecarPath(this.root, key, ino);
        await this.confine("delete", key, dirname(sidecar));
        await unlink(sidecar).catch(() => {});
        await this.syncDirectory(dirname(final)).catch(() => {});
        await this.prune(dirname(final), this.root);
        await this.prune(dirname(sidecar), join(this.root, META_DIR));
        await this.prune(join(this.root, META_DIR), this.root);
      } catch (error) {
        throw this.failure("delete", key, error);
      }
    });
  }
}

/**
 * The local filesystem store (`file:///abs/root`): one file per key under the root, written
 * through a temporary + fsync + rename; conditional create by `link(2)`, atomic on local
 * filesystems and on NFS; sha256 and user metadata in inode-bound sidecars under `.ckpt-meta/`.
 */
export function createFileStore(options: FileStoreOptions): ObjectStore {
  return new FileStore(options);
}
