import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { type FileHandle, link, lstat, mkdir, open, readdir, rename, rmdir, unlink } from "node:fs/promises";
import { basename, dirname, join, relative, sep } from "node:path";
import {
  describeRefusal,
  describeShortfall,
  describeUnfinishedWrite,
  isNoSpace,
  readRegularFile,
  spaceShortfall,
} from "@ckpt/errors";
import { addAbortSignal, Readable } from "node:stream";
import { ObjectStoreError } from "../errors.js";
import { abortError, bodySize, checkedChunks, openBody } from "../internal/body.js";
import { BackgroundFlush } from "../internal/background-flush.js";
import { copyFileChecked } from "../internal/file-copy.js";
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
  temporaryName,
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

const DIRECTORY_NO_FOLLOW = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * An open directory of the store. On Linux `at(name)` names an entry through the descriptor
 * (`/proc/self/fd/<fd>/<name>`, which the kernel resolves from the open directory as the *at()
 * system calls do; Node does not expose those), so a component of `path` swapped for a link after
 * the directory was opened cannot redirect what is done there. Elsewhere it is the plain path.
 */
interface HeldDirectory {
  /** The directory's path (for messages). */
  readonly path: string;
  at(name: string): string;
  sync(): Promise<void>;
  close(): Promise<void>;
}

async function openHeld(openPath: string, path: string, flags: number): Promise<HeldDirectory> {
  const handle = await open(openPath, flags);
  const base = process.platform === "linux" ? `/proc/self/fd/${handle.fd}` : path;
  return {
    path,
    at: (name) => join(base, name),
    sync: () => handle.sync(),
    close: () => handle.close(),
  };
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
   * Opens `dir` (at or below the root) one component at a time, each with O_NOFOLLOW|O_DIRECTORY
   * relative to the component before it, creating missing ones when `create`. A component below the
   * root that is a symbolic link is refused: a link there (a prefix or `.ckpt-meta` swapped for one)
   * could lead anywhere (issue 16). The root itself may be a link. Undefined when a component is
   * missing and `create` is false. Everything done in the directory afterwards goes through the
   * open descriptor ({@link HeldDirectory.at}), so a link swapped in after this check cannot
   * redirect it.
   */
  private async holdDirectory(
    action: string,
    key: string,
    dir: string,
    create: boolean,
  ): Promise<HeldDirectory | undefined> {
    const names = relative(this.root, dir)
      .split(sep)
      .filter((name) => name !== "");
    let held: HeldDirectory;
    try {
      if (create) await mkdir(this.root, { recursive: true });
      held = await openHeld(this.root, this.root, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      if (isMissing(error) && !create) return undefined;
      throw error;
    }
    try {
      for (const name of names) {
        const next = join(held.path, name);
        if (create) {
          await mkdir(held.at(name)).catch((error: unknown) => {
            if (errnoCode(error) !== "EEXIST") throw error;
          });
        }
        let child: HeldDirectory;
        try {
          child = await openHeld(held.at(name), next, DIRECTORY_NO_FOLLOW);
        } catch (error) {
          // O_NOFOLLOW|O_DIRECTORY on a link fails ELOOP or ENOTDIR (Linux): tell a link from a file.
          const code = errnoCode(error);
          const linked =
            (code === "ELOOP" || code === "ENOTDIR") &&
            (await lstat(held.at(name)).then(
              (stats) => stats.isSymbolicLink(),
              () => false,
            ));
          if (linked) {
            throw new ObjectStoreError(
              "STORE_UNSAFE_PATH",
              `${action} ${key} in ${this.uri}: ${next} is a symbolic link; a file store never follows a link ` +
                "below its root, which could lead outside it. Replace the link with a real directory, or point the store at the directory itself.",
              { kind: "refused", subject: key },
            );
          }
          if (isMissing(error) && !create) {
            await held.close();
            return undefined;
          }
          throw error;
        }
        await held.close();
        held = child;
      }
      return held;
    } catch (error) {
      await held.close().catch(() => {});
      throw error;
    }
  }

  /** Refuses `dir` when a component below the root is a symbolic link ({@link holdDirectory}). */
  private async confine(action: string, key: string, dir: string): Promise<void> {
    await (await this.holdDirectory(action, key, dir, false))?.close();
  }

  /**
   * Holds `dir` (created as needed), then runs `attempt` in it, repeating when a concurrent
   * delete's pruning removed the directory in between (the attempt then fails with ENOENT). On
   * success the caller owns the held directory.
   */
  private async inDirectory<T>(
    action: string,
    key: string,
    dir: string,
    attempt: (held: HeldDirectory) => Promise<T>,
  ): Promise<{ held: HeldDirectory; value: T }> {
    for (let round = 1; ; round++) {
      let held: HeldDirectory | undefined;
      try {
        held = (await this.holdDirectory(action, key, dir, true))!;
        return { held, value: await attempt(held) };
      } catch (error) {
        await held?.close().catch(() => {});
        if (errnoCode(error) !== "ENOENT" || round >= MAX_DIRECTORY_RACES) throw error;
      }
    }
  }

  /**
   * Refuses early a write whose size is known to exceed the free space of the store's filesystem
   * (statfs of the root, or of its nearest existing parent before the first write).
   */
  private async checkRoom(key: string, size: number): Promise<void> {
    const shortfall = await spaceShortfall(this.root, size);
    if (shortfall !== undefined) throw noSpace("put", key, this.uri, describeShortfall(shortfall));
  }

  /**
   * Writes the body to a fresh temporary in `final`'s directory, fsyncs it and checks size and
   * digest. Returns the directory held open: the caller commits through it and closes it.
   */
  private async writeTemp(
    key: string,
    final: string,
    body: PutBody,
    options: PutOptions | undefined,
    signal: AbortSignal,
  ): Promise<{ dir: HeldDirectory; temp: WrittenTemp }> {
    // A file is copied by copyFileChecked; other bodies arrive as streams.
    let source: { file: string; size: number } | { stream: Readable; size: number | undefined };
    if (!(body instanceof Uint8Array) && "path" in body) {
      source = { file: body.path, size: (await bodySize(body, key))! };
    } else {
      const opened = await openBody(key, body);
      source = { stream: addAbortSignal(signal, opened.stream), size: opened.size };
    }
    const { size } = source;
    const stream = "stream" in source ? source.stream : undefined;
    const name = temporaryName(randomBytes(8).toString("hex"));
    let dir: HeldDirectory;
    let handle: FileHandle;
    try {
      // An unsized stream cannot be checked ahead; a full disk part-way is mapped below.
      if (size !== undefined) await this.checkRoom(key, size);
      ({ held: dir, value: handle } = await this.inDirectory("write", key, dirname(final), (held) =>
        open(held.at(name), "wx", 0o644),
      ));
    } catch (error) {
      // Release a stream's source (a caller's stream may hold a descriptor) when refusing.
      stream?.destroy();
      throw error;
    }
    const path = dir.at(name);
    let written = 0;
    const flush = new BackgroundFlush(() => handle.datasync());
    const onWritten = (reached: number) => {
      written = reached;
      flush.written(reached);
      options?.onProgress?.(reached);
    };
    try {
      if ("file" in source) {
        await copyFileChecked(key, source.file, source.size, options?.sha256, handle, signal, onWritten);
      } else {
        await this.writeStream(key, source.stream, size, options?.sha256, handle, onWritten);
      }
      await flush.settle();
      await handle.sync();
      const stat = await handle.stat({ bigint: true });
      await handle.close();
      return { dir, temp: { path, ino: stat.ino, size: stat.size, mtimeNs: stat.mtimeNs } };
    } catch (error) {
      stream?.destroy();
      await flush.settle().catch(() => {});
      await handle.close().catch(() => {});
      await unlink(path).catch(() => {});
      await dir.close().catch(() => {});
      if (signal.aborted) throw abortError(key, signal);
      if (isNoSpace(error)) {
        throw noSpace(
          "write",
          key,
          this.uri,
          `${errnoCode(error)}: ${describeUnfinishedWrite(final, size === undefined ? undefined : size - written)}`,
          error,
        );
      }
      throw error;
    }
  }

  /**
   * Writes a stream body to `handle`, checked by checkedChunks. One write in flight while the next
   * chunk is read and hashed: hashing runs on this thread and the write on libuv's pool, so
   * overlapping them keeps the hash off the put's critical path. Returns once every write is done.
   */
  private async writeStream(
    key: string,
    stream: Readable,
    size: number | undefined,
    sha256: string | undefined,
    handle: FileHandle,
    onWritten: (bytes: number) => void,
  ): Promise<void> {
    let writing: Promise<unknown> = Promise.resolve();
    let written = 0;
    try {
      for await (const bytes of checkedChunks(key, stream, size, sha256)) {
        await writing;
        written += bytes.byteLength;
        const reached = written;
        writing = handle.write(bytes).then(() => onWritten(reached));
      }
      await writing;
    } finally {
      await writing.catch(() => {});
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
    const tempName = temporaryName(randomBytes(8).toString("hex"));
    const { held: dir } = await this.inDirectory("write", key, dirname(path), async (held) => {
      const handle = await open(held.at(tempName), "wx", 0o644);
      try {
        await handle.writeFile(`${JSON.stringify(sidecar)}\n`);
        await handle.sync();
      } catch (error) {
        // A full disk fails here too: leave no temporary behind.
        await unlink(held.at(tempName)).catch(() => {});
        throw error;
      } finally {
        await handle.close();
      }
    });
    try {
      await rename(dir.at(tempName), dir.at(basename(path)));
    } catch (error) {
      await unlink(dir.at(tempName)).catch(() => {});
      throw error;
    } finally {
      await dir.close();
    }
    return path;
  }

  /** Removes the sidecar of payload inode `ino` of `key`, if any, through its held directory. */
  private async unlinkSidecar(action: string, key: string, ino: bigint): Promise<void> {
    const path = sidecarPath(this.root, key, ino);
    const dir = await this.holdDirectory(action, key, dirname(path), false);
    if (dir === undefined) return;
    await unlink(dir.at(basename(path)))
      .catch(() => {})
      .finally(() => dir.close());
  }

  /**
   * The parsed sidecar of payload inode `ino`, or undefined when there is none or it is not JSON.
   * Read through the guarded open: a FIFO, device or link planted there is refused, never waited on.
   */
  private async readSidecar(key: string, ino: bigint): Promise<unknown> {
    const path = sidecarPath(this.root, key, ino);
    const dir = await this.holdDirectory("read metadata of", key, dirname(path), false);
    if (dir === undefined) return undefined;
    const read = await readRegularFile(dir.at(basename(path)), {
      maxBytes: MAX_SIDECAR_BYTES,
      noFollow: true,
    }).finally(() => dir.close());
    if (!read.ok) {
      if (read.reason === "missing") return undefined;
      throw new ObjectStoreError(
        "STORE_UNSAFE_PATH",
        `read metadata of ${key} in ${this.uri}: ${describeRefusal({ ...read, path })}; this store writes its sidecars as small regular files. Remove it.`,
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
    const dir = await this.holdDirectory("read", key, dirname(final), false);
    if (dir === undefined) return undefined;
    let stat: Awaited<ReturnType<typeof lstat>> & { ino: bigint; size: bigint; mtimeNs: bigint };
    try {
      stat = await lstat(dir.at(basename(final)), { bigint: true });
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    } finally {
      await dir.close();
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
    commit: (staged: Staged, dir: HeldDirectory, name: string) => Promise<T>,
  ): Promise<T> {
    validateKey(key);
    const metadata = putMetadata(key, options);
    const final = payloadPath(this.root, key);
    return this.run(key, options, async (signal) => {
      let dir: HeldDirectory | undefined;
      try {
        const written = await this.writeTemp(key, final, body, options, signal);
        dir = written.dir;
        const { temp } = written;
        const sidecar = await this.writeSidecar(key, temp, metadata).catch(async (error: unknown) => {
          await unlink(temp.path).catch(() => {});
          throw error;
        });
        return await commit({ temp, sidecar, metadata }, dir, basename(final));
      } catch (error) {
        if (signal.aborted) throw abortError(key, signal);
        throw this.failure(action, key, error);
      } finally {
        await dir?.close().catch(() => {});
      }
    });
  }

  async createIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<CreateResult> {
    return this.write("create", key, body, options, async ({ temp, sidecar }, dir, name) => {
      const final = dir.at(name);
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
      if (outcome === "created") await dir.sync();
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
    return this.write("put", key, body, options, async ({ temp, sidecar, metadata }, dir, name) => {
      const final = dir.at(name);
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
        await this.unlinkSidecar("put", key, previous).catch(() => {});
      }
      await dir.sync();
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
        const dir = await this.holdDirectory("get", key, dirname(final), false);
        if (dir === undefined) throw noSuchObject(key, this.uri);
        // Non-blocking, so a FIFO at the key opens at once and is then refused by its fstat.
        handle = await open(
          dir.at(basename(final)),
          constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        ).finally(() => dir.close());
      } catch (error) {
        if (error instanceof ObjectStoreError) throw error;
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
        if (options?.signal === undefined) return stream;
        // An abort before the consumer reads (its own listener then sees the error) must not
        // crash the process as an unhandled 'error' event.
        stream.on("error", () => {});
        return addAbortSignal(options.signal, stream);
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
        const dir = await this.holdDirectory("delete", key, dirname(final), false);
        if (dir === undefined) return;
        let ino: bigint;
        try {
          const stat = await lstat(dir.at(basename(final)), { bigint: true });
          if (stat.isDirectory()) return;
          ino = stat.ino;
          await unlink(dir.at(basename(final)));
          await dir.sync().catch(() => {});
        } catch (error) {
          if (isMissing(error)) return;
          throw error;
        } finally {
          await dir.close();
        }
        await this.unlinkSidecar("delete", key, ino);
        const sidecar = sidecarPath(this.root, key, ino);
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
