// @module-tag torch
// ckpt_dcp.py's hashing DCP writer and reader (test/python/test_dcp.py) on PyTorch 2 with 2 gloo
// ranks, committing through the built sidecar; the FSDP2 example SIGKILLed inside local DCP saves
// (CKPT_CRASH_KILLS, default 4; replay with CKPT_CRASH_SEED).
import { seedFrom, torch2Python } from "@ckpt/test-utils";
import { crashLoopTimeoutMs, pythonSuite } from "./python-suite.js";

const seed = seedFrom("CKPT_CRASH_SEED");

pythonSuite(
  `ckpt_dcp.py: DCP shards hashed as they are written (crash seed ${seed})`,
  "test_dcp",
  torch2Python,
  () => ({ CKPT_CRASH_SEED: String(seed) }),
  // Under a loaded machine a kill cycle (two PyTorch start-ups) has taken 90 s.
  crashLoopTimeoutMs(1_800_000, 4),
);
