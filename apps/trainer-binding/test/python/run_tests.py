"""Runs a test module (argv[2], default test_client) one test at a time and writes
{test id: {"ok", "detail"}} as JSON to argv[1]."""

import importlib
import json
import sys
import unittest


def walk(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from walk(test)
        else:
            yield test


def main(path, module):
    outcomes = {}
    for test in walk(unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(module))):
        result = unittest.TestResult()
        test.run(result)
        problems = result.errors + result.failures
        outcomes[test.id()] = {"ok": result.wasSuccessful() and result.testsRun == 1,
                               "detail": "\n".join(trace for _, trace in problems)}
    with open(path, "w") as f:
        json.dump(outcomes, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "test_client")
