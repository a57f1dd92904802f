# SPDX-License-Identifier: BSD-3-Clause
"""The timeout of init_process_group is honoured on backend "mlcomm": rank 0
waits for a message rank 1 never sends; once nothing has moved for the
timeout (3 s) both ranks fail with a RuntimeError naming the timeout.
With argument "group": a group made by new_group(timeout=2 s) under a
default group of 120 s times out after its own 2 s (rank 0 enters a
barrier on it that rank 1 never joins), saying "Timed out" as gloo does,
and the default group still works afterwards.
Run under mlcomm-run -n 2."""

import datetime
import sys
import time

from torch_common import dist, finish, init, torch


def group_timeout():
    r, p, path = init("mlcomm", timeout=datetime.timedelta(seconds=120))
    g = dist.new_group(ranks=[0, 1], timeout=datetime.timedelta(seconds=2))
    dist.barrier()
    if r == 0:
        t0 = time.monotonic()
        try:
            dist.barrier(group=g)
            print("[rank 0] FAILED: the barrier rank 1 never joined returned")
            sys.exit(1)
        except RuntimeError as e:
            took = time.monotonic() - t0
            if " Timed out " not in str(e) or not 1.5 < took < 30:
                print("[rank 0] FAILED: after %.1f s: %s" % (took, e))
                sys.exit(1)
            print("[rank 0] ok: the group timed out after %.1f s: %s" % (took, str(e)[:160]))
    x = torch.ones(3)
    dist.all_reduce(x)  # the default group is unharmed
    if not torch.all(x == p):
        print("[rank %d] FAILED: all_reduce on the default group gave %s" % (r, x))
        sys.exit(1)
    finish(path)


def main():
    if sys.argv[1:] == ["group"]:
        return group_timeout()
    r, p, path = init("mlcomm", timeout=datetime.timedelta(seconds=3))
    dist.barrier()
    t0 = time.monotonic()
    try:
        if r == 0:
            dist.recv(torch.zeros(1), 1, tag=7)
        else:
            dist.all_reduce(torch.zeros(1))  # rank 0 never joins: it waits in recv
        print("[rank %d] FAILED: the operation returned" % r)
        sys.exit(1)
    except RuntimeError as e:
        took = time.monotonic() - t0
        if "TIMEOUT" not in str(e) or not 2.5 < took < 30:
            print("[rank %d] FAILED: after %.1f s: %s" % (r, took, e))
            sys.exit(1)
        print("[rank %d] ok: failed after %.1f s: %s" % (r, took, str(e)[:160]))
    if r == 0:
        import os
        try:  # torch's FileStore may have removed its file already
            os.unlink(path)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()
