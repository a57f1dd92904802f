# SPDX-License-Identifier: BSD-3-Clause
"""Shared by the torch tests: import torch or skip, and start a process group
from mlcomm-run's rank variables with a file store named after the job."""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("SKIP: torch is not installed (apt-get install python3-torch)")
    sys.exit(77)
if not dist.is_available():
    print("SKIP: this torch has no torch.distributed")
    sys.exit(77)

import mlcomm.torch  # noqa: E402,F401  registers "mlcomm"


def rank_size():
    """This rank and the job's size, from mlcomm-run (MLC_RANK, MLC_WORLD_SIZE)."""
    return int(os.environ["MLC_RANK"]), int(os.environ["MLC_WORLD_SIZE"])


def store_path(tag):
    """A file-store path private to this job (mlcomm-run's random MLC_JOB_ID) and tag."""
    return os.path.join(tempfile.gettempdir(), "mlcomm-torch-%s-%s" % (os.environ["MLC_JOB_ID"], tag))


def init(backend, tag=None, **kw):
    r, p = rank_size()
    path = store_path(tag or backend)
    dist.init_process_group(backend, init_method="file://" + path, rank=r, world_size=p, **kw)
    return r, p, path


def finish(path):
    dist.barrier()
    dist.destroy_process_group()
    if rank_size()[0] == 0:
        # torch's FileStore removes its file when the last rank lets go, which
        # may happen between any check and the unlink here.
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
