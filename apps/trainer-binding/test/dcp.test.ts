// @module-tag torch
// ckpt_dcp.py's hashing DCP writer and reader (test/python/test_dcp.py) on PyTorch 2 with 2 gloo
// ranks, committing through the built sidecar.
import { torch2Python } from "@ckpt/test-utils";
import { pythonSuite } from "./python-suite.js";

pythonSuite("ckpt_dcp.py: DCP shards hashed as they are written", "test_dcp", torch2Python);
