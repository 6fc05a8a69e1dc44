// @module-tag torch
// Two ranks (torch.distributed, gloo on CPU) save in the dcp format: rank 0's sidecar plans and
// commits, each rank writes its own shard into model/ and optim/ (torch.save: Debian's torch 1.13
// cannot import its DCP module under Python 3.11), and on resume each rank reads back exactly its
// own shard. The resumed run ends bit-identical to an uninterrupted two-rank run.
import { createServer } from "node:net";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { makeTempDir } from "@ckpt/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunResult, runNode } from "../helpers/crash.js";
import {
  assertCompleteCheckpoint,
  attemptDirs,
  checkLatestPointer,
  PYTHON,
  readRankResult,
  readResult,
  type TrainOptions,
  trainArgs,
  trainerEnv,
} from "./helpers.js";

const WORLD = 2;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Starts every rank of one job (as torchrun would) and waits for all of them. */
async function runRanks(o: TrainOptions): Promise<RunResult[]> {
  const port = await freePort();
  return Promise.all(
    Array.from({ length: WORLD }, (_, rank) =>
      runNode(
        {
          executable: PYTHON,
          args: trainArgs(o),
          env: trainerEnv({
            RANK: String(rank),
            WORLD_SIZE: String(WORLD),
            MASTER_ADDR: "127.0.0.1",
            MASTER_PORT: String(port),
          }),
        },
        { timeoutMs: 180_000 },
      ),
    ),
  );
}

function expectAllOk(runs: RunResult[]): void {
  for (const [rank, run] of runs.entries()) {
    expect(run.code, `rank ${rank}:\n${run.stderr.slice(-3000)}`).toBe(0);
  }
}

describe("two ranks saving dcp shards (gloo on CPU)", () => {
  let tmp: { dir: string; cleanup: () => Promise<void> };
  let reference: string;
  const options = (root: string, steps: number): TrainOptions => ({
    outputRoot: root,
    steps,
    saveEvery: 4,
    format: "dcp",
    result: join(root, "result.json"),
  });

  beforeAll(async () => {
    tmp = await makeTempDir("ckpt-two-rank-");
    const root = join(tmp.dir, "reference");
    expectAllOk(await runRanks(options(root, 12)));
    reference = (await readResult(join(root, "result.json"))).digest;
  });
  afterAll(async () => {
    await tmp.cleanup();
  });

  it("each rank writes its own shard, and on resume reads back exactly its own", async () => {
    const root = join(tmp.dir, "run");
    expectAllOk(await runRanks(options(root, 8)));
    const [attempt] = await attemptDirs(root);
    const latest = await checkLatestPointer(attempt!, WORLD);
    expect(latest?.iteration).toBe(8);
    for (const component of ["model", "optim"]) {
      expect(
        (await readdir(join(latest!.dir, component))).filter((n) => n.endsWith(".distcp")).sort(),
      ).toEqual(["__0_0.distcp", "__1_0.distcp"]);
    }
    await assertCompleteCheckpoint(latest!.dir, WORLD);

    // The same job, run longer: resume=auto picks iter 8 on rank 0 and every rank loads its shard.
    expectAllOk(await runRanks(options(root, 12)));
    const done = await readResult(join(root, "result.json"));
    expect(done.resumed_from).toBe(latest!.dir);
    expect(done.step).toBe(12);
    expect(done.digest).toBe(reference);
    const keys: string[][] = [];
    for (let rank = 0; rank < WORLD; rank++) {
      const { read, shard_keys } = await readRankResult(join(root, "result.json"), rank);
      expect(read.sort()).toEqual(
        [
          join(latest!.dir, "data.pt"),
          join(latest!.dir, "model", `__${rank}_0.distcp`),
          join(latest!.dir, "optim", `__${rank}_0.distcp`),
          join(latest!.dir, "trainer.pt"),
        ].sort(),
      );
      keys.push(shard_keys);
    }
    // The shards split the model: disjoint, and together every parameter.
    expect(keys[0]!.filter((k) => keys[1]!.includes(k))).toEqual([]);
    expect([...keys[0]!, ...keys[1]!].sort()).toEqual(["0.bias", "0.weight", "3.bias", "3.weight"]);
  });
});
