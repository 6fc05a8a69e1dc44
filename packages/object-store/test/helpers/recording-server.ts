import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the loopback server received it. */
export interface RecordedRequest {
  readonly method: string;
  /** Path and query exactly as sent. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

export type Responder = (
  request: RecordedRequest,
  res: ServerResponse,
  raw: IncomingMessage,
) => void | Promise<void>;

export interface RecordingServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * A loopback HTTP server that records every request (with its full body) and lets `respond`
 * answer it. For asserting what a client sends, and for answers no real server gives on demand.
 */
export async function startRecordingServer(respond: Responder): Promise<RecordingServer> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const recorded: RecordedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: { ...req.headers },
        body: Buffer.concat(chunks),
      };
      requests.push(recorded);
      Promise.resolve(respond(recorded, res, req)).catch((error: unknown) => {
        res.statusCode = 500;
        res.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Send an S3-style XML error document. */
export function sendXmlError(res: ServerResponse, status: number, code: string): void {
  const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message></Message></Error>`;
  res.writeHead(status, { "content-type": "application/xml", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
