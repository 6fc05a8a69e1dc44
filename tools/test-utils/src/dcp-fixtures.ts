import { execFile } from "node:child_process";
import { cp } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll } from "vitest";
import { makeTempDir, testdir } from "./index.js";
import { torch2Python } from "./python.js";

/** tools/fixtures/make_dcp_fixtures.py: DCP directories written by real torch.distributed.checkpoint on gloo ranks. */
export const DCP_FIXTURE_GENERATOR = join(
  import.meta.dirname,
  "..",
  "..",
  "fixtures",
  "make_dcp_fixtures.py",
);
/** Importing torch and forking gloo ranks on a busy shared machine takes minutes; fixture hooks allow this. */
export const DCP_FIXTURE_TIMEOUT_MS = 600_000;

export interface DcpFixtureStorage {
  readonly relativePath: string;
  readonly offset: number;
  readonly length: number;
  readonly transformDescriptors: readonly string[];
}

/** What torch itself reads back from one fixture's `.metadata` (tools/fixtures/README.md). */
export interface DcpFixture {
  readonly tensors: readonly {
    readonly fqn: string;
    readonly dtype: string;
    readonly shape: readonly number[];
    readonly chunks: readonly {
      readonly offsets: readonly number[];
      readonly sizes: readonly number[];
      readonly storage: DcpFixtureStorage | null;
    }[];
  }[];
  readonly bytes: readonly { readonly fqn: string; readonly storage: DcpFixtureStorage | null }[];
  /** Every file beside `.metadata`, with its size. */
  readonly files: Readonly<Record<string, number>>;
  readonly version: string | null;
  readonly planner_data: Readonly<Record<string, readonly string[]>>;
}

/**
 * Writes `<out>/ranksN` (torch 2: `python` = torch2Python()) or `<out>/torch1-ranksN` (torch 1.13:
 * TORCH_PYTHON) for each N in `ranks`, and returns torch's own reading of each `.metadata`.
 */
export async function makeDcpFixtures(
  out: string,
  python: string,
  ranks: readonly number[],
): Promise<Record<string, DcpFixture>> {
  // torch's ranks make their inductor cache (<TMPDIR>/torchinductor_<user>) as they start: give
  // them a temporary directory of their own, removed after, so nothing of theirs stays in /tmp.
  const { dir: tmp, cleanup } = await makeTempDir("ckpt-torch-tmp-");
  try {
    const { stdout } = await promisify(execFile)(
      python,
      [DCP_FIXTURE_GENERATOR, "--out", out, "--ranks", ranks.join(",")],
      {
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, TMPDIR: tmp, TORCHINDUCTOR_CACHE_DIR: join(tmp, "torchinductor") },
      },
    );
    return JSON.parse(stdout) as Record<string, DcpFixture>;
  } finally {
    await cleanup();
  }
}

/** A test file's real torch 2 DCP fixtures (see {@link realDcpFixtures}). */
export interface RealDcpFixtures {
  /** The directory holding `ranksN` (once the file's beforeAll ran). */
  readonly root: string;
  /** torch's own reading of each fixture's `.metadata`, by `ranksN`. */
  readonly fixtures: Readonly<Record<string, DcpFixture>>;
  /** A copy of fixture `name` to damage; the originals stay intact for the other tests. */
  copy(name: string): Promise<string>;
}

/**
 * Writes real torch 2 DCP fixtures for `ranks` once per test file (a beforeAll under a testdir
 * named `prefix`), to be read through the returned object's getters from the tests.
 */
export function realDcpFixtures(ranks: readonly number[], prefix: string): RealDcpFixtures {
  let root = "";
  let fixtures: Record<string, DcpFixture> = {};
  beforeAll(async () => {
    root = await testdir(prefix);
    fixtures = await makeDcpFixtures(root, torch2Python(), ranks);
  }, DCP_FIXTURE_TIMEOUT_MS);
  return {
    get root() {
      return root;
    },
    get fixtures() {
      return fixtures;
    },
    async copy(name) {
      const dir = join(await testdir(`${prefix}copy-`), name);
      await cp(join(root, name), dir, { recursive: true });
      return dir;
    },
  };
}
