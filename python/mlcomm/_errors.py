# SPDX-License-Identifier: BSD-3-Clause
"""mlcomm.Error and one subclass per status code of mlcomm.h."""

import builtins

from . import _lib


class Error(Exception):
    """A failed mlcomm call: `status` (the negative code), `name`
    ("MLC_ERR_TIMEOUT"), `message` (mlcomm's detailed message)."""

    status = None
    name = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
            self.name = _lib.status_name(status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.name, message) if self.name else message)


# Status code -> (class name, extra builtin base). The names and the codes are
# checked against the loaded library below.
_TABLE = [
    (-1, "MLC_ERR_INVALID_ARG", "InvalidArgError", ValueError),
    (-2, "MLC_ERR_NO_MEMORY", "NoMemoryError", MemoryError),
    (-3, "MLC_ERR_UNSUPPORTED", "UnsupportedError", NotImplementedError),
    (-4, "MLC_ERR_UNAVAILABLE", "UnavailableError", None),
    (-5, "MLC_ERR_TIMEOUT", "TimeoutError", builtins.TimeoutError),
    (-6, "MLC_ERR_PEER_LOST", "PeerLostError", ConnectionError),
    (-7, "MLC_ERR_ABORTED", "AbortedError", None),
    (-8, "MLC_ERR_TRUNCATE", "TruncateError", None),
    (-9, "MLC_ERR_CONFIG", "ConfigError", None),
    (-10, "MLC_ERR_MISMATCH", "MismatchError", None),
    (-11, "MLC_ERR_BACKEND", "BackendError", None),
    (-12, "MLC_ERR_SYSTEM", "SystemError", OSError),
    (-13, "MLC_ERR_BUSY", "BusyError", None),
    (-14, "MLC_ERR_INTERNAL", "InternalError", None),
    (-15, "MLC_ERR_USER_OP", "UserOpError", None),
]

BY_STATUS = {}
for _code, _name, _cls, _extra in _TABLE:
    _lib_name = _lib.status_name(_code)
    if _lib_name is None or _lib_name.decode() != _name:
        raise ImportError("mlcomm: the loaded library names status %d %r, this package expects %s "
                          "(library and package from different releases?)" % (_code, _lib_name, _name))
    bases = (Error,) if _extra is None else (Error, _extra)
    _c = type(_cls, bases, {"status": _code, "name": _name,
                            "__doc__": "%s: %s." % (_name, _lib.status_string(_code).decode())})
    _c.__module__ = "mlcomm"
    BY_STATUS[_code] = _c
    globals()[_cls] = _c


def error(status, message=None):
    """The exception for a failed call (`message` defaults to mlc_last_error())."""
    if message is None:
        message = (_lib.last_error() or b"").decode(errors="replace")
        if not message:
            message = _lib.status_string(status).decode()
    cls = BY_STATUS.get(status, Error)
    return cls(message, status)


def check(status):
    """Raise the matching Error for a non-zero status."""
    if status != 0:
        raise error(status)


def invalid(message):
    return BY_STATUS[-1](message, -1)
