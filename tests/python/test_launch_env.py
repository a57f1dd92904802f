# SPDX-License-Identifier: BSD-3-Clause
"""Ranks started the way torchrun starts them, without mlcomm-run: this
driver spawns N processes with torchrun's variables (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID)
or only the four that env:// needs, as people set them by hand, and checks
that each rank's communicator works:

    test_launch_env.py binding N   mlcomm.init() with no arguments
    test_launch_env.py torch N     dist.init_process_group("mlcomm") (env://), full torchrun set
    test_launch_env.py torch-hand N  the same with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT only
    test_launch_env.py torch-run N MLCOMM_RUN  the same under mlcomm-run, which sets torch's
                                   variables itself (none of them set before)

Exit 77 (skip) without numpy (binding) or torch (torch modes)."""

import os
import socket
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
MLC_VARS = ("MLC_RANK", "MLC_WORLD_SIZE", "MLC_LOCAL_RANK", "MLC_LOCAL_SIZE", "MLC_JOB_ID", "MLC_JOB_FD")


def rank_binding():
    try:
        import numpy as np
    except ImportError:
        sys.exit(77)
    import mlcomm
    r, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    with mlcomm.init() as c:
        assert (c.rank, c.size) == (r, p), "rank/size %d/%d, expected %d/%d" % (c.rank, c.size, r, p)
        got = c.allreduce(np.full(5, r + 1, np.int64))
        assert (got == p * (p + 1) // 2).all(), "allreduce gave %s" % got
        every = c.allgather(np.array([os.getpid()], np.int64))
        assert len(set(every.reshape(-1).tolist())) == p, "ranks share a process: %s" % every


def rank_torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        sys.exit(77)
    import mlcomm.torch  # noqa: F401
    r, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("mlcomm")  # env://, as torchrun's children do
    assert (dist.get_rank(), dist.get_world_size()) == (r, p)
    x = torch.full((7,), float(r + 1))
    dist.all_reduce(x)
    assert torch.all(x == p * (p + 1) / 2), "all_reduce gave %s" % x
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TORCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "TORCHELASTIC_RUN_ID")


def under_mlcomm_run(n, run):
    env = {k: v for k, v in os.environ.items() if k not in MLC_VARS + TORCH_VARS}
    cmd = [run, "-n", str(n), sys.executable, "-W", "ignore", __file__, "--rank", "torch"]
    try:
        code = subprocess.run(cmd, env=env, timeout=120).returncode
    except subprocess.TimeoutExpired:
        print("FAIL: the job did not finish in 120 s")
        return 1
    if code == 77:
        print("SKIP: torch is not installed")
        return 77
    if code:
        print("FAIL: mlcomm-run exited %d" % code)
        return 1
    print("OK: %d ranks under mlcomm-run, init_process_group by env://" % n)
    return 0


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    if mode == "torch-run":
        return under_mlcomm_run(n, sys.argv[3])
    port = free_port()
    procs = []
    for r in range(n):
        env = {k: v for k, v in os.environ.items() if k not in MLC_VARS}
        env.update(RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if mode != "torch-hand":
            env.update(LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0", ROLE_RANK=str(r),
                       TORCHELASTIC_RUN_ID=uuid.uuid4().hex)
            if r:  # one run id per job, as torchrun gives every child the same
                env["TORCHELASTIC_RUN_ID"] = procs[0][1]["TORCHELASTIC_RUN_ID"]
        procs.append((subprocess.Popen([sys.executable, "-W", "ignore", __file__, "--rank", mode], env=env), env))
    codes = []
    for pr, _ in procs:
        try:
            codes.append(pr.wait(timeout=120))
        except subprocess.TimeoutExpired:
            for q, _ in procs:
                q.kill()
            print("FAIL: a rank did not finish in 120 s")
            return 1
    if all(c == 77 for c in codes):
        print("SKIP: %s is not installed" % ("numpy" if mode == "binding" else "torch"))
        return 77
    if any(codes):
        print("FAIL: exit codes %s" % codes)
        return 1
    print("OK: %d ranks (%s) started torchrun-style" % (n, mode))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rank":
        {"binding": rank_binding, "torch": rank_torch, "torch-hand": rank_torch}[sys.argv[2]]()
        sys.exit(0)
    sys.exit(main())
