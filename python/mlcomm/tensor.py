# SPDX-License-Identifier: BSD-3-Clause
"""The tensor-parallel layer (mlcomm_tensor.h) on numpy arrays and torch
tensors: shape-aware collectives along any dimension, device meshes."""

import ctypes

from . import _group, _lib
from ._core import Comm, Request, as_op, buf, empty_like
from ._errors import check, error, invalid

__all__ = ["allgather", "reduce_scatter", "allreduce", "broadcast", "barrier", "split",
           "set_checks", "get_checks", "Mesh", "TensorRequest"]

CHECKS = {"full": 0, "local": 1}


class TensorRequest(Request):
    """A tensor operation in flight (as mlcomm.Request)."""
    _wait_fn = staticmethod(_lib.tensor_request_wait)
    _test_fn = staticmethod(_lib.tensor_request_test)


def _desc(x, what, writable=False):
    b = buf(x, what, writable)
    if b.dtype is None:
        raise invalid("%s: the tensor layer has no dtype %s" % (what, b.native))
    shape = tuple(int(s) for s in x.shape)
    if len(shape) > _lib.MLC_TENSOR_MAX_DIMS:
        raise invalid("%s: %d dimensions, at most %d" % (what, len(shape), _lib.MLC_TENSOR_MAX_DIMS))
    t = _lib.Tensor()
    t.data = b.ptr
    t.dtype = b.dtype
    t.ndim = len(shape)
    for i, s in enumerate(shape):
        t.shape[i] = s
    t.device = _lib.MLC_DEVICE_HOST
    if b.kind == "cuda":
        t.device = x.device.index if x.device.index is not None else 0
    return t, b


def _run(comm, fn, args, async_op, keep, value):
    h = comm._live()
    if async_op:
        req = ctypes.c_void_p()
        st = fn(*args, h, ctypes.byref(req))
        if st != 0:
            raise error(st)
        return TensorRequest(req, keep, value, in_flight=comm._in_flight)
    check(fn(*args, h, None))
    return value


def split(n, size, rank):
    """(offset, length) of part `rank` of `size` parts of n (mlc_tensor_split)."""
    off, ln = ctypes.c_size_t(), ctypes.c_size_t()
    check(_lib.tensor_split(int(n), int(size), int(rank), ctypes.byref(off), ctypes.byref(ln)))
    return off.value, ln.value


def _axis(dim, ndim, what):
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < max(ndim, 1):
        raise invalid("%s: dim %d is out of range for %d dimensions" % (what, dim, ndim))
    return d


def allgather(comm, shard, dim=0, out=None, async_op=False):
    """Concatenate every rank's shard along `dim` in rank order (shards may
    differ in length along dim). Without `out`, a new array is made; its
    length along dim is learnt by one small all-gather of the lengths."""
    _group.refuse("mlcomm.tensor.allgather")
    ts, bs = _desc(shard, "tensor allgather shard")
    if out is None:
        d = _axis(dim, ts.ndim, "tensor allgather")
        p = comm.size
        mine = (ctypes.c_int64 * 1)(int(shard.shape[d]))
        every = (ctypes.c_int64 * p)()
        check(_lib.allgather(mine, every, 1, 4, comm._live(), None))  # 4 = MLC_INT64
        shape = list(shard.shape)
        shape[d] = sum(every)
        out = empty_like(shard, tuple(shape), "tensor allgather shard")
    to, bo = _desc(out, "tensor allgather out", writable=True)
    return _run(comm, _lib.tensor_allgather, (ctypes.byref(ts), ctypes.byref(to), int(dim)), async_op,
                (ts, to, bs, bo), out)


def reduce_scatter(comm, x, dim=0, op="sum", out=None, async_op=False):
    """Reduce every rank's x with op and split along `dim`; rank r receives
    part r (by default the even split of split())."""
    _group.refuse("mlcomm.tensor.reduce_scatter")
    ti, bi = _desc(x, "tensor reduce_scatter in")
    if out is None:
        d = _axis(dim, ti.ndim, "tensor reduce_scatter")
        shape = list(x.shape)
        shape[d] = split(shape[d], comm.size, comm.rank)[1]
        out = empty_like(x, tuple(shape), "tensor reduce_scatter in")
    to, bo = _desc(out, "tensor reduce_scatter out", writable=True)
    return _run(comm, _lib.tensor_reduce_scatter, (ctypes.byref(ti), ctypes.byref(to), int(dim), as_op(op)),
                async_op, (ti, to, bi, bo), out)


def allreduce(comm, x, op="sum", out=None, async_op=False):
    """Shape-checked all-reduce: a new array, or `out` (out=x is in place)."""
    _group.refuse("mlcomm.tensor.allreduce")
    ti, bi = _desc(x, "tensor allreduce in")
    if out is None:
        out = empty_like(x, tuple(x.shape), "tensor allreduce in")
    to, bo = _desc(out, "tensor allreduce out", writable=True)
    return _run(comm, _lib.tensor_allreduce, (ctypes.byref(ti), ctypes.byref(to), as_op(op)), async_op,
                (ti, to, bi, bo), out)


def broadcast(comm, x, root=0, async_op=False):
    """In place: every rank's x receives root's (shapes checked)."""
    _group.refuse("mlcomm.tensor.broadcast")
    t, b = _desc(x, "tensor broadcast", writable=True)
    return _run(comm, _lib.tensor_broadcast, (ctypes.byref(t), int(root)), async_op, (t, b), x)


def barrier(comm, async_op=False):
    _group.refuse("mlcomm.tensor.barrier")
    return _run(comm, _lib.tensor_barrier, (), async_op, (), None)


def set_checks(comm, level):
    """"full" (default: arguments compared across ranks) or "local". Collective."""
    if level not in CHECKS:
        raise invalid("tensor checks %r: expected 'full' or 'local'" % (level,))
    check(_lib.tensor_set_checks(comm._live(), CHECKS[level]))


def get_checks(comm):
    return "local" if _lib.tensor_get_checks(comm._live()) == 1 else "full"


class Mesh:
    """Ranks of `world` as a row-major grid of shape `dims` (one entry may be
    -1), one communicator per axis (mlc_mesh_create). Collective."""

    def __init__(self, world, dims, names=None):
        dims = [int(d) for d in dims]
        carr = (ctypes.c_int * max(len(dims), 1))(*dims)
        narr = None
        if names is not None:
            if len(names) != len(dims):
                raise invalid("Mesh: %d names for %d axes" % (len(names), len(dims)))
            self._names = [n.encode() for n in names]
            narr = (ctypes.c_char_p * len(dims))(*self._names)
        h = ctypes.c_void_p()
        check(_lib.mesh_create(world._live(), carr, len(dims), narr, ctypes.byref(h)))
        self._h = h
        self.world = world

    def _live(self):
        if not self._h.value:
            raise invalid("the mesh was freed")
        return self._h.value

    @property
    def ndims(self):
        return _lib.mesh_ndims(self._live())

    @property
    def shape(self):
        return tuple(_lib.mesh_size(self._live(), a) for a in range(self.ndims))

    @property
    def names(self):
        return tuple(_lib.mesh_name(self._live(), a).decode() for a in range(self.ndims))

    def axis(self, name):
        """Index of the axis called `name` (an int passes through)."""
        if isinstance(name, int):
            return name
        a = ctypes.c_int()
        check(_lib.mesh_axis(self._live(), name.encode(), ctypes.byref(a)))
        return a.value

    def size(self, axis):
        return _lib.mesh_size(self._live(), self.axis(axis))

    def coord(self, axis):
        return _lib.mesh_coord(self._live(), self.axis(axis))

    def coords(self):
        arr = (ctypes.c_int * _lib.MLC_TENSOR_MAX_DIMS)()
        check(_lib.mesh_coords(self._live(), arr))
        return tuple(arr[: self.ndims])

    def rank_of(self, coords):
        arr = (ctypes.c_int * _lib.MLC_TENSOR_MAX_DIMS)(*[int(c) for c in coords])
        r = ctypes.c_int()
        check(_lib.mesh_rank_of(self._live(), arr, ctypes.byref(r)))
        return r.value

    def comm(self, axis):
        """The communicator of `axis` (owned by the mesh: do not free it)."""
        a = self.axis(axis)
        h = _lib.mesh_comm(self._live(), a)
        if not h:
            raise invalid("Mesh.comm: axis %r is out of range" % (axis,))
        return Comm(h, owned=False)

    def group(self, axes):
        """A new communicator over several axes (the caller frees it). Collective."""
        ax = [self.axis(a) for a in axes]
        arr = (ctypes.c_int * max(len(ax), 1))(*ax)
        h = ctypes.c_void_p()
        check(_lib.mesh_group(self._live(), arr, len(ax), ctypes.byref(h)))
        return Comm(h.value)

    def free(self):
        h = self._h.value
        self._h.value = None
        if h:
            check(_lib.mesh_free(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False
