import { createHash } from "node:crypto";
import { createServer, type Socket } from "node:net";
import { Readable } from "node:stream";
import { type ObjectStore, openStore } from "@ckpt/object-store";
import { TrainerBindingError } from "../errors.js";
import { toWireError } from "../protocol/connection.js";
import { listenOwnerOnly } from "../serve.js";
import {
  DATA_REQUEST,
  type DataRequest,
  frameHeader,
  MAX_FRAME_BYTES,
  MAX_HEADER_BYTES,
} from "./messages.js";
import { ByteReader } from "./reader.js";

export interface DataServerOptions {
  /** The credentials file of the store (else the environment's, as the manager does). */
  readonly credentials?: string;
  readonly log: (line: string) => void;
}

function badRequest(message: string): TrainerBindingError {
  return new TrainerBindingError("DATA_BAD_REQUEST", message, { kind: "input" });
}

/** Writes and waits for the socket to take it (backpressure: a slow reader slows the GET). */
function write(socket: Socket, bytes: Uint8Array | string): Promise<void> {
  return new Promise((resolve, reject) =>
    socket.write(bytes, (error) => (error ? reject(error) : resolve())),
  );
}

/** The store holding an object and the object's key in it: one store per directory URI. */
class Stores {
  private readonly open = new Map<string, Promise<ObjectStore>>();
  constructor(private readonly credentials: string | undefined) {}

  async of(uri: string): Promise<{ store: ObjectStore; key: string }> {
    const cut = uri.lastIndexOf("/");
    const dir = uri.slice(0, cut);
    let store = this.open.get(dir);
    if (store === undefined) {
      store = openStore(dir, this.credentials === undefined ? {} : { credentials: this.credentials });
      this.open.set(dir, store);
    }
    return { store: await store, key: uri.slice(cut + 1) };
  }
}

/**
 * The body of a `put` as the frames arrive, hashed on the way; `done` once the end frame was read
 * (the connection is then in step for the next request).
 */
function framedBody(reader: ByteReader, what: string) {
  const hash = createHash("sha256");
  // Shared by every reader of the body (the upload, then a drain after a refusal): `left` is
  // what remains of the current frame.
  const state = { size: 0, done: false, sha256: "", left: 0 };
  async function* chunks(): AsyncGenerator<Buffer> {
    while (!state.done) {
      if (state.left === 0) {
        const header = await reader.exact(4);
        if (header === undefined) throw badRequest(`put ${what}: the connection ended inside the body`);
        const length = header.readUInt32BE(0);
        if (length > MAX_FRAME_BYTES)
          throw badRequest(`put ${what}: a frame of ${length} bytes (at most ${MAX_FRAME_BYTES})`);
        if (length === 0) {
          state.done = true;
          state.sha256 = hash.digest("hex");
          return;
        }
        state.left = length;
      }
      const piece = await reader.some(state.left);
      if (piece.byteLength === 0) throw badRequest(`put ${what}: the connection ended inside a frame`);
      hash.update(piece);
      state.size += piece.byteLength;
      state.left -= piece.byteLength;
      yield Buffer.from(piece);
    }
  }
  return { state, chunks };
}

async function handle(
  request: DataRequest,
  reader: ByteReader,
  socket: Socket,
  stores: Stores,
): Promise<unknown> {
  const { store, key } = await stores.of(request.uri);
  if (request.op === "put") {
    const body = framedBody(reader, request.uri);
    try {
      await store.put(key, { stream: Readable.from(body.chunks()) });
    } finally {
      // A refused upload still reads the rest of the body: the next request starts after it.
      if (!body.state.done) for await (const _ of body.chunks());
    }
    return { size: body.state.size, sha256: body.state.sha256 };
  }
  if (request.op === "head") {
    const info = await store.head(key);
    if (info === undefined) {
      throw new TrainerBindingError("DATA_NOT_FOUND", `head ${request.uri}: there is no such object`, {
        kind: "refused",
      });
    }
    return { size: info.size };
  }
  if (request.op === "digest") {
    const hash = createHash("sha256");
    let size = 0;
    for await (const chunk of await store.get(key)) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).byteLength;
    }
    return { size, sha256: hash.digest("hex") };
  }
  let size = 0;
  try {
    const range = { start: request.start, ...(request.end === undefined ? {} : { end: request.end }) };
    const body: Readable = await store.get(key, { range });
    for await (const chunk of body) {
      const bytes = chunk as Buffer;
      for (let at = 0; at < bytes.byteLength; at += MAX_FRAME_BYTES) {
        const piece = bytes.subarray(at, at + MAX_FRAME_BYTES);
        await write(socket, frameHeader(piece.byteLength));
        await write(socket, piece);
        size += piece.byteLength;
      }
    }
  } finally {
    await write(socket, frameHeader(0));
  }
  return { size };
}

/** Serves one connection's requests in order until it closes. */
async function serveDataConnection(socket: Socket, stores: Stores): Promise<void> {
  const reader = new ByteReader(socket);
  for (;;) {
    const line = await reader.line(MAX_HEADER_BYTES);
    if (line === undefined) return;
    let answer: string;
    let keep = true;
    try {
      if (line === "too long") throw badRequest(`a header line longer than ${MAX_HEADER_BYTES} bytes`);
      let raw: unknown;
      try {
        raw = JSON.parse(line);
      } catch {
        throw badRequest(`a header that is not JSON: ${line.slice(0, 80)}`);
      }
      const parsed = DATA_REQUEST.safeParse(raw);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw badRequest(`bad request ${line.slice(0, 200)}: ${issue?.path.join(".")} ${issue?.message}`);
      }
      answer = JSON.stringify({ ok: true, result: await handle(parsed.data, reader, socket, stores) });
    } catch (error) {
      // A malformed request leaves the stream out of step: answer, then close.
      keep = !(error instanceof TrainerBindingError && error.code === "DATA_BAD_REQUEST");
      const { source: _source, ...wire } = toWireError(error);
      answer = JSON.stringify({ ok: false, error: wire });
    }
    await write(socket, `${answer}\n`);
    if (!keep) {
      socket.end();
      return;
    }
  }
}

/**
 * `ckpt-trainer data --socket PATH`: one rank's (or one host's) data process. It serves any number
 * of connections at once (one per DCP writer thread) on an owner-only unix socket and ends when
 * `until` resolves (its parent, the rank, closed its stdin: a SIGKILLed rank leaves nothing behind).
 */
export async function serveData(
  path: string,
  until: Promise<void>,
  options: DataServerOptions,
): Promise<void> {
  const stores = new Stores(options.credentials);
  const server = createServer((socket) => {
    socket.on("error", () => {});
    serveDataConnection(socket, stores).catch((error: unknown) => {
      options.log(`data connection failed: ${toWireError(error).message}`);
      socket.destroy();
    });
  });
  const close = await listenOwnerOnly(server, path);
  await until;
  await close();
}
