# SPDX-License-Identifier: BSD-3-Clause
"""torch's own distributed test class, DistributedTest._DistTestBase, run as
torch's test_distributed_spawn.py runs it for gloo, on any backend:

    python3 torch_dist_suite.py BACKEND [unittest arguments, e.g. -k test_all_reduce]

WORLD_SIZE defaults to 2. Importing mlcomm.torch (here, and so in every
spawned rank, which imports this file again) registers "mlcomm".
Exit 77 (skip) without torch."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    os.environ["BACKEND"] = sys.argv.pop(1)
os.environ.setdefault("WORLD_SIZE", "2")
# With CI set, torch's run_tests writes XML reports through xmlrunner, which
# Debian does not package: run as a developer would.
os.environ.pop("CI", None)
os.environ.setdefault("TEMP_DIR", "/tmp")  # replaced per test by TestDistBackend.setUp

try:
    import expecttest  # noqa: F401
except ImportError:
    # torch's testing package subclasses expecttest.TestCase for its
    # assertExpectedInline; Debian ships no expecttest and the distributed
    # tests do not use it: a plain unittest.TestCase stands in.
    import types
    import unittest
    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

try:
    import torch.distributed as dist
    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend
    from torch.testing._internal.common_utils import run_tests
except ImportError as e:
    print("SKIP: torch (with its testing package) is not installed: %s" % e)
    sys.exit(77)

import mlcomm.torch  # noqa: E402,F401


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    del dist
    run_tests()
