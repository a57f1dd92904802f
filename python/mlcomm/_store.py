# SPDX-License-Identifier: BSD-3-Clause
"""A Python key-value store as mlcomm's store callbacks (mlc_store_t), for
mlcomm.init(store=...).

A store is any object with set(key, value) and get(key): torch.distributed's
stores (see _looker for how they are read), or any other whose get returns
the value, or raises KeyError (or returns None) while the key is missing.
A wait for a key polls until its time is up. Keys arrive as str, values as
bytes; get may return bytes, bytearray or str.

No Python exception may cross into C: a raising store method makes the
callback return a failure, and the exception is kept to be chained to the
error the init raises."""

import ctypes
import time

from . import _lib


# The value compare_set is asked to expect: no store holds it, so a
# compare_set(key, _ABSENT, _ABSENT) only reads (torch: it returns the
# expected value when the key is missing, and changes nothing otherwise).
_ABSENT = b"\0mlcomm: no such key\0"


def _looker(store):
    """A function key -> value or None that looks once, without waiting.

    torch's stores (TCPStore, FileStore, HashStore, PrefixStore) block in
    get() until the key exists, and their timed wait() is no way to look:
    on a TCPStore a wait that times out leaves its socket out of step with
    the server, and torch 1.13's FileStore.wait never returns before the
    file has been written once. So they are read with check() (torch >= 2.0)
    or compare_set(); any other store with get() raising KeyError (or
    returning None) while the key is missing."""
    check = getattr(store, "check", None)
    if callable(check):
        return lambda key: store.get(key) if check([key]) else None
    compare_set = getattr(store, "compare_set", None)
    if callable(compare_set):
        def look(key):
            v = compare_set(key, _ABSENT, _ABSENT)
            return None if _as_bytes(v) == _ABSENT else v
        return look

    def look(key):
        try:
            return store.get(key)
        except KeyError:
            return None
    return look


def _poll(look, key, timeout_s):
    """Look until the key exists or timeout_s passes (< 0: no limit)."""
    deadline = None if timeout_s < 0 else time.monotonic() + timeout_s
    pause = 0.0005
    while True:
        value = look(key)
        if value is not None:
            return value
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            pause = min(pause, left)
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _as_bytes(value):
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class StoreCallbacks:
    """mlc_store_t callbacks over `store`; keep this object alive for as
    long as the C side may call them (the init call)."""

    def __init__(self, store):
        if not callable(getattr(store, "set", None)) or not callable(getattr(store, "get", None)):
            raise TypeError("store: expected an object with set(key, value) and get(key) methods, "
                            "got %r" % type(store).__name__)
        self.store = store
        self.error = None  # the first exception a store method raised
        self._look = _looker(store)
        self._c_set = _lib.STORE_SET_FN(self._set)
        self._c_get = _lib.STORE_GET_FN(self._get)
        self.struct = _lib.Store(None, self._c_set, self._c_get)

    def _failed(self, exc):
        if self.error is None:
            self.error = exc
        return _lib.MLC_STORE_FAILED

    def _set(self, _ctx, key, value, length):
        try:
            self.store.set(key.decode(), ctypes.string_at(value, length) if length else b"")
            return _lib.MLC_STORE_OK
        except BaseException as e:  # noqa: B902 - nothing may cross into C
            return self._failed(e)

    def _get(self, _ctx, key, buf, cap, length, timeout_s):
        try:
            value = _poll(self._look, key.decode(), timeout_s)
            if value is None:
                return _lib.MLC_STORE_TIMEOUT
            value = _as_bytes(value)
            length[0] = len(value)
            if cap and buf:
                ctypes.memmove(buf, value, min(len(value), cap))
            return _lib.MLC_STORE_OK
        except BaseException as e:  # noqa: B902
            return self._failed(e)
