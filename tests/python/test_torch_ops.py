# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed on backend "mlcomm": every operation the backend
implements, checked against values computed here, on the default group and
on subgroups; async work. Run under mlcomm-run -n N."""

import datetime
import os
import sys

from torch_common import dist, finish, init, torch

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def eq(a, b, what):
    check(torch.equal(a, b), "%s: got %s, expected %s" % (what, a, b))


def ops(r, p, group, ranks):
    """Every operation on `group`, whose members are world ranks `ranks`; r is this rank's index in it."""
    g = group
    gr = [q for q in ranks]
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16,
               torch.uint8):
        t = torch.arange(5).to(dt) + r
        dist.all_reduce(t, group=g)
        eq(t, (torch.arange(5) * p + sum(range(p))).to(dt), "all_reduce %s" % dt)
    for op, want in ((dist.ReduceOp.MAX, p - 1), (dist.ReduceOp.MIN, 0), (dist.ReduceOp.PRODUCT, 0 if p > 1 else 0)):
        t = torch.full((3,), float(r))
        dist.all_reduce(t, op=op, group=g)
        eq(t, torch.full((3,), float(want)), "all_reduce %s" % op)
    # lazy conjugate views move by value (their memory holds the unconjugated values)
    zb = torch.tensor([1 + 2j]).conj() if r == 0 else torch.zeros(1, dtype=torch.complex64)
    dist.broadcast(zb, src=gr[0], group=g)
    eq(zb, torch.tensor([1 - 2j]), "broadcast from a conjugate view")
    if p >= 2 and r < 2:
        if r == 0:
            dist.send(torch.tensor([1 + 2j, 3 - 1j]).conj(), gr[1], group=g)
        else:
            got = torch.zeros(2, dtype=torch.complex64)
            dist.recv(got, gr[0], group=g)
            eq(got, torch.tensor([1 - 2j, 3 + 1j]), "send of a conjugate view")
    try:
        dist.all_reduce(torch.ones(1, dtype=torch.int32), op=dist.ReduceOp.BAND, group=g)
        check(False, "all_reduce with BAND: no error")
    except RuntimeError as e:
        check("BAND" in str(e), "the unsupported op is named: %s" % e)
    nc = torch.zeros(4, 4)
    nc[:, 1] = r + 1.0
    col = nc[:, 1]  # not contiguous
    dist.all_reduce(col, group=g)
    eq(nc[:, 1], torch.full((4,), float(sum(range(1, p + 1)))), "all_reduce non-contiguous")
    ts = [torch.full((2,), float(r)), torch.full((3,), 1.0)]
    dist.all_reduce_coalesced(ts, group=g)
    eq(ts[0], torch.full((2,), float(sum(range(p)))), "all_reduce_coalesced 0")
    eq(ts[1], torch.full((3,), float(p)), "all_reduce_coalesced 1")
    for root in range(p):
        t = torch.full((4,), float(r))
        dist.broadcast(t, src=gr[root], group=g)
        eq(t, torch.full((4,), float(root)), "broadcast root %d" % root)
        t = torch.full((4,), float(r + 1))
        dist.reduce(t, dst=gr[root], group=g)
        if r == root:
            eq(t, torch.full((4,), float(p * (p + 1) // 2)), "reduce root %d" % root)
        outs = [torch.zeros(2) for _ in range(p)] if r == root else None
        dist.gather(torch.full((2,), float(r)), outs, dst=gr[root], group=g)
        if r == root:
            for q in range(p):
                eq(outs[q], torch.full((2,), float(q)), "gather from %d" % q)
        ins = [torch.full((3,), float(q * 10 + root)) for q in range(p)] if r == root else None
        out = torch.zeros(3)
        dist.scatter(out, ins, src=gr[root], group=g)
        eq(out, torch.full((3,), float(r * 10 + root)), "scatter root %d" % root)
    outs = [torch.zeros(3, dtype=torch.int64) for _ in range(p)]
    dist.all_gather(outs, torch.full((3,), r, dtype=torch.int64), group=g)
    for q in range(p):
        eq(outs[q], torch.full((3,), q, dtype=torch.int64), "all_gather %d" % q)
    outs = [[torch.zeros(2), torch.zeros(1)] for _ in range(p)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(r)), torch.full((1,), float(r))], group=g)
    for q in range(p):
        eq(outs[q][0], torch.full((2,), float(q)), "all_gather_coalesced %d.0" % q)
        eq(outs[q][1], torch.full((1,), float(q)), "all_gather_coalesced %d.1" % q)
    o = torch.zeros(2 * p)
    dist._all_gather_base(o, torch.full((2,), float(r)), group=g)
    eq(o, torch.arange(p).float().repeat_interleave(2), "_all_gather_base")
    o = torch.zeros(p)
    dist.reduce_scatter(o[:1], [torch.full((1,), float(q + r)) for q in range(p)], group=g)
    eq(o[:1], torch.full((1,), float(p * r + sum(range(p)))), "reduce_scatter")
    o = torch.zeros(2)
    dist._reduce_scatter_base(o, torch.arange(2 * p).float(), group=g)
    eq(o, (torch.arange(2 * r, 2 * r + 2).float() * p), "_reduce_scatter_base")
    # all_to_all_single, even and with split sizes (rank r sends q+1 rows to rank q)
    i = torch.tensor([r * 100 + q for q in range(p)]).float()
    o = torch.zeros(p)
    dist.all_to_all_single(o, i, group=g)
    eq(o, torch.tensor([q * 100 + r for q in range(p)]).float(), "all_to_all_single")
    i = torch.cat([torch.full((q + 1, 2), float(r * 10 + q)) for q in range(p)])
    o = torch.zeros((r + 1) * p, 2)
    dist.all_to_all_single(o, i, output_split_sizes=[r + 1] * p, input_split_sizes=[q + 1 for q in range(p)],
                           group=g)
    eq(o, torch.cat([torch.full((r + 1, 2), float(q * 10 + r)) for q in range(p)]), "all_to_all_single splits")
    outs = [torch.zeros(q + 1) for q in range(p)]
    dist.all_to_all(outs, [torch.full((r + 1,), float(r * 10 + q)) for q in range(p)], group=g)
    for q in range(p):
        eq(outs[q], torch.full((q + 1,), float(q * 10 + r)), "all_to_all from %d" % q)
    dist.barrier(group=g)
    # point-to-point: a ring with isend/irecv, batch_isend_irecv, and any-source receives
    if p >= 2:
        right, left = (r + 1) % p, (r - 1) % p
        rb = torch.zeros(3)
        reqs = [dist.isend(torch.full((3,), float(r)), gr[right], group=g, tag=3),
                dist.irecv(rb, gr[left], group=g, tag=3)]
        for w in reqs:
            w.wait()
        eq(rb, torch.full((3,), float(left)), "isend/irecv ring")
        rb = torch.zeros(2)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((2,), float(r)), gr[left], g),
                                       dist.P2POp(dist.irecv, rb, gr[right], g)])
        for w in reqs:
            w.wait()
        eq(rb, torch.full((2,), float(right)), "batch_isend_irecv")
        if r == 0:
            got = set()
            for _ in range(p - 1):
                b = torch.zeros(1)
                src = dist.recv(b, group=g, tag=5)  # any source
                check(b.item() == src, "recv any source: %s from %s" % (b.item(), src))
                got.add(src)
            check(got == set(gr[1:]), "any-source senders %s" % got)
        else:
            dist.send(torch.full((1,), float(gr[r])), gr[0], group=g, tag=5)
    # sparse all_reduce (SUM only, as gloo): rank q holds q+1 entries on row q
    # of a 6x3 matrix (overlapping columns), plus a dense 2-wide value part
    idx = torch.tensor([[r % 6] * (r + 1), list(range(r + 1))[:3] + [0] * max(r - 2, 0)])
    sp = torch.sparse_coo_tensor(idx, torch.full((r + 1, 2), float(r + 1)), (6, 3, 2))
    want = torch.zeros(6, 3, 2)
    for q in range(p):
        for k in range(q + 1):
            want[q % 6, min(k, 2) if k < 3 else 0] += q + 1
    dist.all_reduce(sp, group=g)
    check(sp.is_sparse, "sparse all_reduce left a dense tensor")
    eq(sp.to_dense(), want, "sparse all_reduce")
    try:
        dist.all_reduce(torch.sparse_coo_tensor(idx, torch.ones(r + 1, 2), (6, 3, 2)), op=dist.ReduceOp.MAX, group=g)
        check(False, "sparse all_reduce MAX did not raise")
    except RuntimeError as e:
        check("SUM only" in str(e), "sparse all_reduce MAX: %s" % e)
    # monitored_barrier (gloo's, on mlcomm groups too): every rank arrives
    dist.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=30))
    dist.monitored_barrier(group=g, timeout=30.0, wait_all_ranks=True)
    # async work: wait, is_completed, result, get_future
    t = torch.ones(8)
    w = dist.all_reduce(t, group=g, async_op=True)
    check(w.wait(), "work.wait")
    check(w.is_completed() and w.is_success() and w.exception() is None, "completed work")
    fut = dist.all_reduce(torch.ones(2), group=g, async_op=True).get_future()
    eq(fut.wait()[0], torch.full((2,), float(p)), "get_future")


def refused(fn, what, text=None):
    """fn must raise RuntimeError on this rank before anything moves."""
    try:
        fn()
    except RuntimeError as e:
        check(text is None or text in str(e), "%s: the message does not say %r: %s" % (what, text, e))
        return
    check(False, "%s: no error" % what)


def bad_arguments(r, p):
    """Tensors that do not fit the call are refused on the rank that passes
    them, before anything moves: never read or written past their ends,
    never filled with reinterpreted bytes."""
    f32 = torch.ones(4)
    refused(lambda: dist.all_gather_into_tensor(torch.zeros(4 * p), torch.ones(4, dtype=torch.float64)),
            "all_gather_into_tensor of float64 into float32", "float64")
    refused(lambda: dist.reduce_scatter_tensor(torch.zeros(4, dtype=torch.float64),
                                               torch.ones(4 * p, dtype=torch.float16)),
            "reduce_scatter_tensor of float16 into float64", "float16")
    if p >= 2:
        refused(lambda: dist.reduce_scatter(torch.zeros(4), [torch.ones(5), torch.ones(3)] +
                                            [torch.ones(4)] * (p - 2)),
                "reduce_scatter of inputs of 5 and 3 elements into 4", "5")
    refused(lambda: dist.reduce_scatter(torch.zeros(4), [torch.ones(4, dtype=torch.float64)] * p),
            "reduce_scatter of float64 inputs into float32", "float64")
    refused(lambda: dist.all_gather([torch.zeros(4, dtype=torch.int32)] * p, f32),
            "all_gather into int32 outputs", "int32")
    refused(lambda: dist.all_gather([torch.zeros(3)] * p, f32), "all_gather into outputs of 3 elements", "3")
    refused(lambda: dist.all_to_all_single(torch.zeros(4 * p, dtype=torch.int32), torch.ones(4 * p)),
            "all_to_all_single into int32", "int32")
    refused(lambda: dist.all_to_all_single(torch.zeros(2 * p, dtype=torch.float64), torch.ones(4 * p),
                                           [4] * p, [2] * p),
            "all_to_all_single with splits into float64", "float64")
    refused(lambda: dist.all_to_all([torch.zeros(4, dtype=torch.int64)] * p, [f32] * p),
            "all_to_all into int64", "int64")
    # scatter and gather: at the root only (the others would wait for it)
    if r == 0:
        refused(lambda: dist.scatter(torch.zeros(4), [torch.ones(2)] * p, src=0),
                "scatter of inputs of 2 elements into 4", "2")
        refused(lambda: dist.scatter(torch.zeros(4), [torch.ones(8)] * p, src=0),
                "scatter of inputs of 8 elements into 4", "8")
        refused(lambda: dist.scatter(torch.zeros(4), [torch.ones(4, dtype=torch.float64)] * p, src=0),
                "scatter of float64 inputs into float32", "float64")
        refused(lambda: dist.gather(f32, [torch.zeros(4, dtype=torch.int32)] * p, dst=0),
                "gather into int32 outputs", "int32")
        refused(lambda: dist.gather(f32, [torch.zeros(2)] * p, dst=0), "gather into outputs of 2 elements", "2")
    # and the group still works
    t = torch.ones(3)
    dist.all_reduce(t)
    eq(t, torch.full((3,), float(p)), "all_reduce after the refused calls")


def destroyed(r, p):
    """destroy_process_group frees the groups' communicators at once."""
    _, _, path = init("mlcomm", tag="destroyed", timeout=datetime.timedelta(seconds=60))
    world = dist.group.WORLD
    sub = dist.new_group(list(range(p)))
    comms = [world.comm, sub.comm]
    dist.barrier()
    dist.destroy_process_group()
    for c in comms:
        try:
            c.rank
            check(False, "destroy_process_group left a communicator alive")
        except ValueError as e:
            check("freed" in str(e), "a destroyed group's communicator: %s" % e)
    refused(lambda: world.allreduce([torch.ones(1)]), "a call on a destroyed group", "freed")
    if r == 0:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def main():
    r, p, path = init("mlcomm", timeout=datetime.timedelta(seconds=60))
    check(dist.get_backend() == "mlcomm", "backend name %s" % dist.get_backend())
    ops(r, p, None, list(range(p)))
    # a subgroup of all ranks but rank 0, and one of the even ranks
    if p >= 3:
        members = list(range(1, p))
        g = dist.new_group(members)
        if r in members:
            ops(members.index(r), len(members), g, members)
    if p >= 2:
        members = list(range(0, p, 2))
        g = dist.new_group(members)
        if r in members:
            ops(members.index(r), len(members), g, members)
    # timedelta.max means "no limit" to torch users: mlcomm takes it as its
    # largest timeout (1e9 s) instead of failing the group's creation
    g = dist.new_group(list(range(p)), timeout=datetime.timedelta.max)
    t = torch.ones(1)
    dist.all_reduce(t, group=g)
    eq(t, torch.full((1,), float(p)), "all_reduce on a group made with timedelta.max")
    bad_arguments(r, p)
    finish(path)
    destroyed(r, p)
    if fails:
        print("[rank %d] FAILED:\n  %s" % (r, "\n  ".join(fails)))
        sys.exit(1)
    print("[rank %d] ok" % r)


if __name__ == "__main__":
    main()
