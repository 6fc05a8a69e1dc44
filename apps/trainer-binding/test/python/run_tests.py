"""Runs test_client.py one test at a time and writes {test id: {"ok", "detail"}} as JSON to argv[1]."""

import json
import sys
import unittest

import test_client


def walk(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from walk(test)
        else:
            yield test


def main(path):
    outcomes = {}
    for test in walk(unittest.defaultTestLoader.loadTestsFromModule(test_client)):
        result = unittest.TestResult()
        test.run(result)
        problems = result.errors + result.failures
        outcomes[test.id()] = {"ok": result.wasSuccessful() and result.testsRun == 1,
                               "detail": "\n".join(trace for _, trace in problems)}
    with open(path, "w") as f:
        json.dump(outcomes, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
