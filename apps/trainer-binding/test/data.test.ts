// The data process (`ckpt-trainer data`) protocol: frames in, object stored with its digest;
// ranges out; a refused upload keeps the connection in step; a malformed request closes it.
import { createHash, randomBytes } from "node:crypto";
import { readFile, stat, writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { testdir } from "@ckpt/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { frameHeader } from "../src/data/messages.js";
import { ByteReader } from "../src/data/reader.js";
import { serveData } from "../src/data/server.js";

let stop: () => void = () => {};
let served: Promise<void> = Promise.resolve();
afterEach(async () => {
  stop();
  await served;
});

async function start(): Promise<{ socketPath: string; root: string }> {
  const dir = await testdir("ckpt-data-");
  const socketPath = join(dir, "data.sock");
  const until = new Promise<void>((resolve) => {
    stop = resolve;
  });
  served = serveData(socketPath, until, { log: () => {} });
  for (let i = 0; i < 200; i++) {
    if (
      await stat(socketPath).then(
        () => true,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 10));
  }
  return { socketPath, root: dir };
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

class Client {
  readonly reader: ByteReader;
  constructor(readonly socket: Socket) {
    this.reader = new ByteReader(socket);
  }
  static async open(path: string): Promise<Client> {
    const socket = connect(path);
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    return new Client(socket);
  }
  send(bytes: Uint8Array | string) {
    this.socket.write(bytes);
  }
  header(request: Record<string, unknown>) {
    this.send(`${JSON.stringify(request)}\n`);
  }
  frames(...pieces: Buffer[]) {
    for (const p of pieces) {
      this.send(frameHeader(p.byteLength));
      this.send(p);
    }
    this.send(frameHeader(0));
  }
  async result(): Promise<{ ok: boolean; result?: Record<string, unknown>; error?: { code: string } }> {
    return JSON.parse((await this.reader.line(1 << 20)) as string);
  }
  async body(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for (;;) {
      const length = (await this.reader.exact(4))!.readUInt32BE(0);
      if (length === 0) return Buffer.concat(parts);
      parts.push(Buffer.from((await this.reader.exact(length))!));
    }
  }
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("ckpt-trainer data", () => {
  it("its socket appears only once it listens (bound as <socket>~, then linked), past a leftover <socket>~", async () => {
    const dir = await testdir("ckpt-data-");
    const socketPath = join(dir, "data.sock");
    // A process killed between its bind and its link leaves `<socket>~` behind.
    await writeFile(`${socketPath}~`, "");
    const until = new Promise<void>((resolve) => {
      stop = resolve;
    });
    served = serveData(socketPath, until, { log: () => {} });
    while (!(await exists(socketPath))) await new Promise((r) => setTimeout(r, 1));
    // Connected at first sight of the path: never refused between bind and listen.
    const client = await Client.open(socketPath);
    client.socket.end();
    expect(await exists(`${socketPath}~`)).toBe(false);
  });

  it("stores framed bytes with their size and digest, serves ranges, digests and heads, several requests per connection", async () => {
    const { socketPath, root } = await start();
    const uri = `file://${root}/store/model/__0_0.distcp`;
    const pieces = [randomBytes(1000), randomBytes(70_000), randomBytes(3)];
    const all = Buffer.concat(pieces);
    const client = await Client.open(socketPath);
    client.header({ op: "put", uri });
    client.frames(...pieces);
    expect(await client.result()).toEqual({ ok: true, result: { size: all.length, sha256: sha(all) } });
    expect((await readFile(join(root, "store/model/__0_0.distcp"))).equals(all)).toBe(true);
    client.header({ op: "get", uri, start: 999, end: 1005 });
    expect((await client.body()).equals(all.subarray(999, 1005))).toBe(true);
    expect(await client.result()).toEqual({ ok: true, result: { size: 6 } });
    client.header({ op: "digest", uri });
    expect(await client.result()).toEqual({ ok: true, result: { size: all.length, sha256: sha(all) } });
    client.header({ op: "head", uri });
    expect(await client.result()).toEqual({ ok: true, result: { size: all.length } });
    client.header({ op: "head", uri: `${uri}.missing` });
    expect(await client.result()).toMatchObject({ ok: false, error: { code: "DATA_NOT_FOUND" } });
    client.socket.end();
  });

  it("an upload cut short stores nothing and is refused with a code", async () => {
    const { socketPath, root } = await start();
    const uri = `file://${root}/store/model/__1_0.distcp`;
    const client = await Client.open(socketPath);
    client.header({ op: "put", uri });
    client.send(frameHeader(100));
    client.send(randomBytes(10));
    client.socket.end();
    await new Promise((r) => client.socket.once("close", r));
    await expect(stat(join(root, "store/model/__1_0.distcp"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a store refusal answers after the whole body; the connection stays in step", async () => {
    const { socketPath, root } = await start();
    const client = await Client.open(socketPath);
    // A get of a missing object: an empty body, then the store's code.
    client.header({ op: "get", uri: `file://${root}/store/none`, start: 0 });
    expect((await client.body()).byteLength).toBe(0);
    expect(await client.result()).toMatchObject({ ok: false, error: { code: "STORE_NOT_FOUND" } });
    const uri = `file://${root}/store/ok`;
    client.header({ op: "put", uri });
    client.frames(Buffer.from("next"));
    expect(await client.result()).toMatchObject({ ok: true, result: { size: 4 } });
    client.socket.end();
  });

  it("a malformed request is refused by code and the connection closed", async () => {
    const { socketPath } = await start();
    for (const bad of ['{"op":"put","uri":"s3://b/dir/"}', '{"op":"rm","uri":"s3://b/x"}', "not json"]) {
      const client = await Client.open(socketPath);
      client.send(`${bad}\n`);
      expect(await client.result()).toMatchObject({ ok: false, error: { code: "DATA_BAD_REQUEST" } });
      expect(await client.reader.line(100)).toBeUndefined();
    }
  });
});
