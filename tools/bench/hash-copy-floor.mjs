// The work every export must do, and nothing else, arranged as well as threads allow: the source's
// SHA-256 on one thread; on another each output file read in slices and written with a background
// fdatasync every 256 MiB and an fsync at its end (the copy), while a third hashes the same slices
// out of shared memory (the shards' SHA-256). No plan, no probe, no marker: the export's floor on
// this machine, timed as a process like the export itself. Used by materialize.bench.mjs; prints
// the digests (JSON) so a run can be checked against sha256sum.
//   node tools/bench/hash-copy-floor.mjs SOURCE_FILE FROM_DIR TO_DIR
import { createHash } from "node:crypto";
import {
  closeSync,
  fdatasync,
  fsync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

const SLICE = 8 * 1024 * 1024;
const SLOTS = 4;
const FLUSH_BYTES = 256 * 1024 * 1024;

/** SHA-256 of a whole file, read in 16 MiB pieces into one buffer. */
function hashFile(path) {
  const fd = openSync(path, "r");
  const buffer = Buffer.allocUnsafe(16 * 1024 * 1024);
  const hash = createHash("sha256");
  for (;;) {
    const n = readSync(fd, buffer, 0, buffer.length, null);
    if (n === 0) break;
    hash.update(buffer.subarray(0, n));
  }
  closeSync(fd);
  return hash.digest("hex");
}

if (!isMainThread && workerData.role === "source") {
  parentPort.postMessage(hashFile(workerData.path));
} else if (!isMainThread) {
  // The shards' hasher: slot after slot, in order; `end` finishes the current file's digest.
  const ring = new Uint8Array(workerData.ring);
  let hash = createHash("sha256");
  parentPort.on("message", ({ slot, length, end }) => {
    if (length > 0) hash.update(ring.subarray(slot * SLICE, slot * SLICE + length));
    if (end) {
      parentPort.postMessage({ slot, digest: hash.digest("hex") });
      hash = createHash("sha256");
    } else parentPort.postMessage({ slot });
  });
} else {
  const [source, from, to] = process.argv.slice(2);
  const sourceHash = new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { role: "source", path: source } });
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  const ring = new SharedArrayBuffer(SLICE * SLOTS);
  const slots = new Uint8Array(ring);
  const hasher = new Worker(new URL(import.meta.url), { workerData: { role: "shards", ring } });
  const free = [];
  const waiting = [];
  const digests = [];
  hasher.on("message", ({ slot, digest }) => {
    if (digest !== undefined) digests.push(digest);
    const next = waiting.shift();
    if (next) next(slot);
    else free.push(slot);
  });
  for (let s = 0; s < SLOTS; s++) free.push(s);
  const takeSlot = () =>
    free.length > 0 ? Promise.resolve(free.pop()) : new Promise((r) => waiting.push(r));
  const promised = (call) => new Promise((resolve, reject) => call((e) => (e ? reject(e) : resolve())));
  const closing = [];
  // The output's files (a dense export has no subdirectory; the few small ones it might have do not count).
  const names = readdirSync(from)
    .filter((name) => statSync(join(from, name)).isFile())
    .sort();
  mkdirSync(to, { recursive: true });
  for (const name of names) {
    const input = openSync(join(from, name), "r");
    const output = openSync(join(to, name), "wx");
    const size = fstatSync(input).size;
    let flushing;
    let unflushed = 0;
    for (let at = 0; at < size || at === 0; ) {
      const slot = await takeSlot();
      const view = slots.subarray(slot * SLICE, (slot + 1) * SLICE);
      const n = size === 0 ? 0 : readSync(input, view, 0, Math.min(SLICE, size - at), at);
      hasher.postMessage({ slot, length: n, end: at + n >= size });
      for (let done = 0; done < n; ) done += writeSync(output, view, done, n - done, at + done);
      at += n;
      unflushed += n;
      if (unflushed >= FLUSH_BYTES && flushing === undefined) {
        unflushed = 0;
        flushing = promised((cb) => fdatasync(output, cb)).then(() => {
          flushing = undefined;
        });
      }
      if (size === 0) break;
    }
    closeSync(input);
    // The file's last flush and fsync overlap the next file's copy, as the export's do.
    closing.push(
      (async () => {
        await flushing;
        await promised((cb) => fsync(output, cb));
        closeSync(output);
      })(),
    );
  }
  await Promise.all(closing);
  const sha = await sourceHash;
  await hasher.terminate();
  console.log(
    JSON.stringify({ source: sha, files: Object.fromEntries(names.map((n, i) => [n, digests[i]])) }),
  );
}
