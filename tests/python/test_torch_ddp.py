# SPDX-License-Identifier: BSD-3-Clause
"""DistributedDataParallel on backend "mlcomm": a small model trained for 30
steps ends with the same parameters on every rank (bitwise: mlcomm's
all-reduce gives every rank the same bits), equal to a gloo run from the
same initial weights and data within float tolerance.
Run under mlcomm-run -n N."""

import sys

from torch_common import dist, finish, init, torch

STEPS = 30


def train(backend):
    r, p, path = init(backend)
    torch.manual_seed(1234)  # the same initial weights on every rank and backend
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, 4))
    # small buckets: several all-reduces per step
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + r)  # each rank its own data
    for _ in range(STEPS):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    flat = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
    every = [torch.empty_like(flat) for _ in range(p)]
    dist.all_gather(every, flat)
    finish(path)
    return flat, every


def main():
    gloo, _ = train("gloo")
    mine, every = train("mlcomm")
    fails = []
    for q, other in enumerate(every):
        if not torch.equal(other, mine):
            fails.append("rank %d's parameters differ from this rank's (max |d| %g)"
                         % (q, (other - mine).abs().max()))
    if not torch.allclose(mine, gloo, rtol=1e-4, atol=1e-5):
        fails.append("mlcomm and gloo differ: max |d| %g" % (mine - gloo).abs().max())
    if torch.equal(mine, torch.zeros_like(mine)) or not torch.isfinite(mine).all():
        fails.append("degenerate parameters")
    if fails:
        print("FAILED: " + "; ".join(fails))
        sys.exit(1)
    print("ok: %d parameters after %d steps, equal on every rank, max |mlcomm - gloo| = %g"
          % (mine.numel(), STEPS, (mine - gloo).abs().max()))


if __name__ == "__main__":
    main()
