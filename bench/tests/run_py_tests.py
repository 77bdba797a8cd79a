#!/usr/bin/env python3
"""Run the runner's unit tests and print one 'PASS name' / 'FAIL name' line
per test (for bench/tests/run-bench-tests.sh). Exit status 1 on a failure."""

import os
import sys
import unittest


class LineResult(unittest.TextTestResult):
    def _name(self, test):
        return test.id().split(".", 1)[-1]

    def addSuccess(self, test):
        super().addSuccess(test)
        print(f"PASS {self._name(test)}", flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        print(f"FAIL {self._name(test)}", flush=True)

    def addError(self, test, err):
        super().addError(test, err)
        print(f"FAIL {self._name(test)} (error)", flush=True)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print(f"SKIP {self._name(test)}: {reason}", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
    # details of failures go to stderr; the PASS/FAIL lines to stdout
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0,
                                     resultclass=LineResult).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
