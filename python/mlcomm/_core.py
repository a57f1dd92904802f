# SPDX-License-Identifier: BSD-3-Clause
"""Communicators, requests, dtypes and ops: mlcomm.h on numpy arrays and
torch tensors."""

import collections
import concurrent.futures
import ctypes
import operator
import threading
import time

from . import _group, _lib
from ._errors import check, error, invalid
from ._store import StoreCallbacks

try:
    import numpy as np
except ImportError:  # the binding works on torch tensors alone too
    np = None

# ---- dtypes ------------------------------------------------------------------
DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64"]
DTYPE = {name: i for i, name in enumerate(DTYPES)}
for _i, _n in enumerate(DTYPES):
    assert _lib.dtype_name(_i).decode() == _n, "dtype table differs from the library's"

OPS = ["sum", "prod", "max", "min", "avg"]
OP = {name: i for i, name in enumerate(OPS)}
COLLS = [_lib.coll_name(i).decode() for i in range(16)]
COLL = {name: i for i, name in enumerate(COLLS)}
MEMORY = {"host": 0, "cuda": 1, "rocm": 2, "auto": 3}
MEMORY_KINDS = ["host", "cuda", "rocm"]  # mlc_memory_kind_t, by value
LOG_LEVEL = {"error": 0, "warn": 1, "info": 2, "debug": 3, "trace": 4}

ANY_SOURCE = _lib.MLC_ANY_SOURCE
ANY_TAG = _lib.MLC_ANY_TAG
UNDEFINED = _lib.MLC_UNDEFINED


def record(n):
    """The dtype of an opaque n-byte record (MLC_RECORD(n))."""
    if not 1 <= n <= 65535:
        raise invalid("record size %d is out of range (1..65535)" % n)
    return 0x10000 | n


def dtype_size(dtype):
    return _lib.dtype_size(as_dtype(dtype))


def dtype_name(dtype):
    s = _lib.dtype_name(as_dtype(dtype))
    return s.decode() if s else None


def as_dtype(dtype):
    """An mlcomm dtype code from a code, a name ("float32", "bf16"), a numpy
    dtype or a torch dtype."""
    if isinstance(dtype, int):
        return dtype
    name = _dtype_key(dtype)
    if name in _MAPPED:
        return DTYPE[_MAPPED[name]]
    out = _lib.c_dtype()
    st = _lib.dtype_from_name(name.encode(), ctypes.byref(out))
    if st != 0:
        e = error(st)
        size = _itemsize(dtype)
        if size:
            e = invalid("%s (mlcomm has no such dtype: move its %d-byte elements as mlcomm.record(%d))"
                        % (e.message, size, size))
        raise e
    return out.value


def _itemsize(dt):
    """The element size of a numpy or torch dtype; None for anything else."""
    if str(dt).startswith("torch."):
        import torch
        return torch.empty(0, dtype=dt).element_size() if isinstance(dt, torch.dtype) else None
    if np is None or isinstance(dt, str) and dt not in np.sctypeDict:
        return None  # a name numpy does not know either (not "float128" on every machine)
    try:
        return np.dtype(dt).itemsize
    except TypeError:
        return None


def numpy_dtype(dtype):
    """The numpy dtype of an mlcomm dtype (bfloat16 needs ml_dtypes)."""
    code = as_dtype(dtype)
    if code & 0x10000:
        return np.dtype((np.void, code & 0xFFFF))
    name = DTYPES[code]
    if name == "bfloat16":
        try:
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            raise invalid("bfloat16 has no numpy dtype without the ml_dtypes package") from None
    return np.dtype(name)


# numpy / torch dtype name -> mlcomm dtype name
_MAPPED = {n: n for n in DTYPES}
_MAPPED.update({"torch." + n: n for n in DTYPES})
_MAPPED.update({"torch.half": "float16", "torch.float": "float32", "torch.double": "float64",
                "torch.long": "int64", "torch.int": "int32"})


def _dtype_key(dt):
    s = str(dt)
    if np is not None and not s.startswith("torch."):
        try:
            s = np.dtype(dt).name
        except TypeError:
            pass
    return s


def as_op(op):
    """An mlcomm op code from a code, a name ("sum") or a UserOp."""
    if isinstance(op, UserOp):
        return op.code
    if isinstance(op, int):
        return op
    if isinstance(op, str):
        out = _lib.c_op()
        check(_lib.op_from_name(op.encode(), ctypes.byref(out)))
        return out.value
    raise invalid("op %r: expected a name (%s), a code or a UserOp" % (op, ", ".join(OPS)))


# ---- buffers -----------------------------------------------------------------
class Buf:
    """What a C call needs of an array: its address, count and dtype, and the
    array itself (kept alive while the call may touch it)."""

    __slots__ = ("obj", "ptr", "count", "dtype", "nbytes", "itemsize", "native", "kind")

    def __init__(self, obj, ptr, count, dtype, itemsize, native, kind):
        self.obj, self.ptr, self.count, self.dtype = obj, ptr, count, dtype
        self.itemsize, self.native, self.kind = itemsize, native, kind
        self.nbytes = count * itemsize

    def elems(self, dtype):
        """Elements of this buffer when moved as `dtype`."""
        return self.nbytes // _lib.dtype_size(dtype)


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def lazy_view(t):
    """Whether torch tensor t is a lazy conjugate or negative view: its
    memory holds the values before the conj() / negation."""
    return bool((hasattr(t, "is_conj") and t.is_conj()) or (hasattr(t, "is_neg") and t.is_neg()))


def buf(x, what, writable=False):
    """Describe array `x` (numpy array or torch tensor; None passes)."""
    if x is None:
        return None
    if np is not None and isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise invalid("%s: the numpy array is not C-contiguous (use np.ascontiguousarray)" % what)
        if writable and not x.flags.writeable:
            raise invalid("%s: the numpy array is read-only" % what)
        if x.dtype.hasobject:
            raise invalid("%s: the numpy array holds Python objects (dtype %s): their bytes are pointers "
                          "into this process, meaningless in another" % (what, x.dtype))
        name = x.dtype.name
        code = DTYPE.get(_MAPPED.get(name, ""), None)
        if x.dtype.byteorder == ">":
            raise invalid("%s: big-endian arrays are not supported" % what)
        return Buf(x, x.ctypes.data, x.size, code, x.dtype.itemsize, name, "numpy")
    if _is_torch(x):
        if str(x.layout) != "torch.strided":
            raise invalid("%s: a %s tensor has no one block of memory to move (use .to_dense())"
                          % (what, str(x.layout).replace("torch.", "")))
        if not x.is_contiguous():
            raise invalid("%s: the tensor is not contiguous (use .contiguous())" % what)
        if lazy_view(x):
            # Its memory holds the values before a lazy conj() / neg: moved
            # as they are, the peer would get the wrong sign.
            if writable:
                raise invalid("%s: the tensor is a lazy conjugate or negative view (conj()): call "
                              ".resolve_conj() / .resolve_neg() first" % what)
            x = x.resolve_conj().resolve_neg()
        name = str(x.dtype)
        code = DTYPE.get(_MAPPED.get(name, ""), None)
        return Buf(x, x.data_ptr(), x.numel(), code, x.element_size(), name,
                   "cuda" if x.is_cuda else "torch")
    raise invalid("%s: expected a numpy array or a torch tensor, got %s" % (what, type(x).__name__))


def move_dtype(*bufs):
    """The dtype to move these buffers with: their own when mlcomm has it and
    they agree, else bytes (any dtype can be moved)."""
    real = [b for b in bufs if b is not None]
    codes = {b.dtype for b in real}
    if len(codes) == 1 and None not in codes:
        return codes.pop()
    return DTYPE["uint8"]


def reduce_dtype(b, op, what):
    """(dtype, count) to reduce buffer b with op."""
    if b.dtype is not None:
        return b.dtype, b.count
    if b.native in ("complex64", "torch.complex64", "complex128", "torch.complex128",
                    "torch.cfloat", "torch.cdouble") and as_op(op) in (OP["sum"], OP["avg"]):
        real = "float32" if b.itemsize == 8 else "float64"
        return DTYPE[real], b.count * 2
    if b.native in ("bool", "torch.bool") and as_op(op) in (OP["max"], OP["min"]):
        return DTYPE["uint8"], b.count
    raise invalid("%s: mlcomm cannot reduce %s with %s (it reduces %s)"
                  % (what, b.native, op if isinstance(op, str) else _op_name(op), ", ".join(DTYPES)))


def _op_name(op):
    try:
        s = _lib.op_name(as_op(op))
        return s.decode() if s else str(op)
    except Exception:
        return str(op)


class _SharedBlock:
    """One block of mlc_mem_alloc; freed once no array over it is left."""

    def __init__(self, nbytes):
        self.ptr = None
        p = ctypes.c_void_p()
        check(_lib.mem_alloc(nbytes, ctypes.byref(p)))
        self.ptr = p.value

    def __del__(self):
        if self.ptr:
            _lib.mem_free(self.ptr)
            self.ptr = None


def shared_empty(shape, dtype="float32"):
    """A new numpy array in shared host memory (mlc_mem_alloc, as MPI_Alloc_mem):
    on the shm backend, peers read it in place in large collectives. Its
    memory is freed with the last array (or tensor, torch.from_numpy) over it."""
    if np is None:
        raise invalid("shared_empty needs numpy (apt-get install python3-numpy)")
    dt = numpy_dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
    try:
        shape = (operator.index(shape),)
    except TypeError:
        shape = tuple(operator.index(d) for d in shape)
    n = 1
    for d in shape:
        if d < 0:
            raise invalid("shared_empty: negative dimension %d in shape %s" % (d, shape))
        n *= d
    block = _SharedBlock(n * dt.itemsize)
    raw = (ctypes.c_char * max(n * dt.itemsize, 1)).from_address(block.ptr)
    raw._block = block  # the array keeps raw, raw keeps the block
    return np.frombuffer(raw, dtype=dt, count=n).reshape(shape)


def empty_like(x, shape, what):
    """A new array of x's kind and dtype (x a numpy array or torch tensor)."""
    if np is not None and isinstance(x, np.ndarray):
        return np.empty(shape, dtype=x.dtype)
    if _is_torch(x):
        import torch
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    raise invalid("%s: expected a numpy array or a torch tensor, got %s" % (what, type(x).__name__))


def ptr(b):
    return None if b is None else b.ptr


# ---- user ops -----------------------------------------------------------------
class UserOp:
    """A user reduction made by mlcomm.op_create(fn, commutative). fn(a, b)
    receives two numpy arrays of the same dtype and length and stores the
    combination in b (b[:] = a (op) b; a holds the lower rank's data), or
    returns it (an array of b's shape, copied into b). An
    exception fn raises fails the call on every rank whose result it could
    reach (mlc_op_fail): this rank raises it again, the others raise
    UserOpError naming it."""

    def __init__(self, fn, commutative=True):
        if not callable(fn):
            raise invalid("op_create: fn is not callable")
        if np is None:
            raise invalid("op_create needs numpy")
        self.fn = fn
        self.commutative = bool(commutative)
        # (thread, exception) of the calls of fn that raised. Ranks that are
        # threads of one process share this op: a blocking call raises only
        # what fn raised on its own thread.
        self.errors = []
        self._cb = _lib.USER_FN(self._call)
        code = _lib.c_op()
        check(_lib.op_create(self._cb, int(self.commutative), None, ctypes.byref(code)))
        self.code = code.value

    def _call(self, a, b, count, dtype, ctx):
        try:
            dt = numpy_dtype(dtype)
            n = count * dt.itemsize
            av = np.frombuffer((ctypes.c_char * n).from_address(a), dtype=dt) if n else np.empty(0, dt)
            bv = np.frombuffer((ctypes.c_char * n).from_address(b), dtype=dt) if n else np.empty(0, dt)
            out = self.fn(av, bv)
            if out is not None and out is not bv:  # returned the combination instead of storing it
                out = np.asarray(out)
                if out.shape != bv.shape:
                    raise invalid("user op %r returned an array of shape %s; it must store into b or return an "
                                  "array of b's shape %s" % (self.fn, out.shape, bv.shape))
                np.copyto(bv, out, casting="same_kind")
        except BaseException as e:  # raised again by the call that ran the op
            self.errors.append((threading.get_ident(), e))
            _lib.op_fail(("%s: %s" % (type(e).__name__, e)).encode(errors="replace"))

    def take_error(self, any_thread=False):
        """The first exception fn raised on this thread (on any, for a
        request another thread may have progressed), dropping that thread's
        others; None if there is none."""
        me = threading.get_ident()
        mine = [x for x in self.errors if x[0] == me]
        if not mine and not (any_thread and self.errors):
            return None
        who, e = (mine or self.errors)[0]
        self.errors = [x for x in self.errors if x[0] != who]
        return e

    def raise_pending(self):
        e = self.take_error()
        if e is not None:
            raise e

    def free(self):
        if self.code is not None:
            check(_lib.op_free(self.code))
            self.code = None

    def __repr__(self):
        return "UserOp(%r, commutative=%s)" % (self.fn, self.commutative)


def op_create(fn, commutative=True):
    """A user reduction op: fn(a, b) stores a (op) b into b or returns it
    (see UserOp); commutative=False applies it in rank order."""
    return UserOp(fn, commutative)


def reduce_local(inbuf, inoutbuf, op="sum"):
    """inout = in (op) inout, element by element, locally."""
    bi, bo = buf(inbuf, "reduce_local in"), buf(inoutbuf, "reduce_local inout", writable=True)
    if bi.nbytes != bo.nbytes or bi.native != bo.native:
        raise invalid("reduce_local: in (%d x %s) and inout (%d x %s) differ"
                      % (bi.count, bi.native, bo.count, bo.native))
    dt, n = reduce_dtype(bo, op, "reduce_local")
    st = _lib.reduce_local(bi.ptr, bo.ptr, n, dt, as_op(op))
    if isinstance(op, UserOp):
        op.raise_pending()
    check(st)
    return inoutbuf


# ---- requests -------------------------------------------------------------------
Status = collections.namedtuple("Status", "source tag bytes")


def _status(ms):
    return Status(ms.source, ms.tag, ms.bytes)


class Request(concurrent.futures.Future):
    """An asynchronous operation (async_op=True). wait() / result() block
    until it completes (honouring the communicator's timeout) and return its
    result; test() / done() progress it without blocking. A failed operation
    raises its mlcomm.Error from wait() and result(), and exception() returns
    it. It is a concurrent.futures.Future: add_done_callback works, callbacks
    run in the thread that completes the request (the one whose wait, test,
    result or done call finds it complete)."""

    _wait_fn = staticmethod(_lib.request_wait)
    _test_fn = staticmethod(_lib.request_test)

    def __init__(self, handle, keep, value, op=None, in_flight=None):
        super().__init__()
        self._h = handle
        self._keep = keep
        self._value = value
        self._op = op
        self._lock = threading.RLock()
        self.group_open = _group.hold_request(self)  # made in a group that is still open
        self._in_flight = in_flight
        self.set_running_or_notify_cancel()
        if in_flight is not None:
            in_flight.add(self)

    def _finish(self, st):
        self._keep = None
        if self._in_flight is not None:
            self._in_flight.remove(self)
        err = None
        if st != 0 and isinstance(self._op, UserOp):  # this rank's op raised: that, not the status
            err = self._op.take_error(any_thread=True)
        if err is None and st != 0:
            err = error(st)
        if err is not None:
            self.set_exception(err)
        else:
            v = self._value
            self.set_result(v() if callable(v) else v)

    def _not_in_group(self):
        # The C library refuses it too, but its refusal would end this
        # Request here and release buffers the open group still uses.
        if self.group_open:
            raise invalid("a request made in a group completes after the group ends; "
                          "do not wait for or test it while the group is open")

    def test(self):
        """Progress without blocking; True once complete."""
        with self._lock:
            if super().done():
                return True
            self._not_in_group()
            flag = ctypes.c_int(0)
            st = self._test_fn(ctypes.byref(self._h), ctypes.byref(flag))
            if flag.value or st != 0:
                self._finish(st)
                return True
            return False

    def wait(self, timeout=None):
        """Block until complete; return the result (or raise its error). With
        `timeout` (seconds) raise concurrent.futures.TimeoutError when it
        passes (the operation stays in flight)."""
        if timeout is None:
            with self._lock:
                if not super().done():
                    self._not_in_group()
                    self._finish(self._wait_fn(ctypes.byref(self._h)))
        else:
            deadline = time.monotonic() + timeout
            spins = 0
            while not self.test():
                if time.monotonic() >= deadline:
                    raise concurrent.futures.TimeoutError(
                        "mlcomm request not complete after %g s" % timeout)
                spins += 1
                time.sleep(0 if spins < 100 else 0.0002)
        return super().result(0)

    def done(self):
        return self.test()

    def result(self, timeout=None):
        return self.wait(timeout)

    def exception(self, timeout=None):
        try:
            self.wait(timeout)
        except concurrent.futures.TimeoutError:
            raise
        except BaseException:
            pass
        return super().exception(0)

    def cancel(self):
        return False  # an operation in flight cannot be withdrawn (abort the communicator)

    def _poll(self):
        """test() for the in-flight sweep: never blocks (a thread waiting on
        this request holds its lock) and never raises (the error stays with
        the request)."""
        if self.group_open or not self._lock.acquire(blocking=False):
            return
        try:
            self.test()
        except Exception:
            pass
        finally:
            self._lock.release()


class InFlight:
    """A communicator's requests in flight. The package holds each until it
    completes, so an operation whose Request the caller dropped keeps its
    buffers (the C library writes them until it completes). Each later call
    on the communicator tests the oldest few, so dropped ones complete and
    are let go; free() tests them all once the C library has ended them."""

    SWEEP = 4

    def __init__(self):
        self._lock = threading.Lock()
        self._reqs = {}  # id -> Request, oldest first

    def add(self, req):
        self.sweep()
        with self._lock:
            self._reqs[id(req)] = req

    def remove(self, req):
        with self._lock:
            self._reqs.pop(id(req), None)

    def sweep(self, every=False):
        if not self._reqs:
            return
        with self._lock:
            reqs = list(self._reqs.values())
        for r in reqs if every else reqs[:self.SWEEP]:
            r._poll()


def wait_all(requests):
    """Wait for every request; return their results in order (raise the
    first error after all completed)."""
    first = None
    out = []
    for r in requests:
        try:
            out.append(r.wait())
        except Exception as e:
            out.append(None)
            first = first or e
    if first is not None:
        raise first
    return out


# ---- communicators -----------------------------------------------------------------
def _config(backend=None, rank=None, size=None, local_rank=None, local_size=None, job_id=None,
            timeout=None, log_level=None, log_file=None, profile=None, memory=None,
            mpi_thread_level=None, cma=None):
    c = _lib.Config.make()
    keep = []

    def s(v):
        b = v.encode() if isinstance(v, str) else v
        keep.append(b)
        return b

    if backend is not None:
        c.backend = s(backend)
    if rank is not None:
        c.rank = int(rank)
    if size is not None:
        c.world_size = int(size)
    if local_rank is not None:
        c.local_rank = int(local_rank)
    if local_size is not None:
        c.local_size = int(local_size)
    if job_id is not None:
        c.job_id = s(str(job_id))
    if timeout is not None:
        t = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        if t < 0:
            raise invalid("timeout %g s is negative (0 = never)" % t)
        c.timeout_s = t
    if log_level is not None:
        if log_level not in LOG_LEVEL:
            raise invalid("log_level %r: expected one of %s" % (log_level, ", ".join(LOG_LEVEL)))
        c.log_level = LOG_LEVEL[log_level]
    if log_file is not None:
        c.log_file = s(log_file)
    if profile is not None:
        c.profile = s(profile)
    if memory is not None:
        if memory not in MEMORY:
            raise invalid("memory %r: expected one of %s" % (memory, ", ".join(MEMORY)))
        c.memory = MEMORY[memory]
    if mpi_thread_level is not None:
        c.mpi_thread_level = int(mpi_thread_level)
    if cma is not None:
        c.cma = int(bool(cma))
    return c, keep


def init(backend=None, **kw):
    """This process's communicator for the whole job (mlc_comm_init). Rank
    and size come from the arguments, else MLC_* variables, else the
    launcher's (mlcomm-run, torchrun, mpirun, srun). Keyword arguments:
    rank, size, local_rank, local_size, job_id, timeout (seconds or a
    timedelta; 0 = never), log_level, log_file, profile, memory
    ("host", "cuda", "rocm", "auto"), mpi_thread_level, cma; uid (bytes from
    unique_id()) joins that communicator as `rank` of `size`
    (mlc_comm_init_rank); store (an object with set(key, value) and
    get(key), such as torch.distributed's TCPStore) bootstraps the ranks
    through it (mlc_comm_init_store; rank and size required; one store, or
    one key prefix of it, per communicator)."""
    uid = kw.pop("uid", None)
    store = kw.pop("store", None)
    if uid is not None and store is not None:
        raise invalid("init: give uid or store, not both")
    c, keep = _config(backend, **kw)
    h = ctypes.c_void_p()
    if uid is not None or store is not None:
        if kw.get("rank") is None or kw.get("size") is None:
            raise invalid("init(%s=...): rank and size are required" % ("uid" if uid is not None else "store"))
    if uid is not None:
        check(_lib.comm_init_rank(_uid(uid), int(kw["size"]), int(kw["rank"]), ctypes.byref(c),
                                  ctypes.byref(h)))
    elif store is not None:
        try:
            cb = StoreCallbacks(store)
        except TypeError as e:
            raise invalid(str(e)) from None
        st = _lib.comm_init_store(ctypes.byref(cb.struct), int(kw["size"]), int(kw["rank"]),
                                  ctypes.byref(c), ctypes.byref(h))
        if st != 0:
            err = error(st)
            if cb.error is not None and not isinstance(cb.error, Exception):
                raise cb.error  # KeyboardInterrupt, SystemExit: as they are
            if cb.error is not None:
                err = type(err)("%s (the store raised %s: %s)" % (err.message, type(cb.error).__name__,
                                                                   cb.error), st)
                raise err from cb.error
            raise err
    else:
        check(_lib.comm_init(ctypes.byref(c), ctypes.byref(h)))
    return Comm(h.value)


def init_all(n, **kw):
    """n ranks of the `threads` backend at once (mlc_comm_init_all): a list
    of n communicators, each to be used by its own thread."""
    c, keep = _config(None, **kw)
    arr = (ctypes.c_void_p * max(n, 1))()
    check(_lib.comm_init_all(int(n), ctypes.byref(c), arr))
    return [Comm(arr[i]) for i in range(n)]


def unique_id():
    """A fresh unique id (bytes) to share with the ranks that join it."""
    u = _lib.UniqueId()
    check(_lib.get_unique_id(ctypes.byref(u)))
    return bytes(u.internal)


def _uid(b):
    if isinstance(b, str):
        b = b.encode()
    if not isinstance(b, (bytes, bytearray)) or len(b) > 128:
        raise invalid("uid: expected the bytes of mlcomm.unique_id() (at most 128)")
    u = _lib.UniqueId()
    ctypes.memmove(ctypes.byref(u), bytes(b), len(b))
    return ctypes.byref(u)


def create_from(backend=None, options=None, uid=None, capacity=None):
    """Communicators from a backend name and "key" = "value" options
    (mlc_comm_create_from): a list (several for backend "threads")."""
    options = dict(options or {})
    opts = (_lib.Option * max(len(options), 1))()
    keep = []
    for i, (k, v) in enumerate(options.items()):
        kb, vb = str(k).encode(), str(v).encode()
        keep += [kb, vb]
        opts[i].key, opts[i].value = kb, vb
    if capacity is None:
        capacity = int(options.get("world_size", 1)) if backend == "threads" and uid is None else 1
    arr = (ctypes.c_void_p * max(capacity, 1))()
    n = ctypes.c_int(0)
    check(_lib.comm_create_from(backend.encode() if backend else None, opts, len(options),
                                _uid(uid) if uid is not None else None, capacity, arr, ctypes.byref(n)))
    return [Comm(arr[i]) for i in range(n.value)]


class Comm:
    """A communicator. Use from one thread at a time; free() it (or use it as
    a context manager) when done."""

    def __init__(self, handle, owned=True):
        if not handle:
            raise invalid("communicator handle is NULL")
        self._h = ctypes.c_void_p(handle)
        self._owned = owned
        self._in_flight = InFlight()

    # -- properties
    @property
    def handle(self):
        """The mlc_comm_t * as an int (for C code)."""
        return self._live()

    def _live(self):
        h = self._h.value
        if not h:
            raise invalid("the communicator was freed")
        return h

    @property
    def rank(self):
        return _lib.comm_rank(self._live())

    @property
    def size(self):
        return _lib.comm_size(self._live())

    @property
    def backend(self):
        return _lib.comm_backend(self._live()).decode()

    @property
    def timeout(self):
        """Seconds without progress before a wait fails (0: never; mlc_comm_timeout)."""
        return _lib.comm_timeout(self._live())

    @property
    def status(self):
        """None while healthy, else the sticky error's name ("MLC_ERR_TIMEOUT")."""
        st = _lib.comm_status(self._live())
        return None if st == 0 else _lib.status_name(st).decode()

    @property
    def memory(self):
        """Where this communicator's buffers may live besides host memory:
        "host" (host memory only), "cuda" or "rocm" (mlc_comm_memory)."""
        return MEMORY_KINDS[_lib.comm_memory(self._live())]

    @property
    def device(self):
        """The GPU this communicator uses (its device index), or None
        without one (mlc_comm_device)."""
        d = _lib.comm_device(self._live())
        return None if d < 0 else d

    @property
    def tag_max(self):
        return _lib.comm_tag_max(self._live())

    def __repr__(self):
        if not self._h.value:
            return "<mlcomm.Comm freed>"
        return "<mlcomm.Comm rank %d of %d, %s>" % (self.rank, self.size, self.backend)

    # -- lifetime
    def split(self, color, key=0):
        """Split as MPI_Comm_split; color None (or UNDEFINED) returns None."""
        out = ctypes.c_void_p()
        check(_lib.comm_split(self._live(), UNDEFINED if color is None else int(color), int(key),
                              ctypes.byref(out)))
        return Comm(out.value) if out.value else None

    def abort(self):
        """Fail every pending and later operation on every rank (any thread)."""
        check(_lib.comm_abort(self._live()))

    def free(self):
        """Release the communicator (local). Pending requests complete with
        AbortedError. A second free is a no-op."""
        h = self._h.value
        if h and self._owned:
            check(_lib.comm_free(h))  # refused (the communicator intact) while an open group uses it
        self._h.value = None
        self._in_flight.sweep(every=True)  # ended now: release them and what they hold

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False

    def set_algo(self, coll, algo):
        """Force an algorithm for one collective ("ring"; None or "auto" clears)."""
        check(_lib.comm_set_algo(self._live(), _coll(coll), algo.encode() if algo else None))

    def set_timeout(self, timeout):
        """This communicator's timeout (seconds or a timedelta; 0 = never):
        mlc_comm_set_timeout. On mpi, a communicator created without a
        deadline on any rank refuses one (UnsupportedError)."""
        t = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        check(_lib.comm_set_timeout(self._live(), t))

    def get_algo(self, coll, nbytes):
        name = ctypes.c_char_p()
        check(_lib.comm_get_algo(self._live(), _coll(coll), int(nbytes), ctypes.byref(name)))
        return name.value.decode()

    def set_stream(self, stream):
        """GPU backends: the stream (a cudaStream_t as int, or a torch.cuda.Stream)."""
        s = getattr(stream, "cuda_stream", stream)
        check(_lib.comm_set_stream(self._live(), ctypes.c_void_p(int(s) if s else 0)))

    def profile_stats(self):
        """Per-collective totals (MLC_PROFILE on): {name: dict}."""
        arr = (_lib.ProfileStat * 16)()
        n = ctypes.c_size_t(16)
        check(_lib.profile_stats(self._live(), arr, ctypes.byref(n)))
        out = {}
        for i in range(n.value):
            s = arr[i]
            out[COLLS[s.coll]] = {"count": s.count, "bytes": s.bytes, "time_s": s.time_s,
                                  "min_gbps": s.min_gbps, "avg_gbps": s.avg_gbps,
                                  "max_gbps": s.max_gbps}
        return out

    # -- the call machinery
    def _run(self, fn, args, async_op, keep, value, op=None):
        """Call fn(*args, comm, req); blocking unless async_op."""
        h = self._live()
        # The C library keeps the pointers it was given (counts and
        # displacements too) until the operation completes: keep them alive.
        keep = (keep, args)
        if async_op:
            req = ctypes.c_void_p()
            st = fn(*args, h, ctypes.byref(req))
            if st != 0:
                raise error(st)
            return Request(req, keep, value, op, self._in_flight)
        self._in_flight.sweep()
        st = fn(*args, h, None)
        if st != 0:
            if isinstance(op, UserOp):
                op.raise_pending()  # this rank's op raised: that, not the status it caused
            raise error(st)
        if _group.hold(keep, op):  # runs at the group's end: keep its buffers until then
            return None if callable(value) else value
        if isinstance(op, UserOp):
            op.raise_pending()
        return value() if callable(value) else value

    # -- collectives
    def broadcast(self, buf_, root=0, out=None, async_op=False):
        """Root's `buf_` reaches every rank: into `buf_` itself (in place) or
        into `out`. Returns the receiving array."""
        b = buf(buf_, "broadcast buf", writable=out is None)
        o = buf(out, "broadcast out", writable=True) if out is not None else b
        _same_dtype(b, o, "broadcast")
        if out is not None and o.nbytes != b.nbytes:
            raise invalid("broadcast: out has %d bytes, buf %d" % (o.nbytes, b.nbytes))
        dt = move_dtype(b, o)
        return self._run(_lib.broadcast, (b.ptr, o.ptr, b.elems(dt), dt, int(root)), async_op,
                         (b, o), o.obj)

    def allreduce(self, x, op="sum", out=None, async_op=False):
        """Reduce every rank's x; every rank gets the result (a new array, or
        `out`; out=x is in place)."""
        b = buf(x, "allreduce x")
        if out is None:
            out = empty_like(x, tuple(x.shape), "allreduce x")
        o = buf(out, "allreduce out", writable=True)
        _same(b, o, "allreduce")
        dt, n = reduce_dtype(b, op, "allreduce")
        return self._run(_lib.allreduce, (b.ptr, o.ptr, n, dt, as_op(op)), async_op, (b, o, op),
                         out, op)

    def reduce(self, x, root=0, op="sum", out=None, async_op=False):
        """Reduce every rank's x into root's result (a new array or `out`;
        None on other ranks unless out is given)."""
        b = buf(x, "reduce x")
        if out is None and self.rank == root:
            out = empty_like(x, tuple(x.shape), "reduce x")
        o = buf(out, "reduce out", writable=True)
        if o is not None:
            _same(b, o, "reduce")
        dt, n = reduce_dtype(b, op, "reduce")
        return self._run(_lib.reduce, (b.ptr, ptr(o), n, dt, as_op(op), int(root)), async_op,
                         (b, o, op), out, op)

    def allgather(self, x, out=None, async_op=False):
        """Every rank's x, in rank order: a new array of shape (size, *x.shape)
        or `out` (size * x elements). In place: x is out's block `rank`."""
        b = buf(x, "allgather x")
        p = self.size
        if out is None:
            out = empty_like(x, (p,) + tuple(x.shape), "allgather x")
        o = buf(out, "allgather out", writable=True)
        _same_dtype(b, o, "allgather")
        if o.nbytes != p * b.nbytes:
            raise invalid("allgather: out has %d bytes, needs %d x %d" % (o.nbytes, p, b.nbytes))
        dt = move_dtype(b, o)
        return self._run(_lib.allgather, (b.ptr, o.ptr, b.elems(dt), dt), async_op, (b, o), out)

    def allgatherv(self, x, counts, out=None, displs=None, async_op=False):
        """Rank r's x (counts[r] elements) at out[displs[r]:] (displs default
        to the prefix sums): a new 1-D array, or `out`."""
        b = buf(x, "allgatherv x")
        counts = _counts(counts, self.size, "allgatherv counts")
        if displs is None:
            displs = _prefix(counts)
        if out is None:
            out = empty_like(x, (max([d + c for d, c in zip(displs, counts)] + [0]),), "allgatherv x")
        o = buf(out, "allgatherv out", writable=True)
        _same_dtype(b, o, "allgatherv")
        _blocks_fit(counts, [int(d) for d in displs], o, "allgatherv", "out")
        dt, k = _scale(b, o)
        return self._run(_lib.allgatherv, (b.ptr, b.count * k, o.ptr, _lib.sizes([c * k for c in counts]),
                                           _lib.sizes([d * k for d in displs]), dt),
                         async_op, (b, o), out)

    def reduce_scatter(self, x, op="sum", out=None, async_op=False):
        """Reduce every rank's x (size equal blocks); rank r gets block r (a
        new array, or `out`)."""
        b = buf(x, "reduce_scatter x")
        p = self.size
        if b.count % p:
            raise invalid("reduce_scatter: x has %d elements, not a multiple of %d ranks" % (b.count, p))
        if out is None:
            shape = tuple(x.shape)
            if len(shape) >= 1 and shape[0] % p == 0:
                shape = (shape[0] // p,) + shape[1:]
            else:
                shape = (b.count // p,)
            out = empty_like(x, shape, "reduce_scatter x")
        o = buf(out, "reduce_scatter out", writable=True)
        _same_dtype(b, o, "reduce_scatter")
        if o.count * p != b.count:
            raise invalid("reduce_scatter: out has %d elements, needs %d" % (o.count, b.count // p))
        dt, n = reduce_dtype(o, op, "reduce_scatter")
        return self._run(_lib.reduce_scatter, (b.ptr, o.ptr, n, dt, as_op(op)), async_op, (b, o, op),
                         out, op)

    def alltoall(self, x, out=None, async_op=False):
        """Block j of x goes to rank j (lands at block `rank`): a new array or `out`."""
        b = buf(x, "alltoall x")
        p = self.size
        if b.count % p:
            raise invalid("alltoall: x has %d elements, not a multiple of %d ranks" % (b.count, p))
        if out is None:
            out = empty_like(x, tuple(x.shape), "alltoall x")
        o = buf(out, "alltoall out", writable=True)
        _same_dtype(b, o, "alltoall")
        if o.nbytes != b.nbytes:
            raise invalid("alltoall: out has %d bytes, x %d" % (o.nbytes, b.nbytes))
        dt = move_dtype(b, o)
        return self._run(_lib.alltoall, (b.ptr, o.ptr, b.elems(dt) // p, dt), async_op, (b, o), out)

    def alltoallv(self, x, sendcounts, recvcounts, out=None, sdispls=None, rdispls=None,
                  async_op=False):
        """x[sdispls[j]:][:sendcounts[j]] goes to rank j, landing at
        out[rdispls[i]:] for rank i's part (displacements default to prefix sums)."""
        p = self.size
        b = buf(x, "alltoallv x")
        sendcounts = _counts(sendcounts, p, "alltoallv sendcounts")
        recvcounts = _counts(recvcounts, p, "alltoallv recvcounts")
        sdispls = _prefix(sendcounts) if sdispls is None else _counts(sdispls, p, "alltoallv sdispls")
        rdispls = _prefix(recvcounts) if rdispls is None else _counts(rdispls, p, "alltoallv rdispls")
        if out is None:
            out = empty_like(x, (max([d + c for d, c in zip(rdispls, recvcounts)] + [0]),), "alltoallv x")
        o = buf(out, "alltoallv out", writable=True)
        _same_dtype(b, o, "alltoallv")
        _blocks_fit(sendcounts, sdispls, b, "alltoallv", "x")
        _blocks_fit(recvcounts, rdispls, o, "alltoallv", "out")
        dt, k = _scale(b, o)
        sc = [c * k for c in sendcounts]
        return self._run(_lib.alltoallv, (b.ptr, _lib.sizes(sc), _lib.sizes([d * k for d in sdispls]), o.ptr,
                                          _lib.sizes([c * k for c in recvcounts]),
                                          _lib.sizes([d * k for d in rdispls]), dt),
                         async_op, (b, o), out)

    def gather(self, x, root=0, out=None, async_op=False):
        """Root gets every rank's x in rank order (a new array of shape
        (size, *x.shape) or `out`); other ranks get None."""
        b = buf(x, "gather x")
        p = self.size
        if out is None and self.rank == root:
            out = empty_like(x, (p,) + tuple(x.shape), "gather x")
        o = buf(out, "gather out", writable=True)
        _same_dtype(b, o, "gather")
        if o is not None and o.nbytes != p * b.nbytes:
            raise invalid("gather: out has %d bytes, needs %d x %d" % (o.nbytes, p, b.nbytes))
        dt = move_dtype(b, o)
        return self._run(_lib.gather, (b.ptr, ptr(o), b.elems(dt), dt, int(root)), async_op, (b, o),
                         out if self.rank == root else None)

    def gatherv(self, x, counts=None, root=0, out=None, displs=None, async_op=False):
        """Root gets rank r's x (counts[r] elements) at out[displs[r]:]; counts
        and out are needed at the root only."""
        b = buf(x, "gatherv x")
        is_root = self.rank == root
        if is_root:
            counts = _counts(counts, self.size, "gatherv counts")
            if displs is None:
                displs = _prefix(counts)
            if out is None:
                out = empty_like(x, (max([d + c for d, c in zip(displs, counts)] + [0]),), "gatherv x")
        o = buf(out, "gatherv out", writable=True) if is_root else None
        if o is not None:
            _same_dtype(b, o, "gatherv")
            _blocks_fit(counts, [int(d) for d in displs], o, "gatherv", "out")
        dt, k = _scale(b, o)
        return self._run(_lib.gatherv, (b.ptr, b.count * k, ptr(o),
                                        _lib.sizes([c * k for c in counts]) if is_root else None,
                                        _lib.sizes([d * k for d in displs]) if is_root else None,
                                        dt, int(root)),
                         async_op, (b, o), out if is_root else None)

    def scatter(self, x, out, root=0, async_op=False):
        """Rank r's `out` = root's x block r (x is read at the root only)."""
        o = buf(out, "scatter out", writable=True)
        b = buf(x, "scatter x") if self.rank == root else None
        _same_dtype(b, o, "scatter")
        if b is not None and b.nbytes != self.size * o.nbytes:
            raise invalid("scatter: x has %d bytes, needs %d x %d" % (b.nbytes, self.size, o.nbytes))
        dt = move_dtype(b, o)
        return self._run(_lib.scatter, (ptr(b), o.ptr, o.elems(dt), dt, int(root)), async_op, (b, o), out)

    def scatterv(self, x, counts, out, root=0, displs=None, async_op=False):
        """Rank r's `out` = root's x[displs[r]:][:counts[r]] (x, counts and
        displs are read at the root only)."""
        o = buf(out, "scatterv out", writable=True)
        is_root = self.rank == root
        b = buf(x, "scatterv x") if is_root else None
        if is_root:
            counts = _counts(counts, self.size, "scatterv counts")
            if displs is None:
                displs = _prefix(counts)
            _same_dtype(b, o, "scatterv")
            _blocks_fit(counts, [int(d) for d in displs], b, "scatterv", "x")
        dt, k = _scale(o, b)
        return self._run(_lib.scatterv, (ptr(b), _lib.sizes([c * k for c in counts]) if is_root else None,
                                         _lib.sizes([d * k for d in displs]) if is_root else None,
                                         o.ptr, o.count * k, dt, int(root)),
                         async_op, (b, o), out)

    def barrier(self, async_op=False):
        return self._run(_lib.barrier, (), async_op, (), None)

    # -- point-to-point
    def send(self, x, dest, tag=0, async_op=False):
        b = buf(x, "send x")
        dt = move_dtype(b)
        return self._run(_lib.send, (b.ptr, b.elems(dt), dt, int(dest), int(tag)), async_op, (b,), None)

    def recv(self, out, source=ANY_SOURCE, tag=ANY_TAG, async_op=False):
        """Receive into `out`; returns Status(source, tag, bytes) (the
        request's result when async_op)."""
        o = buf(out, "recv out", writable=True)
        dt = move_dtype(o)
        ms = _lib.MsgStatus()
        args = (o.ptr, o.elems(dt), dt, int(source), int(tag))
        h = self._live()
        if async_op:
            req = ctypes.c_void_p()
            check(_lib.recv(*args, h, ctypes.byref(ms), ctypes.byref(req)))
            return Request(req, (o, ms), lambda: _status(ms), in_flight=self._in_flight)
        check(_lib.recv(*args, h, ctypes.byref(ms), None))
        if _group.hold((o, ms)):
            return None  # the status is known at the group's end
        return _status(ms)

    def sendrecv(self, x, dest, out, source=ANY_SOURCE, sendtag=0, recvtag=ANY_TAG, async_op=False):
        """Send x to dest and receive into out at once; returns the receive's Status."""
        b = buf(x, "sendrecv x")
        o = buf(out, "sendrecv out", writable=True)
        dt = move_dtype(b, o)
        ms = _lib.MsgStatus()
        args = (b.ptr, b.elems(dt), int(dest), int(sendtag), o.ptr, o.elems(dt), int(source),
                int(recvtag), dt)
        h = self._live()
        if async_op:
            req = ctypes.c_void_p()
            check(_lib.sendrecv(*args, h, ctypes.byref(ms), ctypes.byref(req)))
            return Request(req, (b, o, ms), lambda: _status(ms), in_flight=self._in_flight)
        check(_lib.sendrecv(*args, h, ctypes.byref(ms), None))
        if _group.hold((b, o, ms)):
            return None
        return _status(ms)

    def probe(self, source=ANY_SOURCE, tag=ANY_TAG):
        """Block until a matching message is available; its Status."""
        ms = _lib.MsgStatus()
        check(_lib.probe(int(source), int(tag), self._live(), ctypes.byref(ms)))
        return _status(ms)

    def iprobe(self, source=ANY_SOURCE, tag=ANY_TAG):
        """A matching message's Status, or None (does not wait)."""
        ms = _lib.MsgStatus()
        flag = ctypes.c_int(0)
        check(_lib.iprobe(int(source), int(tag), self._live(), ctypes.byref(flag), ctypes.byref(ms)))
        return _status(ms) if flag.value else None


def _coll(coll):
    if isinstance(coll, int):
        return coll
    if coll not in COLL:
        raise invalid("collective %r: expected one of %s" % (coll, ", ".join(COLLS)))
    return COLL[coll]


def _same(a, b, what):
    if a.nbytes != b.nbytes or a.native != b.native:
        raise invalid("%s: input (%d x %s) and output (%d x %s) differ"
                      % (what, a.count, a.native, b.count, b.native))


def _same_dtype(a, b, what):
    if a is not None and b is not None and a.native != b.native:
        raise invalid("%s: input is %s, output %s" % (what, a.native, b.native))


def _scale(a, b):
    """(dtype, k) for v-collectives: counts are in elements of a's own dtype;
    a dtype mlcomm lacks moves as k bytes per element."""
    d = move_dtype(a, b)
    ref = a if a is not None else b
    return d, (1 if ref.dtype is not None and d == ref.dtype else ref.itemsize)


def _counts(v, n, what):
    if v is None:
        raise invalid("%s: required" % what)
    v = [int(c) for c in v]
    if len(v) != n:
        raise invalid("%s: %d entries for %d ranks" % (what, len(v), n))
    if any(c < 0 for c in v):
        raise invalid("%s: negative entry in %s" % (what, v))
    if any(c >= 2 ** 63 for c in v):
        raise invalid("%s: entry %d does not fit in 63 bits" % (what, max(v)))
    return v


def _blocks_fit(counts, displs, arr, what, name):
    """Every non-empty block displs[i] + counts[i] lies inside `arr` (a Buf):
    the C library has only the pointer and would read or write past it."""
    if len(displs) != len(counts):
        raise invalid("%s: %d displacements for %d counts" % (what, len(displs), len(counts)))
    for i, (c, d) in enumerate(zip(counts, displs)):
        if d < 0:
            raise invalid("%s: negative displacement %d for rank %d" % (what, d, i))
        if c and d + c > arr.count:
            raise invalid("%s: rank %d's block (%d elements at %d) ends past %s (%d elements)"
                          % (what, i, c, d, name, arr.count))


def _prefix(counts):
    out, s = [], 0
    for c in counts:
        out.append(s)
        s += c
    return out
