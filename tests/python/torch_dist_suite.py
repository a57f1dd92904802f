# SPDX-License-Identifier: BSD-3-Clause
"""torch's own distributed test class, DistributedTest._DistTestBase, run as
torch's test_distributed_spawn.py runs it for gloo, on any backend:

    python3 torch_dist_suite.py BACKEND [unittest arguments, e.g. -k test_all_reduce]

WORLD_SIZE defaults to 2. MLCOMM_SUITE_GATES=gloo (default) or torch: see GATES. Importing mlcomm.torch (here, and so in every
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

# The test class decides by backend name which tests apply: most CPU tests
# (timeouts, batched p2p, coalesced all-reduce, DDP, subgroups) run for
# "gloo" only. mlcomm is a drop-in for gloo, so with GATES=gloo (the
# default) every such gate admits "mlcomm" too (and the gates of CPU
# all_to_all, written for MPI only): a test that needs something only gloo
# has then fails and is listed, instead of being skipped unseen.
# GATES=torch keeps torch's own gating.
GATES = os.environ.get("MLCOMM_SUITE_GATES", "gloo")
if os.environ["BACKEND"] != "gloo" and GATES == "gloo":
    import importlib.abc
    import importlib.util
    import re

    GLOO_GATES = [  # (pattern, replacement): each keeps its line, so tracebacks keep torch's line numbers
        (r'BACKEND != "gloo"', 'BACKEND not in ("gloo", %r)' % os.environ["BACKEND"]),
        (r'BACKEND == "gloo"', 'BACKEND in ("gloo", %r)' % os.environ["BACKEND"]),
        (r'require_backend\(\{"gloo"\}\)', 'require_backend({"gloo", %r})' % os.environ["BACKEND"]),
        # all_to_all on CPU tensors: gloo has none, MPI and mlcomm do
        (r'BACKEND != "mpi", "Only MPI supports', 'BACKEND not in ("mpi", %r), "Only MPI supports' % os.environ["BACKEND"]),
    ]

    class GlooGates(importlib.abc.SourceLoader):
        def __init__(self, path):
            self.path = path

        def get_filename(self, fullname):
            return self.path

        def get_data(self, path):
            with open(path, encoding="utf-8") as f:
                src = f.read()
            for pat, rep in GLOO_GATES:
                src = re.sub(pat, rep, src)
            return src.encode()

    class GlooGatesFinder(importlib.abc.MetaPathFinder):
        NAME = "torch.testing._internal.distributed.distributed_test"

        def find_spec(self, fullname, path, target=None):
            if fullname != self.NAME:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            sys.meta_path.insert(0, self)
            return importlib.util.spec_from_file_location(fullname, spec.origin, loader=GlooGates(spec.origin))

    sys.meta_path.insert(0, GlooGatesFinder())

try:
    import torch.distributed as dist
    import mlcomm.torch  # noqa: F401  registers "mlcomm" before the class's decorators name it
    if os.environ["BACKEND"] != "gloo" and GATES == "gloo":
        from torch.testing._internal.common_distributed import DistTestCases
        # "gpu" also gates CPU tests (all_gather_object, ...); those that
        # need a GPU have GPU-count skips of their own. "plugin" is the
        # class's name for an out-of-tree backend: the availability check
        # then takes it as available.
        for feature in ("ddp", "subgroup", "gpu", "plugin"):
            DistTestCases.backend_feature[feature].add(os.environ["BACKEND"])
    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend
    from torch.testing._internal.common_utils import run_tests
except ImportError as e:
    print("SKIP: torch (with its testing package) is not installed: %s" % e)
    sys.exit(77)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    del dist
    run_tests()
