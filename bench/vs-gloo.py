#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed on "mlcomm" vs "gloo", same machine, same job.

    /usr/bin/python3 bench/vs-gloo.py [-n RANKS...] [--brief] [--out DIR]

Starts the ranks itself under build/bin/mlcomm-run. Per rank count, every
collective (all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
broadcast) and size (8 B .. 128 MiB, x4; bytes per rank's input of all_reduce and
broadcast, of the whole gathered or reduced buffer otherwise), the two backends run interleaved:
REPS rounds, each timing a loop on gloo and then on mlcomm; a loop's time per
operation is the slowest rank's; the figure is the median over rounds.
Prints a table, writes DIR/vs-gloo.csv and, when matplotlib is installed,
DIR/vs-gloo.png. Then the overhead of the Python layers at 8 B and 128 MiB
on 2 ranks: mlcomm-bench (C), the mlcomm package (numpy), torch on "mlcomm".
--brief: fewer sizes and rounds."""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "build", "bin", "mlcomm-run")
BENCH = os.path.join(ROOT, "build", "bin", "mlcomm-bench")
COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]


def sizes(brief):
    if brief:
        return [8, 512, 65536, 1 << 20, 32 << 20, 128 << 20]
    out, s = [], 8
    while s <= 128 << 20:
        out.append(s)
        s *= 4
    return out + ([128 << 20] if out[-1] != 128 << 20 else [])


# ---- one rank --------------------------------------------------------------------
def rank_main(args):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch
    import torch.distributed as dist
    import mlcomm.torch  # noqa: F401

    r, p = int(os.environ["MLC_RANK"]), int(os.environ["MLC_WORLD_SIZE"])
    store = os.path.join(tempfile.gettempdir(), "mlcomm-vs-gloo-%s" % os.environ["MLC_JOB_ID"])
    dist.init_process_group("gloo", init_method="file://" + store, rank=r, world_size=p)
    groups = {"gloo": dist.new_group(backend="gloo"), "mlcomm": dist.new_group(backend="mlcomm")}
    ctl = dist.group.WORLD
    rows = []
    for coll in COLLS:
        for nbytes in sizes(args.brief):
            n = max(nbytes // 4, 1)
            if coll == "all_reduce" or coll == "broadcast":
                x = torch.ones(n)
                out = None
            elif coll == "all_gather":  # list forms: torch 1.13's gloo has no *_into_tensor
                x = torch.ones(max(n // p, 1))
                out = [torch.empty_like(x) for _ in range(p)]
            else:
                out = torch.empty(max(n // p, 1))
                x = [torch.ones_like(out) for _ in range(p)]

            def op(g):
                if coll == "all_reduce":
                    dist.all_reduce(x, group=g)
                elif coll == "broadcast":
                    dist.broadcast(x, 0, group=g)
                elif coll == "all_gather":
                    dist.all_gather(out, x, group=g)
                else:
                    dist.reduce_scatter(out, x, group=g)

            times = {"gloo": [], "mlcomm": []}
            iters = {}
            todo = dict(groups)
            if coll == "reduce_scatter":  # torch 1.13's gloo has none
                try:
                    op(groups["gloo"])
                except RuntimeError:
                    del todo["gloo"]
            for be, g in todo.items():  # warm up; size the loops to ~budget s
                op(g)
                dist.barrier(group=ctl)
                t0 = time.perf_counter()
                op(g)
                one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                dist.all_reduce(one, op=dist.ReduceOp.MAX, group=ctl)
                iters[be] = int(min(max(args.budget / max(one.item(), 1e-7), 2), 2000))
            for _ in range(args.reps):
                for be, g in todo.items():
                    dist.barrier(group=ctl)
                    t0 = time.perf_counter()
                    for _ in range(iters[be]):
                        op(g)
                    t = torch.tensor([(time.perf_counter() - t0) / iters[be]], dtype=torch.float64)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctl)
                    times[be].append(t.item())
            if r == 0:
                m = statistics.median(times["mlcomm"])
                g = statistics.median(times["gloo"]) if times["gloo"] else float("nan")
                rows.append((p, coll, nbytes, g * 1e6, m * 1e6, g / m))
                print("%d,%s,%d,%.2f,%.2f,%.2f" % rows[-1], flush=True)
    dist.barrier(group=ctl)
    dist.destroy_process_group()
    if r == 0:
        try:  # torch's FileStore may have removed its file already
            os.unlink(store)
        except FileNotFoundError:
            pass


def overhead_main(args):
    """Rank body of the overhead run: numpy binding and torch 'mlcomm' at 8 B and 128 MiB."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import torch
    import torch.distributed as dist
    import mlcomm
    import mlcomm.torch  # noqa: F401

    r, p = int(os.environ["MLC_RANK"]), int(os.environ["MLC_WORLD_SIZE"])
    comm = mlcomm.init()
    out = []
    for nbytes in (8, 128 << 20):
        x = np.ones(nbytes // 4, np.float32)
        y = np.empty_like(x)
        iters = 2000 if nbytes == 8 else 10
        comm.allreduce(x, out=y)
        comm.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            comm.allreduce(x, out=y)
        out.append(("numpy", nbytes, (time.perf_counter() - t0) / iters))
    comm.free()
    store = os.path.join(tempfile.gettempdir(), "mlcomm-vs-gloo-o-%s" % os.environ["MLC_JOB_ID"])
    dist.init_process_group("mlcomm", init_method="file://" + store, rank=r, world_size=p)
    for nbytes in (8, 128 << 20):
        x = torch.ones(nbytes // 4)
        iters = 2000 if nbytes == 8 else 10
        dist.all_reduce(x)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        out.append(("torch", nbytes, (time.perf_counter() - t0) / iters))
    dist.destroy_process_group()
    if r == 0:
        try:  # torch's FileStore may have removed its file already
            os.unlink(store)
        except FileNotFoundError:
            pass
        for kind, nbytes, t in out:
            print("%s,%d,%.3f" % (kind, nbytes, t * 1e6), flush=True)


def c_bench(nbytes):
    """mlcomm-bench all-reduce time (us, out of place) on 2 ranks."""
    res = subprocess.run([RUN, "-n", "2", BENCH, "allreduce", "-b", str(nbytes), "-e", str(nbytes),
                          "-n", "2000" if nbytes == 8 else "10", "-w", "20" if nbytes == 8 else "2", "-c", "0"],
                         capture_output=True, text=True, check=True)
    for line in res.stdout.splitlines():
        f = line.split()
        if f and f[0] == str(nbytes):
            return float(f[6])
    raise RuntimeError("no result line in mlcomm-bench's output:\n" + res.stdout)


def fmt_bytes(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return "%d %s" % (n // k, unit)
    return "%d B" % n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--brief", action="store_true")
    ap.add_argument("--reps", type=int, default=None, help="interleaved rounds (default 5, 3 with --brief)")
    ap.add_argument("--budget", type=float, default=None, help="seconds per timed loop (default 0.2, 0.05 brief)")
    ap.add_argument("--overhead-only", action="store_true", help="only the Python layers' cost")
    ap.add_argument("--out", default=".", help="directory of vs-gloo.csv and vs-gloo.png")
    ap.add_argument("--rank-body", choices=["sweep", "overhead"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.reps = args.reps or (3 if args.brief else 5)
    args.budget = args.budget or (0.05 if args.brief else 0.2)
    if args.rank_body == "sweep":
        return rank_main(args)
    if args.rank_body == "overhead":
        return overhead_main(args)

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    rows = []
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    for p in ([] if args.overhead_only else args.ranks):
        cmd = [RUN, "-n", str(p), "--timeout", "3000", sys.executable, os.path.abspath(__file__), "--rank-body", "sweep",
               "--reps", str(args.reps), "--budget", str(args.budget)] + (["--brief"] if args.brief else [])
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            sys.exit("rank run failed:\n" + res.stdout + res.stderr)
        for line in res.stdout.splitlines():
            f = line.split(",")
            if len(f) == 6:
                rows.append((int(f[0]), f[1], int(f[2]), float(f[3]), float(f[4]), float(f[5])))
    if args.overhead_only:
        rows = []
    print("\n%5s %-15s %10s %12s %12s %8s" % ("ranks", "collective", "bytes", "gloo (us)", "mlcomm (us)", "speedup"))
    for p, coll, nb, g, m, s in rows:
        print("%5d %-15s %10s %12.1f %12.1f %7.1fx" % (p, coll, fmt_bytes(nb), g, m, s))
    os.makedirs(args.out, exist_ok=True)
    csv = os.path.join(args.out, "vs-gloo.csv")
    with open(csv, "w") as f:
        f.write("ranks,collective,bytes,gloo_us,mlcomm_us,speedup\n")
        for row in rows:
            f.write("%d,%s,%d,%.3f,%.3f,%.3f\n" % row)
    print("wrote", csv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(COLLS), figsize=(5 * len(COLLS), 4), squeeze=False)
        for ax, coll in zip(axes[0], COLLS):
            for p in args.ranks:
                pts = [(nb, g, m) for (q, c, nb, g, m, s) in rows if q == p and c == coll]
                if pts:
                    ax.loglog([x[0] for x in pts], [x[1] for x in pts], "o--", label="gloo, %d ranks" % p)
                    ax.loglog([x[0] for x in pts], [x[2] for x in pts], "s-", label="mlcomm, %d ranks" % p)
            ax.set_title(coll)
            ax.set_xlabel("bytes")
            ax.set_ylabel("time per operation (us)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        png = os.path.join(args.out, "vs-gloo.png")
        fig.savefig(png, dpi=90)
        print("wrote", png)
    except ImportError:
        print("matplotlib not installed: no plot")

    # The Python layers' own cost at 8 B and 128 MiB (2 ranks, all-reduce).
    res = subprocess.run([RUN, "-n", "2", sys.executable, os.path.abspath(__file__), "--rank-body", "overhead"],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit("overhead run failed:\n" + res.stdout + res.stderr)
    got = {}
    for line in res.stdout.splitlines():
        f = line.split(",")
        if len(f) == 3:
            got[(f[0], int(f[1]))] = float(f[2])
    print("\nall_reduce on 2 ranks, time per operation (us):")
    print("%10s %14s %14s %14s" % ("bytes", "mlcomm-bench", "mlcomm numpy", "torch mlcomm"))
    for nb in (8, 128 << 20):
        print("%10s %14.2f %14.2f %14.2f" % (fmt_bytes(nb), c_bench(nb), got[("numpy", nb)], got[("torch", nb)]))
    print("load average: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
