# SPDX-License-Identifier: BSD-3-Clause
"""Groups (mlc_group_start / mlc_group_end) for Python.

Inside a group a blocking call returns at once and the C library uses its
buffers until the outermost mlc_group_end. The binding therefore keeps every
buffer of such a call (the caller's arrays and the ones it made, such as a
result array the caller may drop) alive until then, per thread as the C
library's group state is."""

import threading

from . import _lib
from ._errors import check, invalid

_state = threading.local()


def depth():
    """How many groups this thread has open through this package."""
    return getattr(_state, "depth", 0)


def refuse(what):
    """Raise InvalidArgError for `what`, a call not meant for an open group."""
    if depth():
        raise invalid("%s is not meant for an open group (mlcomm.group): its result is needed "
                      "before the group ends" % what)


def hold(keep, op=None):
    """Keep `keep` alive until the outermost group of this thread ends (and
    raise `op`'s pending errors then); False when no group is open."""
    if not depth():
        return False
    _state.keep.append(keep)
    if op is not None and hasattr(op, "raise_pending"):
        _state.ops.append(op)
    return True


def hold_request(request):
    """Note a request made in the open group (True), to be told at its end."""
    if not depth():
        return False
    _state.requests.append(request)
    return True


def group_start():
    """Open a group on the calling thread (mlc_group_start; as
    ncclGroupStart). Prefer `with mlcomm.group():`."""
    check(_lib.group_start())
    if not depth():
        _state.keep, _state.ops, _state.requests = [], [], []
    _state.depth = depth() + 1


def group_end():
    """End the calling thread's group (mlc_group_end): the outermost end
    completes every blocking-form operation issued in it, or raises the
    first error in call order."""
    st = _lib.group_end()
    if depth():
        _state.depth -= 1
        if not _state.depth:
            ops = _state.ops
            for r in _state.requests:
                r.group_open = False
            _state.keep, _state.ops, _state.requests = [], [], []  # the C library is done with them
            pending = []
            for op in ops:  # collect every op's errors, so none is left for a later call
                try:
                    op.raise_pending()
                except Exception as e:  # noqa: B902
                    pending.append(e)
            if pending:  # an op's own exception before the status it caused
                raise pending[0]
            check(st)
            return
    check(st)


class group:
    """`with mlcomm.group(): ...` issues the block's calls as one group:
    point-to-point pairs that would deadlock one by one (every rank sends
    before it receives) complete, and on nccl they are one NCCL group.
    Blocking calls in the block return at once; their results are in place
    when the block ends (a blocking recv or sendrecv returns None there:
    use async_op=True for its Status). Requests made in the block complete
    after it; waiting for one inside it raises InvalidArgError."""

    def __enter__(self):
        group_start()
        return self

    def __exit__(self, exc_type, exc, tb):
        group_end()  # also when the block raised: the group must end
        return False
