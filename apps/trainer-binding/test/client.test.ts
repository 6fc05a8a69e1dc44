// @module-tag torch
// The Python client's tests (test/python/test_client.py) against the built sidecar, on torch 1.
import { TORCH_PYTHON } from "@ckpt/test-utils";
import { pythonSuite } from "./python-suite.js";

pythonSuite("ckpt_trainer_client.py against the sidecar", "test_client", TORCH_PYTHON);
