# SPDX-License-Identifier: BSD-3-Clause
"""Distributed-array exchange (mlcomm_exchange.h) on numpy arrays: halo
exchange plans over boxes of a global index space, and the global combine."""

import ctypes

from . import _group, _lib
from ._core import as_dtype, buf, numpy_dtype
from ._errors import check, invalid

__all__ = ["Exchange", "box_halo", "combine"]

SIDE = {"provide": 0, "need": 1}


def _box(start, shape, what):
    start, shape = [int(s) for s in start], [int(s) for s in shape]
    if len(start) != len(shape) or len(start) > _lib.MLC_EXCHANGE_MAX_DIMS:
        raise invalid("%s: start %s and shape %s differ in length or exceed %d axes"
                      % (what, start, shape, _lib.MLC_EXCHANGE_MAX_DIMS))
    b = _lib.Box()
    b.ndim = len(start)
    for i, (s, n) in enumerate(zip(start, shape)):
        b.start[i], b.shape[i] = s, n
    return b


def _unbox(b):
    return tuple(b.start[: b.ndim]), tuple(b.shape[: b.ndim])


class Exchange:
    """An exchange over `comm` of `ndim`-dimensional arrays of `dtype`
    (collective). Each rank provides the regions it owns and asks for the
    regions it needs; build() makes the plan; run() (or start() + finish())
    moves the data, as often as wanted.

    An array is placed in the global index space by `origin`, the global
    index of its element [0, ..., 0]; a region is (start, shape) in global
    indices, inside the array."""

    def __init__(self, comm, ndim, dtype, domain=None, periodic=None, allow_unprovided=False):
        cfg = _lib.ExchangeConfig()
        cfg.size = ctypes.sizeof(cfg)
        cfg.magic = _lib.MLC_EXCHANGE_CONFIG_MAGIC
        cfg.version = _lib.MLC_EXCHANGE_CONFIG_VERSION
        cfg.ndim = int(ndim)
        cfg.dtype = as_dtype(dtype)
        cfg.flags = _lib.MLC_EXCHANGE_ALLOW_UNPROVIDED if allow_unprovided else 0
        if domain is not None:
            cfg.domain = _box(domain[0], domain[1], "Exchange domain")
        for i, p in enumerate(periodic or []):
            cfg.periodic[i] = 1 if p else 0
        self.ndim = int(ndim)
        self.dtype = cfg.dtype
        self._keep = {0: {}, 1: {}}
        h = ctypes.c_void_p()
        check(_lib.exchange_create(comm._live(), ctypes.byref(cfg), ctypes.byref(h)))
        self._h = h

    def _live(self):
        if not self._h.value:
            raise invalid("the exchange was freed")
        return self._h.value

    def _view(self, array, origin, region, what):
        b = buf(array, what, writable=True)
        if b.kind != "numpy":
            raise invalid("%s: the exchange takes numpy arrays" % what)
        if array.ndim != self.ndim:
            raise invalid("%s: the array has %d dimensions, the exchange %d" % (what, array.ndim, self.ndim))
        if array.dtype.itemsize != _lib.dtype_size(self.dtype):
            raise invalid("%s: elements of %d bytes, the exchange's dtype has %d"
                          % (what, array.dtype.itemsize, _lib.dtype_size(self.dtype)))
        origin = [0] * self.ndim if origin is None else list(origin)
        v = _lib.View()
        v.data = b.ptr
        v.parent = _box(origin, array.shape, what + " array")
        if region is None:
            v.region = v.parent
        else:
            v.region = _box(region[0], region[1], what + " region")
        return v

    def _add(self, fn, side, array, origin, region, what):
        v = self._view(array, origin, region, what)
        i = ctypes.c_int()
        check(fn(self._live(), ctypes.byref(v), ctypes.byref(i)))
        self._keep[side][i.value] = array
        return i.value

    def provide(self, array, origin=None, region=None):
        """Publish `region` (default: all of `array`) as provided by this rank; its id."""
        return self._add(_lib.exchange_provide, 0, array, origin, region, "provide")

    def need(self, array, origin=None, region=None):
        """Ask for `region` of `array` (written by each exchange); its id."""
        return self._add(_lib.exchange_need, 1, array, origin, region, "need")

    def set_data(self, side, id, array):
        """Point provide/need `id` at another array of the same layout."""
        if side not in SIDE:
            raise invalid("set_data: side %r: expected 'provide' or 'need'" % (side,))
        old = self._keep[SIDE[side]].get(id)
        if old is not None and (old.shape != array.shape or old.dtype != array.dtype):
            raise invalid("set_data: the new array (%s %s) differs from the old (%s %s)"
                          % (array.shape, array.dtype, old.shape, old.dtype))
        b = buf(array, "set_data", writable=True)
        check(_lib.exchange_set_data(self._live(), SIDE[side], int(id), b.ptr))
        self._keep[SIDE[side]][id] = array

    def clear(self):
        check(_lib.exchange_clear(self._live()))
        self._keep = {0: {}, 1: {}}

    def set_topology_version(self, version):
        check(_lib.exchange_set_topology_version(self._live(), int(version)))

    def build(self):
        _group.refuse("Exchange.build")
        check(_lib.exchange_build(self._live()))

    def set_executor(self, name):
        check(_lib.exchange_set_executor(self._live(), name.encode() if name else None))

    def start(self):
        _group.refuse("Exchange.start")
        check(_lib.exchange_start(self._live()))

    def finish(self):
        check(_lib.exchange_finish(self._live()))

    def run(self):
        _group.refuse("Exchange.run")
        check(_lib.exchange_run(self._live()))

    def info(self):
        """What the built plan does on this rank (a dict)."""
        i = _lib.ExchangeInfo()
        check(_lib.exchange_info(self._live(), ctypes.byref(i)))
        out = {f: getattr(i, f) for f, _ in _lib.ExchangeInfo._fields_}
        out["executor"] = out["executor"].decode() if out["executor"] else None
        return out

    def free(self):
        h = self._h.value
        self._h.value = None
        if h:
            check(_lib.exchange_free(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False


def box_halo(start, shape, width):
    """The halo of box (start, shape) grown by width[d] cells on each side of
    axis d: a list of disjoint (start, shape) boxes."""
    b = _box(start, shape, "box_halo")
    w = (ctypes.c_int * _lib.MLC_EXCHANGE_MAX_DIMS)(*[int(x) for x in width])
    out = (_lib.Box * (2 * _lib.MLC_EXCHANGE_MAX_DIMS))()
    n = ctypes.c_int()
    check(_lib.box_halo(ctypes.byref(b), w, out, ctypes.byref(n)))
    return [_unbox(out[i]) for i in range(n.value)]


def combine(comm, values, fn, commutative=True):
    """Combine every rank's `values` (a numpy array of `count` values along
    axis 0) value by value with fn(a, b) (b[...] = a (op) b; a is the lower
    ranks' part), every rank getting the same result (mlc_combine)."""
    import numpy as np
    b = buf(values, "combine values")
    if b.kind != "numpy" or values.ndim < 1:
        raise invalid("combine: values must be a numpy array with the values along axis 0")
    count = values.shape[0]
    vbytes = b.nbytes // count if count else max(values.dtype.itemsize, 1)
    vshape, vdtype = values.shape[1:], values.dtype
    errors = []

    def call(a, bb, ctx):
        try:
            av = np.frombuffer((ctypes.c_char * vbytes).from_address(a), dtype=vdtype).reshape(vshape)
            bv = np.frombuffer((ctypes.c_char * vbytes).from_address(bb), dtype=vdtype).reshape(vshape)
            fn(av, bv)
        except BaseException as e:
            errors.append(e)

    cb = _lib.COMBINE_FN(call)
    out = np.empty_like(values)
    check(_lib.combine(b.ptr, out.ctypes.data, count, vbytes, cb, int(bool(commutative)), None,
                       comm._live()))
    if errors:
        raise errors[0]
    return out


del numpy_dtype
