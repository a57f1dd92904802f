# SPDX-License-Identifier: BSD-3-Clause
"""The timeout of init_process_group is honoured on backend "mlcomm": rank 0
waits for a message rank 1 never sends; once nothing has moved for the
timeout (3 s) both ranks fail with a RuntimeError naming the timeout.
Run under mlcomm-run -n 2."""

import datetime
import sys
import time

from torch_common import dist, init, torch


def main():
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
