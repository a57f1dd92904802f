# SPDX-License-Identifier: BSD-3-Clause
"""The Python binding on 1..4 ranks: every call of mlcomm.h on numpy arrays
(every dtype, in place and out of place, blocking and async), errors as
exceptions, the tensor layer and the exchange; torch tensors when torch is
installed. Run under a launcher (`mlcomm-run -n N python3 test_binding.py`,
mpirun) or as thread ranks (`python3 test_binding.py --threads N`).
Exit 77 (skip) without numpy."""

import os
import sys
import threading
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed (apt-get install python3-numpy)")
    sys.exit(77)
import concurrent.futures
import datetime
import gc

import mlcomm

NP_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]


def val(rank, n, dtype, salt=0):
    """Small integers 1..11: exact in every dtype, also summed over 4 ranks."""
    i = np.arange(n)
    return ((rank * 5 + i * 3 + salt) % 11 + 1).astype(dtype)


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)


def eq(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or not np.array_equal(a, b):
        raise Failed("%s: got %s, expected %s" % (what, a, b))


def raises(exc, fn, what, text=None):
    try:
        fn()
    except exc as e:
        if text is not None and text not in str(e):
            raise Failed("%s: %s raised, but its message %r lacks %r" % (what, exc.__name__, str(e), text))
        return e
    raise Failed("%s: %s not raised" % (what, exc.__name__))


# ---- the cases (each runs on every rank of comm) ---------------------------------
def t_basics(c):
    p, r = c.size, c.rank
    expect(0 <= r < p, "rank %d of %d" % (r, p))
    expect(c.backend in ("threads", "shm", "mpi"), "backend %s" % c.backend)
    expect(c.status is None, "healthy communicator reports %s" % c.status)
    expect(c.tag_max >= 32767, "tag_max %d" % c.tag_max)
    expect(c.memory == "host" and c.device is None, "host backend: memory %r device %r" % (c.memory, c.device))
    expect(mlcomm.version() == mlcomm.__version__, "version")
    expect(mlcomm.status_name(-5) == "MLC_ERR_TIMEOUT", "status_name")
    expect(mlcomm.dtype_size("bf16") == 2 and mlcomm.dtype_name("f32") == "float32", "dtype names")
    expect(mlcomm.as_dtype(np.float64) == mlcomm.DTYPES.index("float64"), "numpy dtype map")
    for name in NP_DTYPES:  # both ways
        expect(mlcomm.numpy_dtype(name) == np.dtype(name), "numpy_dtype(%s)" % name)
    expect(mlcomm.numpy_dtype(mlcomm.record(12)).itemsize == 12, "record dtype")
    expect(mlcomm.op_name(1) == "prod" and mlcomm.coll_name(2) == "allreduce", "names")
    expect(isinstance(c.get_algo("allreduce", 8), str), "get_algo")


def t_allreduce(c):
    p, r = c.size, c.rank
    for dt in NP_DTYPES:
        for n in (0, 1, 7, 1000):
            x = val(r, n, dt)
            want = sum(val(q, n, "float64") for q in range(p)).astype(dt) if n else np.zeros(0, dt)
            eq(c.allreduce(x), want, "allreduce %s n=%d" % (dt, n))
            y = x.copy()
            eq(c.allreduce(y, out=y), want, "allreduce in place %s" % dt)
            eq(y, want, "allreduce in place %s (buffer)" % dt)
    for op, f in (("max", np.max), ("min", np.min)):
        x = val(r, 33, "float32")
        want = f(np.stack([val(q, 33, "float32") for q in range(p)]), axis=0)
        eq(c.allreduce(x, op=op), want, "allreduce %s" % op)
    x = (np.arange(6) % 2 + 1).astype(np.int64)
    eq(c.allreduce(x, op="prod"), x ** p, "allreduce prod")
    x = np.full(5, 4 * (r + 1), dtype=np.float64)
    eq(c.allreduce(x, op="avg"), np.full(5, 4 * (p + 1) / 2), "allreduce avg")
    m = val(r, 12, "int32").reshape(3, 4)
    eq(c.allreduce(m).shape, (3, 4), "allreduce keeps the shape")


def t_shared_memory(c):
    """Arrays of mlcomm.shared_empty: peers read them in place on shm (large calls)."""
    p, r = c.size, c.rank
    n = 100003  # past the engine's 8 KiB slots
    x = mlcomm.shared_empty(n, "float32")
    expect(x.shape == (n,) and x.dtype == np.float32 and not x.any(), "shared_empty: a zeroed float32 array")
    x[:] = val(r, n, "float32")
    out = mlcomm.shared_empty((n,), np.dtype(np.float32))
    want = sum(val(q, n, "float64") for q in range(p)).astype(np.float32)
    eq(c.allreduce(x, out=out), want, "allreduce of shared arrays")
    eq(c.allreduce(out, out=out), want * p, "allreduce in place of a shared array")
    g = mlcomm.shared_empty((p, 4, 1000), "int32")
    eq(c.allgather(np.full((4, 1000), r, np.int32), out=g)[:, 0, 0], np.arange(p), "allgather into a shared array")
    raises(mlcomm.InvalidArgError, lambda: mlcomm.shared_empty((2, -1)), "shared_empty negative shape")
    expect(mlcomm.shared_empty((np.int64(2), 3), "int64").shape == (2, 3), "shared_empty of numpy integer dims")
    del x, out, g  # their blocks are freed (mlc_mem_free) here


def t_reduce_bcast(c):
    p, r = c.size, c.rank
    for root in range(p):
        for dt in ("int32", "float16", "float64"):
            x = val(r, 9, dt, root)
            want = sum(val(q, 9, "float64", root) for q in range(p)).astype(dt)
            out = c.reduce(x, root=root)
            if r == root:
                eq(out, want, "reduce root %d %s" % (root, dt))
            else:
                expect(out is None, "reduce off root returns None")
        b = val(r, 17, "float32", root) if r == root else np.zeros(17, np.float32)
        eq(c.broadcast(b, root=root), val(root, 17, "float32", root), "broadcast in place")
        eq(b, val(root, 17, "float32", root), "broadcast in place (buffer)")
        src = val(r, 5, "int64")
        out = np.zeros(5, np.int64)
        eq(c.broadcast(src, root=root, out=out), val(root, 5, "int64"), "broadcast out of place")
    # a dtype mlcomm lacks moves as bytes
    cx = (np.arange(4) + 1j * r).astype(np.complex64)
    eq(c.broadcast(cx, root=0), (np.arange(4) + 0j).astype(np.complex64), "broadcast complex64")
    # complex sums reduce as pairs of reals
    eq(c.allreduce(np.full(3, 1 + 2j, np.complex128)), np.full(3, p * (1 + 2j)), "allreduce complex")


def t_allgather(c):
    p, r = c.size, c.rank
    for dt in NP_DTYPES:
        x = val(r, 6, dt)
        eq(c.allgather(x), np.stack([val(q, 6, dt) for q in range(p)]), "allgather %s" % dt)
    out = np.zeros((p, 3), np.float32)
    out[r] = val(r, 3, "float32")
    c.allgather(out[r], out=out)  # in place: x is out's block `rank`
    eq(out, np.stack([val(q, 3, "float32") for q in range(p)]), "allgather in place")
    counts = [q + 1 for q in range(p)]
    x = val(r, counts[r], "int32")
    eq(c.allgatherv(x, counts), np.concatenate([val(q, q + 1, "int32") for q in range(p)]), "allgatherv")
    displs = [5 * q for q in range(p)]
    out = np.full(5 * p, -1, np.int32)
    c.allgatherv(x, counts, out=out, displs=displs)
    for q in range(p):
        eq(out[5 * q:5 * q + q + 1], val(q, q + 1, "int32"), "allgatherv displs, rank %d" % q)


def t_reduce_scatter_alltoall(c):
    p, r = c.size, c.rank
    for dt in ("int8", "uint32", "float16", "float64"):
        x = val(r, 4 * p, dt)
        full = sum(val(q, 4 * p, "float64") for q in range(p)).astype(dt)
        eq(c.reduce_scatter(x), full[4 * r:4 * r + 4], "reduce_scatter %s" % dt)
    m = val(r, 2 * p * 3, "float32").reshape(2 * p, 3)
    eq(c.reduce_scatter(m).shape, (2, 3), "reduce_scatter shape")
    # in place: out is x's block `rank`
    x = val(r, 5 * p, "float32")
    full = sum(val(q, 5 * p, "float64") for q in range(p)).astype("float32")
    c.reduce_scatter(x, out=x[5 * r:5 * r + 5])
    eq(x[5 * r:5 * r + 5], full[5 * r:5 * r + 5], "reduce_scatter in place")
    # alltoall: block j goes to rank j
    x = np.array([100 * r + j for j in range(p) for _ in range(2)], np.int64)
    eq(c.alltoall(x), np.array([100 * q + r for q in range(p) for _ in range(2)]), "alltoall")
    y = x.copy()
    c.alltoall(y, out=y)
    eq(y, np.array([100 * q + r for q in range(p) for _ in range(2)]), "alltoall in place")
    # alltoallv: rank r sends j+1 elements to rank j
    sc = [j + 1 for j in range(p)]
    rc = [r + 1] * p
    x = np.concatenate([np.full(j + 1, 10 * r + j, np.float64) for j in range(p)])
    want = np.concatenate([np.full(r + 1, 10 * q + r, np.float64) for q in range(p)])
    eq(c.alltoallv(x, sc, rc), want, "alltoallv")


def t_gather_scatter(c):
    p, r = c.size, c.rank
    for root in range(p):
        x = val(r, 4, "uint8", root)
        g = c.gather(x, root=root)
        if r == root:
            eq(g, np.stack([val(q, 4, "uint8", root) for q in range(p)]), "gather")
        else:
            expect(g is None, "gather off root")
        counts = [q + 2 for q in range(p)]
        gv = c.gatherv(val(r, r + 2, "int64"), counts if r == root else None, root=root)
        if r == root:
            eq(gv, np.concatenate([val(q, q + 2, "int64") for q in range(p)]), "gatherv")
        src = np.arange(3 * p, dtype=np.float32) * (root + 1) if r == root else None
        out = np.zeros(3, np.float32)
        eq(c.scatter(src, out, root=root), np.arange(3 * r, 3 * r + 3, dtype=np.float32) * (root + 1),
           "scatter")
        src = np.arange(sum(counts), dtype=np.int32) if r == root else None
        out = np.zeros(r + 2, np.int32)
        off = sum(counts[:r])
        eq(c.scatterv(src, counts, out, root=root), np.arange(off, off + r + 2, dtype=np.int32), "scatterv")
    c.barrier()


def t_p2p(c):
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    out = np.zeros(8, np.float64)
    st = c.sendrecv(val(r, 8, "float64"), right, out, source=left, sendtag=5, recvtag=5)
    eq(out, val(left, 8, "float64"), "sendrecv")
    expect(st.source == left and st.tag == 5 and st.bytes == 64, "sendrecv status %s" % (st,))
    if p >= 2:
        if r == 0:
            got = set()
            for _ in range(p - 1):
                s = c.probe(tag=7)
                buf = np.zeros(s.bytes // 4, np.int32)
                st = c.recv(buf, source=s.source, tag=7)
                eq(buf, np.full(st.source, st.source, np.int32), "recv from %d" % st.source)
                got.add(st.source)
            expect(got == set(range(1, p)), "any-source receives %s" % got)
            expect(c.iprobe(tag=8) is None, "iprobe finds no message nobody sent")
        else:
            c.send(np.full(r, r, np.int32), 0, tag=7)
        # async ring, both directions
        rb = np.zeros(3, np.int64)
        rq = c.recv(rb, source=left, tag=9, async_op=True)
        sq = c.send(np.full(3, r, np.int64), right, tag=9, async_op=True)
        st = rq.result()
        sq.wait()
        eq(rb, np.full(3, left), "async ring")
        expect(st == mlcomm.Status(left, 9, 24), "async recv status %s" % (st,))
    # iprobe finds a message to self
    sq = c.send(np.arange(2, dtype=np.uint8), r, tag=11, async_op=True)
    s = None
    for _ in range(100000):
        s = c.iprobe(source=r, tag=11)
        if s is not None:
            break
    expect(s is not None and s.bytes == 2, "iprobe to self %s" % (s,))
    b = np.zeros(2, np.uint8)
    c.recv(b, source=r, tag=11)
    sq.wait()
    eq(b, np.arange(2), "self message")
    # truncation names both sizes
    sq = c.send(np.arange(10, dtype=np.int32), r, tag=12, async_op=True)
    raises(mlcomm.TruncateError, lambda: c.recv(np.zeros(3, np.int32), source=r, tag=12), "truncate")
    sq.wait()


def t_async(c):
    p, r = c.size, c.rank
    reqs = [c.allreduce(val(r, 100, "float32", k), async_op=True) for k in range(4)]
    reqs.append(c.allgather(np.array([r], np.int32), async_op=True))
    reqs.append(c.barrier(async_op=True))
    seen = []
    reqs[0].add_done_callback(lambda f: seen.append(f.result()[0]))
    res = mlcomm.wait_all(reqs)
    for k in range(4):
        eq(res[k], sum(val(q, 100, "float64", k) for q in range(p)).astype("float32"), "async %d" % k)
    eq(res[4], np.arange(p).reshape(p, 1), "async allgather")
    expect(res[5] is None and len(seen) == 1, "barrier result / done callback")
    # as a concurrent.futures.Future
    f = c.allreduce(np.ones(4), async_op=True)
    expect(isinstance(f, concurrent.futures.Future), "Request is a Future")
    while not f.done():
        pass
    eq(f.result(timeout=10), np.full(4, float(p)), "future result")
    expect(f.exception() is None, "future exception")
    expect(list(concurrent.futures.as_completed([f], timeout=1)) == [f], "as_completed on a done request")
    if p >= 2:  # a receive nobody sends to is not complete: wait(timeout) says so, test() too
        rq = c.recv(np.zeros(1), source=(r + 1) % p, tag=21, async_op=True)
        expect(not rq.test(), "pending test")
        raises(concurrent.futures.TimeoutError, lambda: rq.wait(timeout=0.05), "wait timeout")
        c.barrier()
        c.send(np.full(1, 3.0), (r - 1) % p, tag=21)
        expect(rq.wait().source == (r + 1) % p, "late message arrives")


def t_userop(c):
    p, r = c.size, c.rank

    def absmax(a, b):
        np.copyto(b, np.where(np.abs(a) > np.abs(b), a, b))

    op = mlcomm.op_create(absmax, commutative=True)
    try:
        x = np.array([(-1) ** r * r, r, -r], np.float64)
        eq(c.allreduce(x, op=op), np.array([(-1) ** (p - 1) * (p - 1), p - 1, -(p - 1)], np.float64),
           "user op")
        a, b = np.array([1, -5], np.int32), np.array([2, 3], np.int32)
        eq(mlcomm.reduce_local(a, b, op), np.array([2, -5]), "reduce_local user op")
    finally:
        op.free()

    def concat(a, b):  # non-commutative: rank order
        b[:] = a * 10 + b

    op = mlcomm.op_create(concat, commutative=False)
    try:
        eq(c.allreduce(np.array([r + 1], np.int64), op=op), np.array([int("".join(str(q + 1) for q in range(p)))]),
           "non-commutative user op")
    finally:
        op.free()
    a, b = np.ones(3), np.full(3, 2.0)
    eq(mlcomm.reduce_local(a, b, "sum"), np.full(3, 3.0), "reduce_local sum")

    # An op may return the combination instead of storing it (another shape fails the call).
    op = mlcomm.op_create(lambda a, b: a + b, commutative=True)
    try:
        eq(c.allreduce(np.arange(4, dtype=np.int64) * (r + 1), op=op),
           np.arange(4, dtype=np.int64) * (p * (p + 1) // 2), "user op that returns its result")
    finally:
        op.free()
    if p > 1:
        op = mlcomm.op_create(lambda a, b: a[:1] + b[:1], commutative=True)
        try:
            with c.split(0, key=r) as d:
                raises(mlcomm.Error, lambda: d.allreduce(np.ones(4, np.int64), op=op), "user op returning a slice",
                       "shape")
        finally:
            op.free()

    # An op that raises on rank 0 only: rank 0 raises its exception again,
    # a rank that returns holds the exact sum, the others raise UserOpError
    # naming it, and the communicator is failed on every rank afterwards.
    def refuses_on_0(a, b):
        if r == 0:
            raise ZeroDivisionError("refused on rank 0")
        np.add(a, b, out=b)

    op = mlcomm.op_create(refuses_on_0, commutative=True)
    try:
        if r == 0:
            raises(ZeroDivisionError, lambda: mlcomm.reduce_local(np.ones(2, np.int64), np.ones(2, np.int64), op),
                   "reduce_local of a raising op")
        for async_op in (False, True):
            if p == 1:
                break
            with c.split(0, key=r) as d:
                x, want = np.full(100000, r + 1, np.int64), np.full(100000, p * (p + 1) // 2, np.int64)
                try:
                    got = d.allreduce(x, op=op, async_op=async_op)
                    if async_op:
                        got = got.wait()
                    expect(r != 0, "rank 0's op raised, yet its call returned")
                    eq(got, want, "a call that returned while rank 0's op raised")
                except ZeroDivisionError:
                    expect(r == 0, "rank %d raised rank 0's exception" % r)
                except mlcomm.UserOpError as e:
                    expect(r != 0 and "refused on rank 0" in str(e), "UserOpError on rank %d: %s" % (r, e))
                raises(mlcomm.UserOpError, d.barrier, "the next call after a user op failed")
    finally:
        op.free()


def t_errors(c):
    p, r = c.size, c.rank
    e = raises(mlcomm.InvalidArgError, lambda: c.allreduce(np.zeros((4, 4))[:, 1]), "non-contiguous",
               "not C-contiguous")
    expect(isinstance(e, ValueError) and e.name == "MLC_ERR_INVALID_ARG", "InvalidArgError is a ValueError")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(np.zeros(2), op="median"), "unknown op", "median")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(np.zeros(2, np.int16)), "int16 reduction", "int16")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(np.zeros(3), out=np.zeros(4)), "size mismatch")
    raises(mlcomm.InvalidArgError, lambda: c.allgather([1, 2]), "list input", "numpy array")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(np.zeros(4), out=np.zeros(0)), "empty out")
    raises(mlcomm.InvalidArgError, lambda: c.send(np.zeros(1), p + 3), "bad peer")
    raises(mlcomm.InvalidArgError, lambda: c.broadcast(np.zeros(1), root=p), "bad root")
    if p > 1:
        raises(mlcomm.InvalidArgError, lambda: c.allgatherv(np.zeros(1), [1]), "counts length", "entries")
    # an output of another dtype is refused, not filled with reinterpreted bits
    f32 = np.ones(2, np.float32)
    raises(mlcomm.InvalidArgError, lambda: c.allgather(f32, out=np.zeros(2 * p, np.int32)), "allgather out dtype",
           "int32")
    raises(mlcomm.InvalidArgError, lambda: c.broadcast(f32, out=np.zeros(2, np.int32)), "broadcast out dtype",
           "int32")
    raises(mlcomm.InvalidArgError, lambda: c.alltoall(np.ones(p, np.float32), out=np.zeros(p, np.int32)),
           "alltoall out dtype", "int32")
    # at the root only (the others would wait for it): refused there, before anything moves
    solo = c.split(r, 0)
    raises(mlcomm.InvalidArgError, lambda: solo.gather(f32, root=0, out=np.zeros(2, np.int32)),
           "gather out dtype", "int32")
    raises(mlcomm.InvalidArgError, lambda: solo.scatter(np.ones(2, np.int32), f32, root=0),
           "scatter x dtype", "int32")
    solo.free()
    raises(mlcomm.InvalidArgError, lambda: mlcomm.as_dtype("float128"), "unknown dtype name")
    # the message names what the caller set, not the C struct's field
    raises(mlcomm.InvalidArgError, lambda: mlcomm.init(backend="shmm"), "unknown backend",
           ": backend 'shmm' is not one of")
    raises(mlcomm.InvalidArgError, lambda: mlcomm.as_dtype(np.int16), "a numpy dtype mlcomm lacks", "record(2)")
    # mismatched counts across ranks fail every rank with both sides named
    if p >= 2:
        sub = c.split(0, r)
        e = raises(mlcomm.MismatchError, lambda: sub.allreduce(np.zeros(4 + r, np.float32)), "mismatch",
                   "allreduce")
        expect("count=" in e.message, "mismatch message names counts: %s" % e.message)
        expect(sub.status == "MLC_ERR_MISMATCH", "sticky mismatch: %s" % sub.status)
        raises(mlcomm.MismatchError, lambda: sub.barrier(), "sticky error")
        sub.free()
    # abort on a split communicator: every rank's pending and later calls fail
    sub = c.split(0, r)
    if r == 0:
        sub.abort()
    else:
        raises(mlcomm.AbortedError, lambda: sub.allreduce(np.zeros(1)), "abort reaches peers")
    raises(mlcomm.AbortedError, lambda: sub.barrier(), "after abort")
    sub.free()
    sub.free()  # a second free is a no-op
    raises(mlcomm.InvalidArgError, lambda: sub.rank, "freed communicator", "freed")
    c.barrier()


def t_split(c):
    p, r = c.size, c.rank
    with c.split(r % 2, key=-r) as sub:
        members = [q for q in range(p) if q % 2 == r % 2]
        expect(sub.size == len(members), "split size")
        expect(sub.rank == sorted(members, reverse=True).index(r), "split key order")
        eq(sub.allreduce(np.array([r], np.int64)), np.array([sum(members)]), "split allreduce")
    none = c.split(None if r == 0 else 1)
    expect((none is None) == (r == 0), "split UNDEFINED gives None")
    if none is not None:
        expect(none.size == p - 1, "split without rank 0")
        none.free()


def t_timeout(c):
    """set_timeout takes seconds or a timedelta, per communicator; on mpi a
    communicator created without a deadline on every rank refuses one (its
    blocking collectives are MPI's, which no deadline ends) and still works."""
    sub = c.split(0)
    try:
        sub.set_timeout(datetime.timedelta(seconds=45))
        expect(sub.timeout == 45 and c.timeout != 45, "timeouts %r / %r" % (sub.timeout, c.timeout))
        eq(sub.allreduce(np.array([1], np.int64)), np.array([c.size]), "allreduce after set_timeout")
    finally:
        sub.free()
    if c.backend != "mpi":
        return
    none = mlcomm.init("mpi", timeout=0)
    try:
        raises(mlcomm.UnsupportedError, lambda: none.set_timeout(5), "a deadline on a no-deadline mpi comm",
               "MLC_TIMEOUT")
        expect(none.timeout == 0, "the refused timeout was kept: %r" % none.timeout)
        eq(none.allreduce(np.array([2], np.int64)), np.array([2 * c.size]), "allreduce after the refusal")
    finally:
        none.free()


def t_tensor(c):
    p, r = c.size, c.rank
    T = mlcomm.tensor
    # dim-aware all-gather with uneven shards (rank r has r+1 columns)
    shard = np.full((2, r + 1, 3), r, np.float32)
    full = T.allgather(c, shard, dim=1)
    eq(full.shape, (2, sum(q + 1 for q in range(p)), 3), "tensor allgather shape")
    eq(full[0, :, 0], np.concatenate([np.full(q + 1, q) for q in range(p)]), "tensor allgather")
    full = T.allgather(c, np.full((2, 2), r, np.int32), dim=-1, async_op=True).wait()
    eq(full[1], np.repeat(np.arange(p), 2), "tensor allgather dim -1, async")
    # reduce-scatter along dim 1 of a (3, 7) tensor: the even split
    x = np.tile(np.arange(7, dtype=np.float64), (3, 1)) * (r + 1)
    part = T.reduce_scatter(c, x, dim=1)
    off, n = T.split(7, p, r)
    eq(part, np.tile(np.arange(off, off + n), (3, 1)) * (p * (p + 1) / 2), "tensor reduce_scatter")
    eq(T.allreduce(c, np.full((2, 2), 1, np.int64)), np.full((2, 2), p), "tensor allreduce")
    b = np.full(3, r, np.float64)
    T.broadcast(c, b, root=p - 1)
    eq(b, np.full(3, p - 1.0), "tensor broadcast")
    T.barrier(c)
    if p >= 2:  # shapes that do not fit fail on every rank, naming them
        raises(mlcomm.MismatchError, lambda: T.allreduce(c, np.zeros((2, 2 + r))), "tensor shape mismatch")
        return  # the communicator failed: later cases make their own
    expect(T.get_checks(c) == "full", "checks")


def t_mesh(c):
    p, r = c.size, c.rank
    if p != 4:
        return
    T = mlcomm.tensor
    with T.Mesh(c, [2, -1], ["dp", "tp"]) as mesh:
        expect(mesh.shape == (2, 2) and mesh.names == ("dp", "tp"), "mesh shape %s" % (mesh.shape,))
        expect(mesh.coords() == (r // 2, r % 2), "mesh coords")
        expect(mesh.rank_of(mesh.coords()) == r, "rank_of")
        tp = mesh.comm("tp")
        eq(tp.allreduce(np.array([r])), np.array([2 * (r // 2) * 2 + 1]), "tp group sum")
        dp = mesh.comm(mesh.axis("dp"))
        eq(dp.allgather(np.array([r]))[:, 0], np.array([r % 2, r % 2 + 2]), "dp group")
        with mesh.group(["dp", "tp"]) as g:
            expect(g.size == 4, "group over both axes")


def t_exchange(c):
    p, r = c.size, c.rank
    X = mlcomm.exchange
    # a periodic 1-D domain of 4*p cells, 4 per rank, one ghost cell each side
    n = 4
    a = np.zeros(n + 2, np.float64)
    a[1:-1] = r * 100 + np.arange(n)
    with X.Exchange(c, 1, "float64", domain=((0,), (n * p,)), periodic=[True]) as ex:
        ex.provide(a, origin=(r * n - 1,), region=((r * n,), (n,)))
        for start, shape in X.box_halo((r * n,), (n,), (1,)):
            ex.need(a, origin=(r * n - 1,), region=(start, shape))
        ex.build()
        ex.run()
        left, right = (r - 1) % p, (r + 1) % p
        expect(a[0] == left * 100 + n - 1 and a[-1] == right * 100, "halo %s" % a)
        info = ex.info()
        expect(info["runs"] == 1 and info["executor"], "exchange info %s" % info)
        a[1:-1] += 1
        ex.start()
        ex.finish()
        expect(a[0] == left * 100 + n, "second exchange")
    # global combine: a (min, argmin) pair per value, any size
    vals = np.array([[float(5 - r), r], [float(r), r]])

    def minloc(x, y):
        if x[0] < y[0] or (x[0] == y[0] and x[1] < y[1]):
            y[:] = x

    out = X.combine(c, vals, minloc)
    eq(out, np.array([[5.0 - (p - 1), p - 1], [0.0, 0]]), "combine minloc")


def t_create_from(c):
    if c.rank != 0:
        return
    comms = mlcomm.create_from("threads", {"world_size": 1, "timeout": 30})
    expect(len(comms) == 1 and comms[0].size == 1, "create_from threads")
    eq(comms[0].allreduce(np.arange(3)), np.arange(3), "1-rank allreduce")
    comms[0].free()
    raises(mlcomm.ConfigError, lambda: mlcomm.create_from("threads", {"nope": 1}), "unknown option", "nope")


def t_group(c):
    """Every rank sends to its right and receives from its left inside a
    group, blocking form (8 MiB: one by one this would wait for a receiver),
    then the request form; results exist once the group ends."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    n = 1 << 20
    x = np.arange(n, dtype=np.float64) + r * n
    got = np.zeros(n)
    with mlcomm.group():
        expect(c.send(x, right) is None, "grouped send returns None")
        expect(c.recv(got, left) is None, "grouped blocking recv returns None (status at the end)")
        total = c.allreduce(np.full(4096, r + 1))  # its input is a temporary only the binding holds
        junk = [np.full(4096, -7) for _ in range(64)]  # would reuse that memory, were it freed
    eq(got, np.arange(n, dtype=np.float64) + left * n, "grouped ring, blocking form")
    eq(total, np.full(4096, p * (p + 1) // 2), "grouped allreduce of a temporary")
    del junk

    got2 = np.zeros(n)
    mlcomm.group_start()
    rs = c.send(x * 2, right, async_op=True)
    rr = c.recv(got2, left, async_op=True)
    raises(mlcomm.InvalidArgError, rr.wait, "waiting inside the group", "group")
    raises(mlcomm.InvalidArgError, rr.test, "testing inside the group", "group")
    mlcomm.group_end()
    st = rr.wait()
    rs.wait()
    expect(st.source == left and st.bytes == n * 8, "grouped recv status %r" % (st,))
    eq(got2, (np.arange(n, dtype=np.float64) + left * n) * 2, "grouped ring, request form")

    with mlcomm.group():  # nested: only the outer end completes
        with mlcomm.group():
            c.send(x[:4], right, tag=3)
        c.recv(got[:4], left, tag=3)
    eq(got[:4], np.arange(4, dtype=np.float64) + left * n, "nested groups")
    # a v-collective's counts and displacements (arrays the package makes) live until the end
    with mlcomm.group():
        gv = c.allgatherv(np.full(r + 1, r, dtype=np.int32), [k + 1 for k in range(p)])
        junk = [mlcomm._lib.sizes([123456789] * p) for _ in range(64)]
    del junk
    eq(gv, np.concatenate([np.full(k + 1, k, dtype=np.int32) for k in range(p)]), "grouped allgatherv")
    with mlcomm.group():  # calls not meant for an open group are refused, and leave it usable
        raises(mlcomm.InvalidArgError, lambda: mlcomm.tensor.allgather(c, np.zeros(2)), "tensor call in a group",
               "group")
        c.send(x[:2], right, tag=4)
        c.recv(got[:2], left, tag=4)
        raises(mlcomm.InvalidArgError, c.free, "free of a communicator the group uses", "group")
    expect(c.status is None and c.size == p, "communicator usable after a refused free")
    eq(got[:2], np.arange(2, dtype=np.float64) + left * n, "group after refused calls")
    raises(mlcomm.InvalidArgError, mlcomm.group_end, "group_end without a group", "group")


class DirStore:
    """A store in a directory all ranks see: set writes a file atomically,
    get raises KeyError until it exists (the plain-object store protocol)."""

    def __init__(self, path):
        self.path = path

    def _file(self, key):
        return os.path.join(self.path, key.replace("/", "%"))

    def set(self, key, value):
        tmp = self._file(key) + ".%d.%d.tmp" % (os.getpid(), threading.get_ident())
        with open(tmp, "wb") as f:
            f.write(value)
        os.rename(tmp, self._file(key))

    def get(self, key):
        try:
            with open(self._file(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise KeyError(key) from None


class RaisingStore:
    def set(self, key, value):
        raise RuntimeError("disk on fire")

    def get(self, key):
        raise KeyError(key)


def shared_dir(c, tag):
    """A fresh directory rank 0 makes, its path known to every rank."""
    import tempfile
    b = np.zeros(256, dtype=np.uint8)
    if c.rank == 0:
        d = tempfile.mkdtemp(prefix="mlcomm-store-%s-" % tag).encode()
        b[:len(d)] = np.frombuffer(d, dtype=np.uint8)
    c.broadcast(b)
    return bytes(b).rstrip(b"\0").decode()


def check_store_comm(c, store, what):
    p, r = c.size, c.rank
    nc = mlcomm.init(store=store, rank=r, size=p, timeout=30)
    try:
        expect(nc.rank == r and nc.size == p, "%s: rank %d of %d" % (what, nc.rank, nc.size))
        expect(nc.memory == "host" and nc.device is None, "%s: memory/device" % what)
        eq(nc.allreduce(np.array([r + 1])), np.array([p * (p + 1) // 2]), "%s: allreduce" % what)
    finally:
        nc.free()


def t_store(c):
    import shutil
    d = shared_dir(c, "dir")
    try:
        check_store_comm(c, DirStore(d), "directory store")
        c.barrier()
        # one store serves one communicator: reusing it is refused at once on every rank
        raises(mlcomm.InvalidArgError, lambda: mlcomm.init(store=DirStore(d), rank=c.rank, size=c.size,
                                                           timeout=30), "reused store", "mlc/")
    finally:
        c.barrier()
        if c.rank == 0:
            shutil.rmtree(d)
    if c.rank == 0:  # failures stay on this rank: a raising store ends the init at once
        e = raises(mlcomm.BackendError, lambda: mlcomm.init(store=RaisingStore(), rank=0, size=2, timeout=30),
                   "raising store", "disk on fire")
        expect(isinstance(e.__cause__, RuntimeError), "the store's exception is the cause")
        raises(mlcomm.InvalidArgError, lambda: mlcomm.init(store=object(), rank=0, size=2), "not a store",
               "set(key, value)")
        raises(mlcomm.InvalidArgError, lambda: mlcomm.init(store=DirStore("/nonexistent")), "store without rank",
               "rank and size")
    try:
        import torch.distributed as dist
    except ImportError:
        print("torch not installed: torch store case skipped")
    else:
        # torch's stores as torch uses them: one rank per process. (Thread
        # ranks calling torch 1.13's stores at once from one process crashed
        # it now and then at 4 ranks, inside the store's own calls.)
        if c.backend == "threads":
            return
        d = shared_dir(c, "torch")
        fs = dist.FileStore(os.path.join(d, "store"), c.size)
        check_store_comm(c, dist.PrefixStore("first", fs), "torch store")
        check_store_comm(c, dist.PrefixStore("second", fs), "torch store, second prefix")
        c.barrier()
        del fs
        c.barrier()
        if c.rank == 0:
            shutil.rmtree(d, ignore_errors=True)


def t_buffer_safety(c):
    """What the C library cannot check: Python objects, buffer bounds of the
    v-forms, lazy torch views, and buffers of a request the caller dropped."""
    p, r = c.size, c.rank
    # object arrays hold pointers into this process: refused before any C call
    raises(mlcomm.InvalidArgError, lambda: c.broadcast(np.array(["a", None], dtype=object)), "object array",
           "object")
    raises(mlcomm.InvalidArgError, lambda: c.allgather(np.zeros(2, dtype=[("k", "i4"), ("o", "O")])),
           "structured array with an object field", "object")
    # v-forms: every block must lie inside its array (a one-rank communicator:
    # each rank is the root, and no peer is left waiting in C)
    solo = c.split(r, 0)
    x = np.arange(4, dtype=np.int64)
    raises(mlcomm.InvalidArgError, lambda: solo.allgatherv(x, [4], out=np.zeros(3, np.int64)),
           "allgatherv out too short", "out")
    raises(mlcomm.InvalidArgError, lambda: solo.allgatherv(x, [4], out=np.zeros(5, np.int64), displs=[2]),
           "allgatherv displs past out", "out")
    raises(mlcomm.InvalidArgError, lambda: solo.allgatherv(x, [2 ** 64]), "allgatherv count past 64 bits",
           "counts")
    raises(mlcomm.InvalidArgError, lambda: solo.alltoallv(x, [4], [4], out=np.zeros(3, np.int64)),
           "alltoallv out too short", "out")
    raises(mlcomm.InvalidArgError, lambda: solo.alltoallv(x, [3], [3], sdispls=[2]), "alltoallv x too short",
           "x")
    raises(mlcomm.InvalidArgError, lambda: solo.gatherv(x, [4], out=np.zeros(2, np.int64)),
           "gatherv out too short", "out")
    raises(mlcomm.InvalidArgError, lambda: solo.scatterv(x, [3], np.zeros(3, np.int64), displs=[2]),
           "scatterv x too short", "x")
    raises(mlcomm.InvalidArgError, lambda: solo.allgatherv(x, [4], out=np.zeros(8, np.int64), displs=[-1]),
           "negative displacement", "negative")
    eq(solo.alltoallv(x, [2], [2], sdispls=[2], rdispls=[1], out=np.zeros(3, np.int64)), [0, 2, 3],
       "alltoallv blocks that fit")
    solo.free()
    # a request dropped while in flight keeps its buffers until it completes
    if p >= 2:
        c.recv(np.empty(2000), source=(r - 1) % p, tag=77, async_op=True)  # dropped at once
        gc.collect()
        fresh = [np.full(2000, -7.0) for _ in range(64)]
        c.barrier()
        c.send(np.full(2000, 5.0), (r + 1) % p, tag=77)
        c.barrier()
        c.allreduce(np.zeros(1), async_op=True).wait()
        expect(all((a == -7.0).all() for a in fresh), "a dropped receive wrote into arrays made after it")
    try:
        import torch
    except ImportError:
        return
    # lazy conjugate views are moved by value; as an output one is refused
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()
    expect(bool(z.is_conj()), "torch makes conj() lazily")
    want = torch.tensor([1 - 2j, 3 + 1j]) * p
    expect(torch.equal(c.allreduce(z), want), "allreduce of a conjugate view")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(z, out=z), "conjugate view as output", "conj")
    # sparse tensors have no one block of memory to move
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(torch.ones(3).to_sparse()), "sparse tensor", "sparse")


def t_torch(c):
    try:
        import torch
    except ImportError:
        print("torch not installed: torch tensor cases skipped")
        return
    p, r = c.size, c.rank
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
               torch.int32, torch.int64):
        x = torch.arange(6).to(dt) + r
        want = (torch.arange(6).to(torch.float64) * p + sum(range(p))).to(dt)
        expect(torch.equal(c.allreduce(x), want), "torch allreduce %s" % dt)
    y = torch.full((2, 3), float(r))
    c.allreduce(y, op="max", out=y)
    expect(torch.equal(y, torch.full((2, 3), float(p - 1))), "torch in place max")
    g = c.allgather(torch.tensor([r, r], dtype=torch.int16))  # int16 moves as bytes
    expect(torch.equal(g, torch.arange(p, dtype=torch.int16).repeat_interleave(2).reshape(p, 2)),
           "torch allgather int16")
    b = torch.tensor([True, False]) if r == 0 else torch.tensor([False, True])
    expect(torch.equal(c.broadcast(b, root=0), torch.tensor([True, False])), "torch bool broadcast")
    expect(torch.equal(c.allreduce(torch.tensor([r == 0, False]), op="max"), torch.tensor([True, False])),
           "torch bool max")
    raises(mlcomm.InvalidArgError, lambda: c.allreduce(torch.zeros(4, 4)[:, 0]), "torch non-contiguous")
    full = mlcomm.tensor.allgather(c, torch.full((1, 2), float(r)), dim=0)
    expect(full.shape == (p, 2) and torch.equal(full[:, 0], torch.arange(p, dtype=torch.float32)),
           "torch tensor allgather")


CASES = [t_basics, t_allreduce, t_shared_memory, t_reduce_bcast, t_allgather, t_reduce_scatter_alltoall, t_gather_scatter,
         t_p2p, t_group, t_store, t_async, t_userop, t_split, t_timeout, t_create_from, t_mesh, t_exchange, t_torch, t_buffer_safety, t_tensor, t_errors]


def run_rank(comm, only):
    """Every case on this rank; a failure aborts the communicator so peers stop too."""
    for case in CASES:
        if only and case.__name__ not in only:
            continue
        # each case on a communicator of its own (t_tensor and t_errors fail theirs on purpose)
        sub = comm.split(0, comm.rank)
        try:
            case(sub)
        finally:
            if sub.status is None:
                sub.barrier()
            sub.free()
    comm.barrier()


def main():
    args = sys.argv[1:]
    threads = None
    if args[:1] == ["--threads"]:
        threads = int(args[1])
        args = args[2:]
    only = set(args)
    failures = []
    if threads:
        comms = mlcomm.init_all(threads, timeout=60)

        def body(cm):
            try:
                run_rank(cm, only)
            except BaseException:
                failures.append("[rank %d] %s" % (cm.rank, traceback.format_exc()))
                cm.abort()

        ts = [threading.Thread(target=body, args=(cm,)) for cm in comms]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for cm in comms:
            cm.free()
        where = "%d thread ranks" % threads
    else:
        comm = mlcomm.init(timeout=float(os.environ.get("MLC_TIMEOUT", 60)))
        try:
            run_rank(comm, only)
        except BaseException:
            failures.append("[rank %d] %s" % (comm.rank, traceback.format_exc()))
            comm.abort()
        where = "rank %d of %d on %s" % (comm.rank, comm.size, comm.backend)
        comm.free()
    if failures:
        sys.stderr.write("".join(failures))
        print("FAILED (%s)" % where)
        sys.exit(1)
    print("ok: %d cases (%s)" % (len([c for c in CASES if not only or c.__name__ in only]), where))


if __name__ == "__main__":
    main()
