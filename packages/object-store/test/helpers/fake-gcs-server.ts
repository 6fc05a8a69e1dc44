import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CRC32C } from "@google-cloud/storage";
import type { RecordedRequest } from "./recording-server.js";

interface StoredObject {
  readonly data: Buffer;
  readonly generation: number;
  readonly contentType: string;
  readonly metadata: Record<string, string>;
  readonly updated: string;
}

interface UploadSession {
  readonly bucket: string;
  readonly name: string;
  readonly contentType: string;
  readonly metadata: Record<string, string>;
  readonly ifGenerationMatch: string | null;
  readonly chunks: Buffer[];
  received: number;
}

export interface FakeGcsServer {
  /** `http://127.0.0.1:<port>`: pass as `apiEndpoint`. */
  readonly url: string;
  /** Every request, with its body, in arrival order. */
  readonly requests: RecordedRequest[];
  /** bucket → object name → object. Buckets are created on first use. */
  readonly objects: Map<string, Map<string, StoredObject>>;
  /** Answer the next `count` requests with `status` (a JSON API error), for retry tests. */
  failNext(count: number, status: number): void;
  /** Answer 412 to creates with ifGenerationMatch=0 even when the object is absent (a lying proxy). */
  lie412(enabled: boolean): void;
  close(): Promise<void>;
}

const crc32c = (data: Buffer) => {
  const crc = new CRC32C();
  crc.update(data);
  return crc.toString();
};
const md5 = (data: Buffer) => createHash("md5").update(data).digest("base64");

function resource(bucket: string, name: string, o: StoredObject) {
  return {
    kind: "storage#object",
    id: `${bucket}/${name}/${o.generation}`,
    name,
    bucket,
    generation: String(o.generation),
    metageneration: "1",
    contentType: o.contentType,
    size: String(o.data.length),
    md5Hash: md5(o.data),
    crc32c: crc32c(o.data),
    etag: `CL${o.generation}=`,
    updated: o.updated,
    metadata: o.metadata,
  };
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, reason: string, message: string): void {
  sendJson(res, status, {
    error: { code: status, message, errors: [{ reason, message, domain: "global" }] },
  });
}

/** Split a multipart/related body into its parts' bodies. */
function multipartParts(body: Buffer, contentType: string): Buffer[] {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1];
  if (boundary === undefined) return [];
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: Buffer[] = [];
  let at = body.indexOf(delimiter);
  while (at !== -1) {
    const next = body.indexOf(delimiter, at + delimiter.length);
    if (next === -1) break;
    const part = body.subarray(at + delimiter.length, next);
    const headerEnd = part.indexOf("\r\n\r\n");
    if (headerEnd !== -1) parts.push(part.subarray(headerEnd + 4, part.length - 2));
    at = next;
  }
  return parts;
}

/**
 * A loopback HTTP server that answers the subset of the GCS JSON API that @google-cloud/storage
 * uses for the ckpt store: multipart and resumable uploads (with `ifGenerationMatch`), object
 * metadata, media download with Range, listing with page tokens, and delete. Objects live in
 * memory with generations; a failed precondition is a 412, as on GCS. Every request is recorded.
 */
export async function startFakeGcsServer(): Promise<FakeGcsServer> {
  const requests: RecordedRequest[] = [];
  const objects = new Map<string, Map<string, StoredObject>>();
  const sessions = new Map<string, UploadSession>();
  let generation = 1_700_000_000_000_000;
  let faults: { count: number; status: number } = { count: 0, status: 0 };
  let lying = false;
  let sessionCounter = 0;

  const bucketOf = (bucket: string) => {
    let map = objects.get(bucket);
    if (map === undefined) {
      map = new Map();
      objects.set(bucket, map);
    }
    return map;
  };

  /** Store an object unless the precondition fails; returns the HTTP answer. */
  const commit = (
    res: ServerResponse,
    bucket: string,
    name: string,
    data: Buffer,
    contentType: string,
    metadata: Record<string, string>,
    ifGenerationMatch: string | null,
  ) => {
    const map = bucketOf(bucket);
    const existing = map.get(name);
    if (ifGenerationMatch !== null) {
      const current = existing === undefined ? "0" : String(existing.generation);
      if (current !== ifGenerationMatch || (lying && ifGenerationMatch === "0")) {
        return sendError(
          res,
          412,
          "conditionNotMet",
          "At least one of the pre-conditions you specified did not hold.",
        );
      }
    }
    const stored: StoredObject = {
      data,
      generation: ++generation,
      contentType,
      metadata,
      updated: new Date().toISOString(),
    };
    map.set(name, stored);
    sendJson(res, 200, resource(bucket, name, stored));
  };

  const handle = (req: IncomingMessage, body: Buffer, res: ServerResponse, base: string) => {
    const url = new URL(req.url ?? "/", base);
    const q = url.searchParams;
    if (faults.count > 0) {
      faults.count--;
      return sendError(res, faults.status, "backendError", "injected failure");
    }
    let m = /^\/upload\/storage\/v1\/b\/([^/]+)\/o$/.exec(url.pathname);
    if (m !== null && req.method === "POST" && q.get("uploadType") === "multipart") {
      const bucket = decodeURIComponent(m[1]!);
      const [meta, media] = multipartParts(body, String(req.headers["content-type"]));
      if (meta === undefined || media === undefined)
        return sendError(res, 400, "invalid", "bad multipart body");
      const json = JSON.parse(meta.toString("utf8")) as {
        name?: string;
        contentType?: string;
        metadata?: Record<string, string>;
      };
      const name = q.get("name") ?? json.name ?? "";
      return commit(
        res,
        bucket,
        name,
        Buffer.from(media),
        json.contentType ?? "application/octet-stream",
        json.metadata ?? {},
        q.get("ifGenerationMatch"),
      );
    }
    if (m !== null && req.method === "POST" && q.get("uploadType") === "resumable") {
      const json = (body.length === 0 ? {} : JSON.parse(body.toString("utf8"))) as {
        name?: string;
        contentType?: string;
        metadata?: Record<string, string>;
      };
      const id = `session-${++sessionCounter}`;
      sessions.set(id, {
        bucket: decodeURIComponent(m[1]!),
        name: q.get("name") ?? json.name ?? "",
        contentType: String(
          req.headers["x-upload-content-type"] ?? json.contentType ?? "application/octet-stream",
        ),
        metadata: json.metadata ?? {},
        ifGenerationMatch: q.get("ifGenerationMatch"),
        chunks: [],
        received: 0,
      });
      const location = `${base}${url.pathname}?uploadType=resumable&upload_id=${id}`;
      res.writeHead(200, { location, "content-length": 0 });
      return res.end();
    }
    if (m !== null && req.method === "PUT" && q.get("upload_id") !== null) {
      const session = sessions.get(q.get("upload_id")!);
      if (session === undefined) return sendError(res, 404, "notFound", "no such upload session");
      const range = /^bytes (\d+|\*)-(\d+|\*)\/(\d+|\*)$/.exec(String(req.headers["content-range"] ?? ""));
      if (range === null) return sendError(res, 400, "invalid", "bad Content-Range");
      if (range[1] !== "*") {
        const start = Number(range[1]);
        if (start !== session.received) return sendError(res, 400, "invalid", "non-contiguous chunk");
        session.chunks.push(body);
        session.received += body.length;
      }
      const total = range[3];
      const final = total !== "*" ? session.received === Number(total) : range[2] === "*" && range[1] !== "*";
      if (!final) {
        const headers: Record<string, string> = { "content-length": "0" };
        if (session.received > 0) headers.range = `bytes=0-${session.received - 1}`;
        res.writeHead(308, headers);
        return res.end();
      }
      sessions.delete(q.get("upload_id")!);
      return commit(
        res,
        session.bucket,
        session.name,
        Buffer.concat(session.chunks),
        session.contentType,
        session.metadata,
        session.ifGenerationMatch,
      );
    }
    m = /^\/storage\/v1\/b\/([^/]+)\/o\/(.+)$/.exec(url.pathname);
    if (m !== null) {
      const bucket = decodeURIComponent(m[1]!);
      const name = decodeURIComponent(m[2]!);
      const object = bucketOf(bucket).get(name);
      if (req.method === "DELETE") {
        if (object === undefined) return sendError(res, 404, "notFound", `No such object: ${bucket}/${name}`);
        bucketOf(bucket).delete(name);
        res.writeHead(204);
        return res.end();
      }
      if (req.method !== "GET") return sendError(res, 405, "methodNotAllowed", "method not allowed");
      if (object === undefined) return sendError(res, 404, "notFound", `No such object: ${bucket}/${name}`);
      if (q.get("alt") !== "media") return sendJson(res, 200, resource(bucket, name, object));
      const headers: Record<string, string> = {
        "content-type": object.contentType,
        "x-goog-generation": String(object.generation),
        "x-goog-stored-content-encoding": "identity",
        "x-goog-hash": `crc32c=${crc32c(object.data)},md5=${md5(object.data)}`,
      };
      const rangeHeader = req.headers.range;
      if (rangeHeader === undefined) {
        res.writeHead(200, { ...headers, "content-length": object.data.length });
        return res.end(object.data);
      }
      const r = /^bytes=(\d+)-(\d*)$/.exec(rangeHeader);
      if (r === null) return sendError(res, 400, "invalid", "bad Range");
      const start = Number(r[1]);
      const end = r[2] === "" ? object.data.length - 1 : Math.min(Number(r[2]), object.data.length - 1);
      if (start >= object.data.length) {
        return sendError(
          res,
          416,
          "requestedRangeNotSatisfiable",
          "The requested range cannot be satisfied.",
        );
      }
      const slice = object.data.subarray(start, end + 1);
      delete headers["x-goog-hash"];
      res.writeHead(206, {
        ...headers,
        "content-length": slice.length,
        "content-range": `bytes ${start}-${end}/${object.data.length}`,
      });
      return res.end(slice);
    }
    m = /^\/storage\/v1\/b\/([^/]+)\/o$/.exec(url.pathname);
    if (m !== null && req.method === "GET") {
      const bucket = decodeURIComponent(m[1]!);
      const prefix = q.get("prefix") ?? "";
      const names = [...bucketOf(bucket).keys()]
        .filter((n) => n.startsWith(prefix))
        .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      const after = q.get("pageToken");
      const from =
        after === null ? 0 : names.findIndex((n) => Buffer.compare(Buffer.from(n), Buffer.from(after)) > 0);
      const pageSize = Math.min(Number(q.get("maxResults") ?? 1000), 1000);
      const page = from === -1 ? [] : names.slice(from, from + pageSize);
      const more = from !== -1 && from + pageSize < names.length;
      return sendJson(res, 200, {
        kind: "storage#objects",
        items: page.map((n) => resource(bucket, n, bucketOf(bucket).get(n)!)),
        ...(more ? { nextPageToken: page.at(-1) } : {}),
      });
    }
    sendError(res, 400, "unsupported", `fake GCS does not implement ${req.method} ${url.pathname}`);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers }, body });
      handle(req, body, res, `http://${req.headers.host}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    objects,
    failNext(count, status) {
      faults = { count, status };
    },
    lie412(enabled) {
      lying = enabled;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
