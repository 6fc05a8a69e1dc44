// Trainer checkpoint manager: what a save costs the training loop beyond the trainer's own write.
// The "trainer" (this script) writes a 1 GiB model.pt plus small optim.pt / trainer.pt at the
// targets the manager hands out; the manager then fsyncs, describes (sizes, no hashing), writes
// the description and moves latest_checkpoint.txt. Build first:
//   pnpm turbo run build --filter=@ckpt/trainer-checkpoint-manager... && pnpm bench manager-save
// Rows (medians over the reps, one warm-up save first):
//   durable   the trainer writes and fsyncs its files (a durable torch.save); the manager's added
//             time (plan + begin + commit) against that write — the ≤ 5 % target;
//   cached    the trainer leaves its bytes in the page cache; the manager's fsync then carries the
//             flush, so its commit is dominated by the disk, not by the manager's own work;
//   async     save_async: the write runs in the background (`written`), the loop is blocked only
//             for plan + begin + scheduling, next to the synchronous loop-blocked figure.
// Knobs: CKPT_BENCH_MANAGER_MIB (1024), CKPT_BENCH_REPS (3), CKPT_BENCH_DIR (os.tmpdir()).
import { mkdir, mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MiB, measure, median, printTable } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "..", "packages", "trainer-checkpoint-manager", "dist", "index.js");
const env = (name, fallback) => Number(process.env[name] ?? fallback);
const MODEL_MIB = env("CKPT_BENCH_MANAGER_MIB", 1024);
const REPS = env("CKPT_BENCH_REPS", 3);
const CHUNK = 64 * MiB;

const { CheckpointManager, parseManagerConfig } = await import(pathToFileURL(dist).href);
const chunk = Buffer.alloc(Math.min(CHUNK, MODEL_MIB * MiB), 0x3c);

/** The trainer's write: model.pt in 64 MiB chunks from one reused buffer, small optim.pt and trainer.pt. */
async function trainerWrite(targets, durable) {
  await mkdir(dirname(targets.model), { recursive: true });
  const handle = await open(targets.model, "w");
  try {
    for (let left = MODEL_MIB * MiB; left > 0; left -= chunk.length)
      await handle.write(chunk, 0, Math.min(chunk.length, left));
    if (durable) await handle.sync();
  } finally {
    await handle.close();
  }
  for (const name of ["optim", "trainer"]) {
    const small = await open(targets[name], "w");
    await small.write(Buffer.alloc(64 * 1024, 0x11));
    if (durable) await small.sync();
    await small.close();
  }
}

async function openManager(root, saveAsync) {
  const { config } = parseManagerConfig({
    save_every: 1,
    save_async: saveAsync,
    keep_optim_last: 0,
    keep_model_last: 0,
  });
  return CheckpointManager.open({
    config,
    outputRoot: root,
    project: "bench",
    group: "manager",
    name: "save",
    termination: { signals: false, sentinelPath: null },
  });
}

/** Frees the previous iteration outside the timings, so the disk holds one model at a time. */
async function dropPrevious(manager, step) {
  if (step > 1)
    await rm(join(manager.attemptDir, "checkpoints", `iter_${String(step - 1).padStart(9, "0")}`), {
      recursive: true,
      force: true,
    });
}

/** One synchronous save: returns the trainer's write time and the manager's added time. */
async function syncSave(manager, step, durable) {
  await dropPrevious(manager, step);
  let session;
  const begin = await measure(async () => {
    session = await manager.beginSave(step, manager.planSave(step, { cadence: true }));
  });
  const write = await measure(() => trainerWrite(session.targets, durable));
  const commit = await measure(() => manager.commitSave(session));
  return {
    write: write.seconds,
    added: begin.seconds + commit.seconds,
    clean: begin.clean && write.clean && commit.clean,
  };
}

async function syncRows(root, durable) {
  const manager = await openManager(root, false);
  await syncSave(manager, 1, durable); // warm-up: fresh page-cache pages are slow to get the first time
  const runs = [];
  for (let rep = 0; rep < REPS; rep++) runs.push(await syncSave(manager, rep + 2, durable));
  await manager.finalize();
  return runs;
}

/** save_async: the write is handed over as `written`; the loop then "trains" long enough for it to finish. */
async function asyncRows(root, trainSeconds) {
  const manager = await openManager(root, true);
  const runs = [];
  for (let step = 1; step <= REPS + 1; step++) {
    await dropPrevious(manager, step);
    let written;
    const blocked = await measure(async () => {
      const session = await manager.beginSave(step, manager.planSave(step, { cadence: true }));
      written = trainerWrite(session.targets, false);
      await manager.commitSave(session, { written });
    });
    await written;
    await new Promise((resolve) => setTimeout(resolve, trainSeconds * 1000));
    if (step > 1) runs.push({ blocked: blocked.seconds, clean: blocked.clean });
  }
  await manager.finalize();
  return runs;
}

const base = await mkdtemp(join(process.env.CKPT_BENCH_DIR ?? tmpdir(), "ckpt-bench-manager-"));
try {
  console.log(`manager save bench: ${MODEL_MIB} MiB model.pt, ${REPS} reps (+1 warm-up), under ${base}`);
  const durable = await syncRows(join(base, "durable"), true);
  const cached = await syncRows(join(base, "cached"), false);
  const syncBlocked = median(cached.map((r) => r.write + r.added));
  const asyncRuns = await asyncRows(join(base, "async"), Math.max(1, syncBlocked * 1.5));
  const ms = (s) => (s * 1000).toFixed(1);
  const pct = (a, b) => `${((a / b) * 100).toFixed(2)}%`;
  const mD = { write: median(durable.map((r) => r.write)), added: median(durable.map((r) => r.added)) };
  const mC = { write: median(cached.map((r) => r.write)), added: median(cached.map((r) => r.added)) };
  const blocked = median(asyncRuns.map((r) => r.blocked));
  printTable(
    ["mode", "trainer write ms", "manager added ms", "added / write", "loop blocked ms", "clean runs"],
    [
      [
        "durable",
        ms(mD.write),
        ms(mD.added),
        pct(mD.added, mD.write),
        ms(mD.write + mD.added),
        `${durable.filter((r) => r.clean).length}/${REPS}`,
      ],
      [
        "cached",
        ms(mC.write),
        ms(mC.added),
        pct(mC.added, mC.write),
        ms(mC.write + mC.added),
        `${cached.filter((r) => r.clean).length}/${REPS}`,
      ],
      ["async", "-", "-", "-", ms(blocked), `${asyncRuns.filter((r) => r.clean).length}/${REPS}`],
    ],
  );
  const target = mD.added / mD.write <= 0.05;
  console.log(
    `durable write: the manager adds ${pct(mD.added, mD.write)} of the trainer's write (target <= 5%: ${target ? "met" : "NOT met"}); ` +
      `save_async blocks the loop ${ms(blocked)} ms per save against ${ms(syncBlocked)} ms synchronous (${(syncBlocked / Math.max(blocked, 1e-6)).toFixed(0)}x less).`,
  );
} finally {
  await rm(base, { recursive: true, force: true });
}
