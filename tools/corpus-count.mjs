// The hostile-input corpus as one list (issue 16): counts the cases of every class named in
// docs/architecture.md "Hostile inputs", from where each class's cases live. Data-driven corpora
// are counted by their entries (one case each); test files by the tests whose title names the
// class (an `it.each` table counts once, so those counts are lower bounds).
//   node tools/corpus-count.mjs          a table per source and per class
//   node tools/corpus-count.mjs --json   {"documented": [...], "classes": {class: n}, "sources": [...], "total": n}
// test/hostile/corpus.test.ts holds the corpus to ≥ 300 cases and every documented class to ≥ 1.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const repo = join(import.meta.dirname, "..");
const read = (path) => readFileSync(join(repo, path), "utf8");

/** Entries of a corpus's expected.json: one case each. */
const expectedEntries = (path) => Object.keys(JSON.parse(read(path))).length;

/** Keys of a top-level object literal (`const NAME = {` ... `}` in JS/TS, `NAME = {` in Python). */
function literalKeys(path, name) {
  const text = read(path);
  const start = text.search(new RegExp(`^(?:const )?${name}(?:: .*?)? = \\{`, "m"));
  if (start < 0) throw new Error(`${path}: no ${name} = { ... }`);
  const body = text.slice(start, text.indexOf("\n}", start));
  return [...body.matchAll(/^ {2,4}(?:"[^"]+"|[A-Za-z_][\w-]*):/gm)].length;
}

/** Tests in `path` (recursively for a directory) whose title matches `title`. */
function tests(path, title = /./) {
  const full = join(repo, path);
  const files = path.endsWith(".ts")
    ? [full]
    : readdirSync(full, { recursive: true })
        .filter((f) => f.endsWith(".test.ts"))
        .map((f) => join(full, f));
  let n = 0;
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(
      /\b(?:it|test)(?:\.each\([\s\S]*?\))?\(\s*(["'`])((?:(?!\1)[^\\]|\\.)*)\1/g,
    )) {
      if (title.test(m[2])) n++;
    }
  }
  return n;
}

/** Where each class's cases live. `class` is the first column of the docs table. */
const SOURCES = [
  {
    class: "malformed records",
    source: "packages/manifest/test/corpus/expected.json",
    count: () => expectedEntries("packages/manifest/test/corpus/expected.json"),
  },
  {
    class: "malformed tensor files",
    source: "packages/tensors/test/corpus/expected.json (safetensors)",
    count: () => expectedEntries("packages/tensors/test/corpus/expected.json"),
  },
  {
    class: "malformed tensor files",
    source: "packages/tensors/test/torch/corpus/expected.json (torch.save)",
    count: () => expectedEntries("packages/tensors/test/torch/corpus/expected.json"),
  },
  {
    class: "malformed tensor files",
    source: "packages/tensors/test/dcp/make_dcp_fixture.py HOSTILE (DCP .metadata)",
    count: () => literalKeys("packages/tensors/test/dcp/make_dcp_fixture.py", "HOSTILE"),
  },
  {
    class: "special files (FIFO, device, socket, directory) where a file is read",
    source: "packages/manifest/test/corpus.test.ts READERS (/dev/zero under every record name)",
    count: () => literalKeys("packages/manifest/test/corpus.test.ts", "READERS"),
  },
  {
    class: "special files (FIFO, device, socket, directory) where a file is read",
    source: "packages/tensors/test/special/, errors, hf-conversion, object-store and merge tests",
    count: () =>
      tests("packages/tensors/test/special") +
      tests("packages/errors/test") +
      tests("packages/hf-conversion/test", /FIFO|\/dev\/zero|device|not a regular file/i) +
      tests("packages/object-store/test/file.test.ts", /FIFO/) +
      tests("packages/merge/test", /FIFO|\/dev\/zero|device/i),
  },
  {
    class: "output not ours",
    source: "hf-conversion materialize and merge tests",
    count: () =>
      tests("packages/hf-conversion/test/materialize.test.ts", /foreign|marker|not ours|ours/i) +
      tests("packages/merge/test/merge.test.ts", /foreign|marker|not ours|ours/i),
  },
  {
    class: "output not ours",
    source:
      "removers and swap recovery: merge side directories, lock directories, prune-verified receipts (packages/merge/test/output.test.ts, manifest holder-lock, retention)",
    count: () =>
      tests("packages/merge/test/output.test.ts", /look-alike/) +
      tests("packages/manifest/src/fs/holder-lock.test.ts", /look-alike/) +
      tests("packages/retention/test/prune-verified.scenarios.test.ts", /receipt is/),
  },
  {
    class: "side names taken",
    source: "packages/merge/test/merge.test.ts",
    count: () =>
      tests("packages/merge/test/merge.test.ts", /staging|previous name|side name|occupied|taken/i),
  },
  {
    class: "links out of a store root",
    source: "packages/object-store/test/file.test.ts",
    count: () => tests("packages/object-store/test/file.test.ts", /link/i),
  },
];

/** The class names of docs/architecture.md's "Hostile inputs" table (its first column). */
function documentedClasses() {
  const text = read("docs/architecture.md");
  const section = text.slice(text.indexOf("## Hostile inputs"));
  const table = section.slice(0, section.indexOf("\n## "));
  return [...table.matchAll(/^\| ([^|]+?) \|/gm)]
    .map((m) => m[1])
    .filter((c) => c !== "class" && !/^-+$/.test(c));
}

function countCorpus() {
  const sources = SOURCES.map((s) => ({ class: s.class, source: s.source, cases: s.count() }));
  const classes = Object.fromEntries(documentedClasses().map((c) => [c, 0]));
  for (const s of sources) classes[s.class] = (classes[s.class] ?? 0) + s.cases;
  return {
    documented: documentedClasses(),
    classes,
    sources,
    total: sources.reduce((n, s) => n + s.cases, 0),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const counted = countCorpus();
  if (process.argv.includes("--json")) console.log(JSON.stringify(counted));
  else {
    for (const s of counted.sources) console.log(`${String(s.cases).padStart(5)}  ${s.class}: ${s.source}`);
    console.log("");
    for (const [c, n] of Object.entries(counted.classes)) console.log(`${String(n).padStart(5)}  ${c}`);
    console.log(`${String(counted.total).padStart(5)}  total`);
  }
}
