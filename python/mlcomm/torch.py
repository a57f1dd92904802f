# SPDX-License-Identifier: BSD-3-Clause
"""torch.distributed backend "mlcomm": importing this module registers it.

    import torch.distributed as dist
    import mlcomm.torch  # noqa: F401
    dist.init_process_group("mlcomm")   # rank, size, store from env:// as for gloo

Every process group (the default one and each new_group) is an mlcomm
communicator whose ranks bootstrap through torch's store
(mlc_comm_init_store), each init under a key prefix of its own, so two
jobs, or two groups of one job, never share one. Its backend is the one
mlcomm picks for the job (`shm` when every rank is on one host), or the one
MLCOMM_TORCH_BACKEND names. The
`timeout` of init_process_group / new_group is the communicator's timeout
(an operation that makes no progress for that long fails on every rank).

Collectives run to completion inside the call (blocking mlcomm calls; the
Work returned is complete) unless MLCOMM_TORCH_ASYNC=1, which starts them as
mlcomm requests completed by Work.wait(). Point-to-point operations are
always asynchronous. Work.get_future() waits, and returns a completed future. CPU tensors; CUDA tensors where the communicator's memory kind
allows (MLC_MEMORY=cuda or auto)."""

import collections
import concurrent.futures
import ctypes
import datetime
import inspect
import os
import time
import warnings

import torch
import torch.distributed as dist

from . import _lib
from . import _core
from ._errors import Error, UnsupportedError, error

__all__ = ["ProcessGroupMlcomm", "BACKEND"]

BACKEND = "mlcomm"
# Collectives run to completion inside the call unless MLCOMM_TORCH_ASYNC=1:
# mlcomm's asynchronous requests are progressed by a thread per rank, which
# costs more than the overlap gains where ranks have no spare cores.
# Point-to-point operations are always asynchronous (isend/irecv pairs).
_ASYNC = os.environ.get("MLCOMM_TORCH_ASYNC", "0") == "1"
_Work = getattr(dist, "_Work", None) or getattr(dist, "Work")

_RED = dist.ReduceOp
_OPS = [(_RED.SUM, "sum"), (_RED.PRODUCT, "prod"), (_RED.MIN, "min"), (_RED.MAX, "max")]
if hasattr(_RED, "AVG"):
    _OPS.append((_RED.AVG, "avg"))


def _op(opts):
    op = getattr(opts, "reduceOp", _RED.SUM)
    for red, name in _OPS:
        if op == red:
            return name
    label = next((n for n in ("BAND", "BOR", "BXOR", "PREMUL_SUM") if hasattr(_RED, n) and op == getattr(_RED, n)),
                 str(op))
    raise RuntimeError("mlcomm: reduce op %s is not supported (sum, product, min, max, avg are)" % label)


def _runtime(e):
    """torch expects RuntimeError from a failed collective; a timeout says
    "Timed out", as gloo's do (torch's tests and tools match on it)."""
    if isinstance(e, Error) and e.name == "MLC_ERR_TIMEOUT":
        return RuntimeError("mlcomm: %s: Timed out (%s)" % (e.name, e.message))
    return RuntimeError("mlcomm: %s" % e)


class _Op:
    """One started mlcomm operation: its request handle and what it needs kept."""

    __slots__ = ("h", "keep", "status")

    def __init__(self, h, keep, status=None):
        self.h, self.keep, self.status = h, keep, status


class Work(_Work):
    """An operation of a ProcessGroupMlcomm (one or more mlcomm requests, then
    an optional step that copies results into the caller's tensors)."""

    def __init__(self, pg, ops, result, finish=None):
        super().__init__()
        self._pg = pg
        self._ops = ops
        self._result = result
        self._finish = finish
        self._done = not ops and finish is None
        self._exc = None
        self._source = -1

    def _complete(self, st):
        if st != 0 and self._exc is None:
            self._exc = _runtime(error(st))

    def _close(self):
        self._ops = []
        if self._finish is not None and self._exc is None:
            try:
                self._finish()
            except Exception as e:
                self._exc = _runtime(e)
        self._finish = None
        self._done = True
        self._pg._retire(self)

    def wait(self, timeout=None):
        if not self._done:
            secs = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else (timeout or 0)
            if secs > 0:
                deadline = time.monotonic() + secs
                while not self.is_completed():
                    if time.monotonic() > deadline:
                        raise RuntimeError("mlcomm: operation timed out after %g s (Work.wait timeout)" % secs)
                    time.sleep(0)
            else:
                for o in self._ops:
                    if o.h.value:
                        self._complete(_lib.request_wait(ctypes.byref(o.h)))
                    if o.status is not None and self._source < 0:
                        self._source = o.status.source
                self._close()
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self):
        if self._done:
            return True
        flag = ctypes.c_int(0)
        for o in self._ops:
            if o.h.value:
                st = _lib.request_test(ctypes.byref(o.h), ctypes.byref(flag))
                if st != 0:
                    self._complete(st)
                elif not flag.value:
                    return False
            if o.status is not None and self._source < 0:
                self._source = o.status.source
        self._close()
        return True

    def is_success(self):
        return self.is_completed() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        self.wait()
        return self._result

    def source_rank(self):
        self.wait()
        return self._source

    _source_rank = source_rank

    def get_future(self):
        fut = torch.futures.Future()
        try:
            self.wait()
            fut.set_result(self._result)
        except Exception as e:
            fut.set_exception(e)
        return fut

    def synchronize(self):
        pass


def _start(fn, args, comm_h, keep, status=None):
    h = ctypes.c_void_p()
    st = fn(*args, comm_h, ctypes.byref(h)) if status is None else fn(*args, comm_h, ctypes.byref(status),
                                                                        ctypes.byref(h))
    if st != 0:
        raise _runtime(error(st))
    return _Op(h, keep, status)


def _buf(t, what, writable=False):
    try:
        return _core.buf(t, what, writable)
    except Error as e:
        raise _runtime(e) from None


def _like(what, tensors, ref, ref_name, numel=True):
    """Every tensor of `tensors` has ref's dtype (and, with numel, its number
    of elements): mlcomm moves one dtype and count for all of them, and would
    read or write past a shorter tensor, or fill one of another dtype with
    reinterpreted bytes."""
    for i, t in enumerate(tensors):
        if t.dtype != ref.dtype:
            raise RuntimeError("mlcomm: %s: tensor %d is %s, the %s %s" % (what, i, t.dtype, ref_name, ref.dtype))
        if numel and t.numel() != ref.numel():
            raise RuntimeError("mlcomm: %s: tensor %d has %d elements, the %s %d"
                               % (what, i, t.numel(), ref_name, ref.numel()))


def _flat(tensors):
    """One contiguous 1-D tensor holding `tensors` one after another."""
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)


def _contig(t):
    """(a contiguous tensor to work on, a step copying it back into t or None).
    A lazy conjugate or negative view is worked on resolved (copy_ back
    into it applies the view again)."""
    if t.is_contiguous() and not _core.lazy_view(t):
        return t, None
    c = t.resolve_conj().resolve_neg().contiguous() if _core.lazy_view(t) else t.contiguous()
    return c, (lambda: t.copy_(c))


def _chain(*steps):
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def run():
        for s in steps:
            s()
    return run


def _timeout_seconds(timeout):
    """torch's timedelta as mlcomm's seconds: negative as 0 (never), and
    beyond mlcomm's range (1e9 s, about 31 years; timedelta.max is used as
    "no limit") as that range's end."""
    return min(max(timeout.total_seconds(), 0.0), 1e9)


class ProcessGroupMlcomm(dist.ProcessGroup):
    """A torch process group over one mlcomm communicator."""

    def __init__(self, store, rank, size, timeout=datetime.timedelta(minutes=30), comm=None):
        super().__init__(rank, size)
        self._pending = set()
        self._recent = collections.deque(maxlen=256)
        self._rank, self._size = rank, size
        self._mb_calls = 0
        self._mb_posted = []
        self._scratch_buf = None
        self._timeout_s = timeout.total_seconds() if timeout is not None else 1800.0
        if comm is not None:  # a subgroup split from the default group's communicator
            self.comm = comm
            if timeout is not None:  # new_group's timeout (torch's default: 30 minutes, as gloo's groups)
                try:
                    comm.set_timeout(_timeout_seconds(timeout))
                except UnsupportedError as e:
                    # On mpi, split from a default group without a deadline on
                    # any rank: its blocking collectives are MPI's, which no
                    # deadline ends. torch always passes one to new_group.
                    warnings.warn("mlcomm: this group keeps its parent's lack of a timeout: %s" % e.message,
                                  RuntimeWarning, stacklevel=2)
                except Error as e:
                    comm.free()
                    raise _runtime(e) from None
            return
        # Ranks of this group bootstrap through its store, under a key prefix
        # of their own: every init adds 1 per rank to a counter, so an init
        # reusing a store (a second group, a second job) gets a fresh prefix.
        n = store.add("mlcomm/inits", 1)
        prefixed = dist.PrefixStore("mlcomm/%d" % ((n - 1) // size), store)
        backend = os.environ.get("MLCOMM_TORCH_BACKEND") or None
        secs = _timeout_seconds(timeout) if timeout is not None else None
        try:
            self.comm = _core.init(backend, store=prefixed, rank=rank, size=size,
                                   timeout=secs if secs and secs > 0 else None)
        except Error as e:
            if backend is not None and e.name == "MLC_ERR_INVALID_ARG" and "backend" in e.message:
                raise RuntimeError("mlcomm: MLCOMM_TORCH_BACKEND=%s: %s" % (backend, e)) from None
            raise _runtime(e) from None

    @property
    def _h(self):
        """The communicator's handle; RuntimeError once the group was destroyed."""
        try:
            return self.comm._live()
        except Error as e:
            raise _runtime(e) from None

    def shutdown(self):
        """Free this group's communicator (local: peers blocked in a call
        with this rank fail at once, naming it). destroy_process_group calls
        it; later calls on the group raise RuntimeError."""
        self.comm.free()

    # Work objects must stay referenced from Python until complete (and a
    # while after: C++ may ask a completed one again).
    def _coll(self, fn, args, keep):
        """Start a collective: run to completion here (None), or as a
        request when MLCOMM_TORCH_ASYNC=1."""
        if _ASYNC:
            return _start(fn, args, self._h, keep)
        st = fn(*args, self._h, None)
        if st != 0:
            raise _runtime(error(st))
        return None

    def _work(self, ops, result, finish=None):
        ops = [o for o in ops if o is not None]
        if not ops and finish is not None:
            finish()
            finish = None
        w = Work(self, ops, result, finish)
        if w._done:
            self._recent.append(w)
        else:
            self._pending.add(w)
        return w

    def _retire(self, w):
        self._pending.discard(w)
        self._recent.append(w)

    def name(self):
        return BACKEND

    def getBackendName(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    # ---- collectives
    def allreduce(self, tensors, opts=None):
        op = _op(opts)
        if any(t.is_sparse for t in tensors):
            for t in tensors:
                self._sparse_allreduce(t, op)
            return self._work([], tensors)
        ops, fin = [], []
        for t in tensors:
            c, back = _contig(t)
            b = _buf(c, "allreduce", True)
            dt, n = _reduce(b, op)
            ops.append(self._coll(_lib.allreduce, (b.ptr, b.ptr, n, dt, _core.OP[op]), b))
            fin.append(back)
        return self._work(ops, tensors, _chain(*fin))

    def _sparse_allreduce(self, t, op):
        """A sparse COO tensor's sum, as gloo's: every rank's (index, value)
        pairs gathered (all-gather of the counts, then two all-gathervs),
        coalesced into t."""
        if not t.is_sparse:
            raise RuntimeError("mlcomm: all_reduce of sparse and dense tensors in one call")
        if op != "sum":
            raise RuntimeError("mlcomm: all_reduce of a sparse tensor supports SUM only, not %s" % op.upper())
        c = t.coalesce()
        idx = c.indices().t().contiguous()  # (nnz, sparse_dim): each rank's block contiguous
        val = c.values().contiguous()       # (nnz, *dense)
        try:
            counts = self.comm.allgather(torch.tensor([idx.shape[0]], dtype=torch.int64)).reshape(-1).tolist()
            total = sum(counts)
            every_idx = torch.empty((total, idx.shape[1]), dtype=torch.int64)
            self.comm.allgatherv(idx, [k * idx.shape[1] for k in counts], out=every_idx)
            dense = val[0].numel() if val.shape[0] else int(torch.tensor(val.shape[1:]).prod().item())
            every_val = torch.empty((total,) + tuple(val.shape[1:]), dtype=val.dtype)
            self.comm.allgatherv(val, [k * dense for k in counts], out=every_val)
        except Error as e:
            raise _runtime(e) from None
        t.copy_(torch.sparse_coo_tensor(every_idx.t(), every_val, t.shape).coalesce())

    def allreduce_coalesced(self, tensors, opts=None):
        op = _op(opts)
        if len({t.dtype for t in tensors}) > 1:
            raise RuntimeError("mlcomm: allreduce_coalesced needs tensors of one dtype")
        flat = _flat(tensors)
        b = _buf(flat, "allreduce_coalesced", True)
        dt, n = _reduce(b, op)
        o = self._coll(_lib.allreduce, (b.ptr, b.ptr, n, dt, _core.OP[op]), b)

        def finish():
            off = 0
            for t in tensors:
                k = t.numel()
                t.copy_(flat[off:off + k].view_as(t))
                off += k
        return self._work([o], tensors, finish)

    def broadcast(self, tensors, opts=None):
        root = getattr(opts, "rootRank", 0)
        ops, fin = [], []
        for t in tensors:
            c, back = _contig(t)
            b = _buf(c, "broadcast", True)
            dt = _core.move_dtype(b)
            ops.append(self._coll(_lib.broadcast, (b.ptr, b.ptr, b.elems(dt), dt, root), b))
            fin.append(back)
        return self._work(ops, tensors, _chain(*fin))

    def reduce(self, tensors, opts=None):
        root = getattr(opts, "rootRank", 0)
        op = _op(opts)
        ops, fin = [], []
        for t in tensors:
            c, back = _contig(t)
            b = _buf(c, "reduce", True)
            dt, n = _reduce(b, op)
            recv = b.ptr if self._rank == root else None
            ops.append(self._coll(_lib.reduce, (b.ptr, recv, n, dt, _core.OP[op], root), b))
            fin.append(back if self._rank == root else None)
        return self._work(ops, tensors, _chain(*fin))

    def _scratch(self, numel, like):
        """A tensor of numel elements like `like` for the list forms of
        all_gather and reduce_scatter. In blocking mode (the default) the
        group keeps the last one (up to 256 MiB) for the next call: a fresh
        one of many MiB is fresh pages, whose faults cost more than the
        collective itself. Requests in flight (MLCOMM_TORCH_ASYNC=1) each
        get their own."""
        nbytes = numel * like.element_size()
        if _ASYNC or like.device.type != "cpu" or nbytes > 256 << 20:
            return torch.empty(numel, dtype=like.dtype, device=like.device)
        s = self._scratch_buf
        if s is None or s.numel() * s.element_size() < nbytes:
            s = self._scratch_buf = torch.empty(nbytes, dtype=torch.uint8)
        return s[:nbytes].view(like.dtype)

    def _allgather_one(self, outputs, t):
        _like("allgather", outputs, t, "input")
        c = t.contiguous()
        b = _buf(c, "allgather")
        out = self._scratch(self._size * c.numel(), c).view((self._size,) + tuple(c.shape))
        ob = _buf(out, "allgather", True)
        dt = _core.move_dtype(b)
        o = self._coll(_lib.allgather, (b.ptr, ob.ptr, b.elems(dt), dt), (b, ob))

        def finish():
            for r, dst in enumerate(outputs):
                dst.copy_(out[r].view_as(dst))
        if o is None:  # complete: copy out now, the next call may reuse the scratch
            finish()
            return None, None
        return o, finish

    def allgather(self, output_tensors, input_tensors, opts=None):
        ops, fin = [], []
        for outs, t in zip(output_tensors, input_tensors):
            if len(outs) != self._size:
                raise RuntimeError("mlcomm: allgather needs %d output tensors, got %d" % (self._size, len(outs)))
            o, f = self._allgather_one(outs, t)
            ops.append(o)
            fin.append(f)
        return self._work(ops, output_tensors, _chain(*fin))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        # output_lists[r][i] receives rank r's input_list[i]
        if len(output_lists) != self._size or any(len(o) != len(input_list) for o in output_lists):
            raise RuntimeError("mlcomm: allgather_coalesced needs %d output lists of %d tensors"
                               % (self._size, len(input_list)))
        ops, fin = [], []
        for i, t in enumerate(input_list):
            o, f = self._allgather_one([output_lists[r][i] for r in range(self._size)], t)
            ops.append(o)
            fin.append(f)
        return self._work(ops, output_lists, _chain(*fin))

    def _allgather_base(self, output, input, opts=None):
        _like("_allgather_base", [output], input, "input", numel=False)
        if output.numel() != input.numel() * self._size:
            raise RuntimeError("mlcomm: _allgather_base: output has %d elements, needs %d x %d"
                               % (output.numel(), self._size, input.numel()))
        c = input.contiguous()
        out, back = _contig(output)
        b, ob = _buf(c, "_allgather_base"), _buf(out, "_allgather_base", True)
        dt = _core.move_dtype(b, ob)
        o = self._coll(_lib.allgather, (b.ptr, ob.ptr, b.elems(dt), dt), (b, ob))
        return self._work([o], [output], back)

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        op = _op(opts)
        ops, fin = [], []
        for out, ins in zip(output_tensors, input_lists):
            if len(ins) != self._size:
                raise RuntimeError("mlcomm: reduce_scatter needs %d input tensors, got %d" % (self._size, len(ins)))
            _like("reduce_scatter", ins, out, "output")
            flat = torch.cat([t.reshape(-1) for t in ins], out=self._scratch(sum(t.numel() for t in ins), ins[0]))
            c, back = _contig(out)
            b, ob = _buf(flat, "reduce_scatter"), _buf(c, "reduce_scatter", True)
            if b.count != ob.count * self._size:
                raise RuntimeError("mlcomm: reduce_scatter: inputs of %d elements for an output of %d"
                                   % (b.count, ob.count))
            dt, n = _reduce(ob, op)
            ops.append(self._coll(_lib.reduce_scatter, (b.ptr, ob.ptr, n, dt, _core.OP[op]), (b, ob)))
            fin.append(back)
        return self._work(ops, output_tensors, _chain(*fin))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op(opts)
        _like("_reduce_scatter_base", [input], output, "output", numel=False)
        if input.numel() != output.numel() * self._size:
            raise RuntimeError("mlcomm: _reduce_scatter_base: input has %d elements, needs %d x %d"
                               % (input.numel(), self._size, output.numel()))
        c = input.contiguous()
        out, back = _contig(output)
        b, ob = _buf(c, "_reduce_scatter_base"), _buf(out, "_reduce_scatter_base", True)
        dt, n = _reduce(ob, op)
        o = self._coll(_lib.reduce_scatter, (b.ptr, ob.ptr, n, dt, _core.OP[op]), (b, ob))
        return self._work([o], [output], back)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        _like("alltoall_base", [output], input, "input", numel=False)
        p = self._size
        c = input.contiguous()
        out, back = _contig(output)
        b, ob = _buf(c, "alltoall_base"), _buf(out, "alltoall_base", True)
        if not output_split_sizes and not input_split_sizes:
            if b.count % p or b.count != ob.count:
                raise RuntimeError("mlcomm: all_to_all_single: %d input and %d output elements for %d ranks"
                                   % (b.count, ob.count, p))
            dt = _core.move_dtype(b, ob)
            o = self._coll(_lib.alltoall, (b.ptr, ob.ptr, b.elems(dt) // p, dt), (b, ob))
            return self._work([o], [output], back)
        row_in = c[0].numel() if c.dim() and c.shape[0] else 0
        row_out = out[0].numel() if out.dim() and out.shape[0] else 0
        sc = [s * row_in for s in input_split_sizes] if input_split_sizes else [b.count // p] * p
        rc = [s * row_out for s in output_split_sizes] if output_split_sizes else [ob.count // p] * p
        return self._alltoallv(b, ob, sc, rc, [output], back)

    def _alltoallv(self, b, ob, sc, rc, result, finish):
        if sum(sc) > b.count or sum(rc) > ob.count:
            raise RuntimeError("mlcomm: all_to_all split sizes exceed the tensors")
        dt, k = _core._scale(b, ob)
        sd, rd = _core._prefix(sc), _core._prefix(rc)
        args = (b.ptr, _lib.sizes([x * k for x in sc]), _lib.sizes([x * k for x in sd]), ob.ptr,
                _lib.sizes([x * k for x in rc]), _lib.sizes([x * k for x in rd]), dt)
        o = self._coll(_lib.alltoallv, args, (b, ob, args))
        return self._work([o], result, finish)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if input_tensors:
            _like("alltoall", input_tensors[1:] + output_tensors, input_tensors[0], "first input", numel=False)
        flat_in = _flat(input_tensors)
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype,
                               device=flat_in.device)
        b, ob = _buf(flat_in, "alltoall"), _buf(flat_out, "alltoall", True)

        def finish():
            off = 0
            for t in output_tensors:
                t.copy_(flat_out[off:off + t.numel()].view_as(t))
                off += t.numel()
        return self._alltoallv(b, ob, [t.numel() for t in input_tensors], [t.numel() for t in output_tensors],
                               output_tensors, finish)

    def gather(self, output_tensors, input_tensors, opts=None):
        root = getattr(opts, "rootRank", 0)
        t = input_tensors[0].contiguous()
        b = _buf(t, "gather")
        dt = _core.move_dtype(b)
        if self._rank == root:
            outs = output_tensors[0]
            if len(outs) != self._size:
                raise RuntimeError("mlcomm: gather needs %d output tensors at the root" % self._size)
            _like("gather", outs, t, "input")
            flat = torch.empty((self._size,) + tuple(t.shape), dtype=t.dtype, device=t.device)
            ob = _buf(flat, "gather", True)
            o = self._coll(_lib.gather, (b.ptr, ob.ptr, b.elems(dt), dt, root), (b, ob))

            def finish():
                for r, dst in enumerate(outs):
                    dst.copy_(flat[r].view_as(dst))
            return self._work([o], output_tensors, finish)
        o = self._coll(_lib.gather, (b.ptr, None, b.elems(dt), dt, root), b)
        return self._work([o], output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = getattr(opts, "rootRank", 0)
        out, back = _contig(output_tensors[0])
        ob = _buf(out, "scatter", True)
        b = None
        if self._rank == root:
            ins = input_tensors[0]
            if len(ins) != self._size:
                raise RuntimeError("mlcomm: scatter needs %d input tensors at the root" % self._size)
            _like("scatter", ins, output_tensors[0], "output")
            b = _buf(_flat(ins), "scatter")
        dt = _core.move_dtype(ob)
        o = self._coll(_lib.scatter, (_core.ptr(b), ob.ptr, ob.elems(dt), dt, root), (b, ob))
        return self._work([o], output_tensors, back)

    def barrier(self, opts=None):
        return self._work([self._coll(_lib.barrier, (), None)], [])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's monitored barrier: every rank reports to rank 0, which
        names the ranks that did not arrive within `timeout` (seconds or a
        timedelta; default the communicator's own). Rank 0 then releases
        the others, which fail if it does not. Messages go on a tag of its
        own per call (counting down from the communicator's largest), so a
        late rank's report never satisfies a later barrier."""
        secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        if secs is None:
            secs = self._timeout_s
        self._mb_calls += 1
        tag = self.comm.tag_max - self._mb_calls % 1024
        # Receives a timeout left posted stay referenced (with their buffers)
        # until they complete: a late rank's message lands in a live buffer.
        self._mb_posted = [(q, b) for q, b in self._mb_posted if not q.done()]
        token = torch.zeros(1, dtype=torch.uint8)
        ms = int(secs * 1000)
        try:
            if self._rank != 0:
                self.comm.send(token, 0, tag)
                release = torch.empty(1, dtype=torch.uint8)
                req = self.comm.recv(release, 0, tag, async_op=True)
                try:
                    req.wait(secs)
                except (Error, concurrent.futures.TimeoutError):
                    self._mb_posted.append((req, release))
                    raise RuntimeError("mlcomm: Rank %d successfully reached monitoredBarrier, but received errors "
                                       "while waiting for send/recv from rank 0. Please check rank 0 logs for "
                                       "faulty rank." % self._rank) from None
                return
            start = time.monotonic()
            reports = []
            for q in range(1, self._size):
                b = torch.empty(1, dtype=torch.uint8)
                reports.append((q, self.comm.recv(b, q, tag, async_op=True)))
                self._mb_posted.append((reports[-1][1], b))
            arrived, failed = [], []
            for q, req in reports:
                left = secs if wait_all_ranks else secs - (time.monotonic() - start)
                if left <= 0 and not wait_all_ranks:
                    raise RuntimeError("mlcomm: Rank 0 timed out in monitoredBarrier after %d ms. Successfully "
                                       "processed ranks: %s" % (ms, ", ".join(map(str, arrived)) or "none"))
                try:
                    req.wait(left)
                    arrived.append(q)
                except (Error, concurrent.futures.TimeoutError):
                    failed.append(q)
                    if not wait_all_ranks:
                        raise RuntimeError("mlcomm: Rank %d failed to pass monitoredBarrier in %d ms" % (q, ms)) from None
            if failed:
                raise RuntimeError("mlcomm: Ranks %s failed to pass monitoredBarrier in %d ms"
                                   % (", ".join(map(str, failed)), ms))
            for q in arrived:
                self.comm.send(token, q, tag)
        except Error as e:
            raise _runtime(e) from None

    # ---- point-to-point
    def send(self, tensors, dst, tag=0):
        ops = []
        for t in tensors:
            b = _buf(t.contiguous(), "send")
            dt = _core.move_dtype(b)
            ops.append(_start(_lib.send, (b.ptr, b.elems(dt), dt, dst, tag), self._h, b))
        return self._work(ops, tensors)

    def _recv(self, tensors, src, tag):
        ops, fin = [], []
        for t in tensors:
            c, back = _contig(t)
            b = _buf(c, "recv", True)
            dt = _core.move_dtype(b)
            ops.append(_start(_lib.recv, (b.ptr, b.elems(dt), dt, src, tag), self._h, b, _lib.MsgStatus()))
            fin.append(back)
        return self._work(ops, tensors, _chain(*fin))

    def recv(self, tensors, src, tag=0):
        return self._recv(tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._recv(tensors, _core.ANY_SOURCE, tag)


def _reduce(b, op):
    try:
        return _core.reduce_dtype(b, op, "mlcomm")
    except Error as e:
        raise _runtime(e) from None


# Subgroups. torch calls a backend's creator on the members of a new group
# only, but every rank of the job calls new_group (in the same order): the
# wrapper below has every rank split the default group's communicator there
# (members colour 0, others none), and the creator takes the member's part:
# a split costs one collective on the parent, where an init of its own would
# cost a rendezvous through the store. A subgroup made so
# takes the timeout given to new_group (torch 1.13 passes its default, 30
# minutes, when none is given: a gloo group gets the same).
_split = {}


def _create(store, rank, size, timeout):
    comm = _split.pop("comm", None)
    return ProcessGroupMlcomm(store, rank, size, timeout, comm)


def _wrap_helper():
    c10d = dist.distributed_c10d
    inner = c10d._new_process_group_helper
    if getattr(inner, "_mlcomm", False):
        return
    names = list(inspect.signature(inner).parameters)

    def helper(*args, **kw):
        bound = dict(zip(names, args))
        bound.update(kw)
        ranks = bound.get("global_ranks_in_group") or []
        backend = str(bound.get("backend", "")).lower()
        world = c10d.GroupMember.WORLD
        if ranks and backend == BACKEND and isinstance(world, ProcessGroupMlcomm):
            me = world._rank
            try:
                sub = world.comm.split(0 if me in ranks else None, ranks.index(me) if me in ranks else 0)
            except Error as e:
                raise _runtime(e) from None
            if sub is not None:
                _split["comm"] = sub
        try:
            return inner(*args, **kw)
        finally:
            _split.pop("comm", None)

    helper._mlcomm = True
    c10d._new_process_group_helper = helper


def _wrap_monitored_barrier():
    """dist.monitored_barrier refuses every backend but gloo by name; on an
    mlcomm group it runs the group's own monitored_barrier instead."""
    c10d = dist.distributed_c10d
    inner = c10d.monitored_barrier
    if getattr(inner, "_mlcomm", False):
        return

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        pg = c10d._get_default_group() if group is None or group is c10d.GroupMember.WORLD else group
        if isinstance(pg, ProcessGroupMlcomm):
            if c10d._rank_not_in_group(group):
                return None
            return pg.monitored_barrier(timeout, wait_all_ranks)
        return inner(group, timeout, wait_all_ranks)

    monitored_barrier._mlcomm = True
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


def _wrap_destroy():
    """torch 1.13's destroy_process_group only forgets the groups: free the
    communicators of the mlcomm ones it destroyed, or every job and group
    that re-inits keeps its shared memory and its peers wait out their
    timeout for a rank that has left."""
    c10d = dist.distributed_c10d
    inner = c10d.destroy_process_group
    if getattr(inner, "_mlcomm", False):
        return

    def destroy_process_group(group=None):
        if group is None or group is c10d.GroupMember.WORLD:
            pg_map = getattr(c10d, "_pg_map", None)
            if pg_map is None:  # torch 2.x keeps it on _world
                pg_map = getattr(getattr(c10d, "_world", None), "pg_map", {})
            pgs = list(pg_map)
        else:
            pgs = [group]
        inner(group)
        for pg in pgs:
            if isinstance(pg, ProcessGroupMlcomm):
                pg.shutdown()

    destroy_process_group._mlcomm = True
    c10d.destroy_process_group = destroy_process_group
    dist.destroy_process_group = destroy_process_group


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # torch 2.x
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:  # torch 1.13
        dist.Backend.register_backend(BACKEND, _create)


_register()
_wrap_helper()
_wrap_monitored_barrier()
_wrap_destroy()
