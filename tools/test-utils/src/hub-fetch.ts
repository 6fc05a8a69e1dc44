import { readFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * A `fetch` that serves a local directory the way the Hugging Face Hub serves a repository (HEAD,
 * ranged GET with Content-Range, ETag), so @huggingface/hub's own readers (for example
 * `parseSafetensorsMetadata`) can read files ckpt wrote, as an independent check.
 */
export function localHubFetch(root: string): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    // /<owner>/<repo>/(resolve|raw)/<revision>/<path...>
    const relative = url.pathname.split("/").slice(5).map(decodeURIComponent).join("/");
    let bytes: Buffer;
    try {
      bytes = await readFile(join(root, relative));
    } catch {
      return new Response(null, { status: 404, headers: { "X-Error-Code": "EntryNotFound" } });
    }
    if (init?.method === "HEAD") return new Response(null, { status: 200 });
    const range = /^bytes=(\d+)-(\d*)$/.exec(new Headers(init?.headers).get("Range") ?? "");
    if (range) {
      const start = Number(range[1]);
      const end = Math.min(range[2] ? Number(range[2]) : bytes.length - 1, bytes.length - 1);
      return new Response(bytes.subarray(start, end + 1), {
        status: 206,
        headers: { "Content-Range": `bytes ${start}-${end}/${bytes.length}`, ETag: '"local"' },
      });
    }
    return new Response(bytes, { status: 200, headers: { ETag: '"local"' } });
  }) as typeof fetch;
}
