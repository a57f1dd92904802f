# SPDX-License-Identifier: BSD-3-Clause
"""mlcomm for Python: the collectives and point-to-point calls of mlcomm.h
on numpy arrays and torch tensors, over libmlcomm (ctypes; no compiled
extension). See docs/PYTHON.md.

    import mlcomm, numpy as np
    with mlcomm.init() as comm:              # rank and size from the launcher
        total = comm.allreduce(np.ones(4) * comm.rank)

The torch.distributed backend is `import mlcomm.torch` (registers "mlcomm").
"""

from . import _lib
from ._core import (ANY_SOURCE, ANY_TAG, COLLS, DTYPES, OPS, UNDEFINED, Comm, Request, Status,
                    UserOp, as_dtype, create_from, dtype_name, dtype_size, init, init_all,
                    numpy_dtype, op_create, record, reduce_local, shared_empty, unique_id, wait_all)
from ._group import group, group_end, group_start
from ._errors import (AbortedError, BackendError, BusyError, ConfigError, Error, InternalError,
                      InvalidArgError, MismatchError, NoMemoryError, PeerLostError, SystemError,
                      TimeoutError, TruncateError, UnavailableError, UnsupportedError, UserOpError)
from . import exchange, tensor  # noqa: E402

__version__ = _lib.version().decode()
library_path = _lib.path


def version():
    """The version of the libmlcomm actually loaded ("0.1.0")."""
    return _lib.version().decode()


def status_name(status):
    s = _lib.status_name(int(status))
    return s.decode() if s else None


def status_string(status):
    s = _lib.status_string(int(status))
    return s.decode() if s else None


def op_name(op):
    s = _lib.op_name(op.code if isinstance(op, UserOp) else int(op))
    return s.decode() if s else None


def coll_name(coll):
    s = _lib.coll_name(int(coll))
    return s.decode() if s else None


__all__ = [
    "ANY_SOURCE", "ANY_TAG", "COLLS", "DTYPES", "OPS", "UNDEFINED", "Comm", "Request", "Status",
    "UserOp", "as_dtype", "create_from", "dtype_name", "dtype_size", "init", "init_all",
    "numpy_dtype", "op_create", "record", "reduce_local", "shared_empty", "unique_id", "wait_all", "version",
    "status_name", "status_string", "group", "group_start", "group_end", "op_name", "coll_name", "exchange", "tensor", "library_path",
    "Error", "AbortedError", "BackendError", "BusyError", "ConfigError", "InternalError",
    "InvalidArgError", "MismatchError", "NoMemoryError", "PeerLostError", "SystemError",
    "TimeoutError", "TruncateError", "UnavailableError", "UnsupportedError", "UserOpError",
]
