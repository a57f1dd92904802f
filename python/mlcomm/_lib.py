# SPDX-License-Identifier: BSD-3-Clause
"""Loading libmlcomm and declaring its C API to ctypes (mlcomm.h and the
headers it includes). Nothing here is public: the package maps it to Python."""

import ctypes
import ctypes.util
import os

# ---- where the library is --------------------------------------------------


def _candidates():
    env = os.environ.get("MLCOMM_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    # A source tree: python/mlcomm/ next to build/lib/.
    out.append(os.path.join(here, "..", "..", "build", "lib", "libmlcomm.so"))
    # An installed tree: PREFIX/lib/pythonX/.../mlcomm and PREFIX/lib/libmlcomm.so.0,
    # or PREFIX/share/... : try the lib directories above us.
    d = here
    for _ in range(6):
        d = os.path.dirname(d)
        for lib in ("lib", "lib64"):
            out.append(os.path.join(d, lib, "libmlcomm.so.0"))
    found = ctypes.util.find_library("mlcomm")
    if found:
        out.append(found)
    out.append("libmlcomm.so.0")
    return out


def _load():
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    hint = ("MLCOMM_LIBRARY names it" if os.environ.get("MLCOMM_LIBRARY")
            else "set MLCOMM_LIBRARY to its path, or build it in build/")
    raise ImportError("mlcomm: cannot load libmlcomm (%s): %s" % (hint, "; ".join(errors)))


lib, path = _load()

# ---- types -----------------------------------------------------------------
c_status = ctypes.c_int
c_dtype = ctypes.c_int32
c_op = ctypes.c_int32
c_coll = ctypes.c_int32
vp = ctypes.c_void_p
sz = ctypes.c_size_t
szp = ctypes.POINTER(ctypes.c_size_t)
pp = ctypes.POINTER(ctypes.c_void_p)
ip = ctypes.POINTER(ctypes.c_int)

MLC_UNSET = -1
MLC_UNDEFINED = -32766
MLC_ANY_SOURCE = -1
MLC_ANY_TAG = -1
MLC_CONFIG_MAGIC = 0x4D4C4331
MLC_CONFIG_VERSION = 1
MLC_TENSOR_MAX_DIMS = 8
MLC_DEVICE_HOST = -1
MLC_EXCHANGE_MAX_DIMS = 8
MLC_EXCHANGE_CONFIG_MAGIC = 0x4D4C5831
MLC_EXCHANGE_CONFIG_VERSION = 1
MLC_EXCHANGE_ALLOW_UNPROVIDED = 0x1


class Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint32),
        ("version", ctypes.c_uint32),
        ("backend", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("local_rank", ctypes.c_int),
        ("local_size", ctypes.c_int),
        ("job_id", ctypes.c_char_p),
        ("timeout_s", ctypes.c_double),
        ("log_level", ctypes.c_int),
        ("log_file", ctypes.c_char_p),
        ("profile", ctypes.c_char_p),
        ("memory", ctypes.c_int),
        ("mpi_thread_level", ctypes.c_int),
        ("cma", ctypes.c_int),
    ]

    @classmethod
    def make(cls):
        c = cls()
        c.size = ctypes.sizeof(cls)
        c.magic = MLC_CONFIG_MAGIC
        c.version = MLC_CONFIG_VERSION
        c.backend = None
        for f in ("rank", "world_size", "local_rank", "local_size", "log_level", "memory",
                  "mpi_thread_level", "cma"):
            setattr(c, f, MLC_UNSET)
        c.timeout_s = -1.0
        return c


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class MsgStatus(ctypes.Structure):
    _fields_ = [("source", ctypes.c_int), ("tag", ctypes.c_int), ("bytes", ctypes.c_size_t)]


class ProfileStat(ctypes.Structure):
    _fields_ = [("coll", c_coll), ("count", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("time_s", ctypes.c_double), ("min_gbps", ctypes.c_double),
                ("avg_gbps", ctypes.c_double), ("max_gbps", ctypes.c_double)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", vp), ("dtype", c_dtype), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_size_t * MLC_TENSOR_MAX_DIMS), ("device", ctypes.c_int)]


class Option(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class Box(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("start", ctypes.c_int64 * MLC_EXCHANGE_MAX_DIMS),
                ("shape", ctypes.c_int64 * MLC_EXCHANGE_MAX_DIMS)]


class View(ctypes.Structure):
    _fields_ = [("data", vp), ("parent", Box), ("region", Box)]


class ExchangeConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint32), ("version", ctypes.c_uint32),
                ("ndim", ctypes.c_int), ("dtype", c_dtype), ("flags", ctypes.c_uint),
                ("domain", Box), ("periodic", ctypes.c_int * MLC_EXCHANGE_MAX_DIMS)]


class ExchangeInfo(ctypes.Structure):
    _fields_ = [("send_peers", ctypes.c_int), ("recv_peers", ctypes.c_int),
                ("send_bytes", ctypes.c_size_t), ("recv_bytes", ctypes.c_size_t),
                ("send_segments", ctypes.c_size_t), ("recv_segments", ctypes.c_size_t),
                ("local_copies", ctypes.c_size_t), ("local_bytes", ctypes.c_size_t),
                ("unprovided_cells", ctypes.c_uint64), ("builds", ctypes.c_uint64),
                ("cache_hits", ctypes.c_uint64), ("runs", ctypes.c_uint64),
                ("layout_hash", ctypes.c_uint64), ("executor", ctypes.c_char_p)]


USER_FN = ctypes.CFUNCTYPE(None, vp, vp, ctypes.c_size_t, c_dtype, vp)
STORE_SET_FN = ctypes.CFUNCTYPE(ctypes.c_int, vp, ctypes.c_char_p, vp, ctypes.c_size_t)
STORE_GET_FN = ctypes.CFUNCTYPE(ctypes.c_int, vp, ctypes.c_char_p, vp, ctypes.c_size_t, szp,
                                ctypes.c_double)
MLC_STORE_OK = 0
MLC_STORE_TIMEOUT = 1
MLC_STORE_FAILED = 2  # any other value: the callback failed


class Store(ctypes.Structure):
    _fields_ = [("ctx", vp), ("set", STORE_SET_FN), ("get", STORE_GET_FN)]

COMBINE_FN = ctypes.CFUNCTYPE(None, vp, vp, vp)

# ---- functions: name -> (restype, argtypes) ---------------------------------
S = c_status
R = pp  # mlc_request_t ** (and mlc_tensor_request_t **)
_sigs = {
    "mlc_version": (ctypes.c_char_p, []),
    "mlc_status_string": (ctypes.c_char_p, [c_status]),
    "mlc_status_name": (ctypes.c_char_p, [c_status]),
    "mlc_last_error": (ctypes.c_char_p, []),
    "mlc_dtype_size": (ctypes.c_size_t, [c_dtype]),
    "mlc_dtype_name": (ctypes.c_char_p, [c_dtype]),
    "mlc_dtype_from_name": (S, [ctypes.c_char_p, ctypes.POINTER(c_dtype)]),
    "mlc_op_create": (S, [USER_FN, ctypes.c_int, vp, ctypes.POINTER(c_op)]),
    "mlc_op_free": (S, [c_op]),
    "mlc_op_fail": (None, [ctypes.c_char_p]),
    "mlc_op_name": (ctypes.c_char_p, [c_op]),
    "mlc_op_from_name": (S, [ctypes.c_char_p, ctypes.POINTER(c_op)]),
    "mlc_reduce_local": (S, [vp, vp, sz, c_dtype, c_op]),
    "mlc_mem_alloc": (S, [sz, pp]),
    "mlc_mem_free": (S, [vp]),
    "mlc_coll_name": (ctypes.c_char_p, [c_coll]),
    "mlc_comm_init": (S, [ctypes.POINTER(Config), pp]),
    "mlc_comm_init_all": (S, [ctypes.c_int, ctypes.POINTER(Config), pp]),
    "mlc_get_unique_id": (S, [ctypes.POINTER(UniqueId)]),
    "mlc_comm_init_rank": (S, [ctypes.POINTER(UniqueId), ctypes.c_int, ctypes.c_int,
                               ctypes.POINTER(Config), pp]),
    "mlc_comm_init_store": (S, [ctypes.POINTER(Store), ctypes.c_int, ctypes.c_int,
                                ctypes.POINTER(Config), pp]),
    "mlc_comm_rank": (ctypes.c_int, [vp]),
    "mlc_comm_size": (ctypes.c_int, [vp]),
    "mlc_comm_backend": (ctypes.c_char_p, [vp]),
    "mlc_comm_status": (S, [vp]),
    "mlc_comm_split": (S, [vp, ctypes.c_int, ctypes.c_int, pp]),
    "mlc_comm_free": (S, [vp]),
    "mlc_comm_abort": (S, [vp]),
    "mlc_comm_set_algo": (S, [vp, c_coll, ctypes.c_char_p]),
    "mlc_comm_set_timeout": (S, [vp, ctypes.c_double]),
    "mlc_comm_timeout": (ctypes.c_double, [vp]),
    "mlc_comm_get_algo": (S, [vp, c_coll, sz, ctypes.POINTER(ctypes.c_char_p)]),
    "mlc_comm_set_stream": (S, [vp, vp]),
    "mlc_comm_tag_max": (ctypes.c_int, [vp]),
    "mlc_comm_memory": (ctypes.c_int, [vp]),
    "mlc_comm_device": (ctypes.c_int, [vp]),
    "mlc_group_start": (S, []),
    "mlc_group_end": (S, []),
    "mlc_request_wait": (S, [pp]),
    "mlc_request_test": (S, [pp, ip]),
    "mlc_request_wait_all": (S, [sz, pp, ip]),
    "mlc_broadcast": (S, [vp, vp, sz, c_dtype, ctypes.c_int, vp, R]),
    "mlc_reduce": (S, [vp, vp, sz, c_dtype, c_op, ctypes.c_int, vp, R]),
    "mlc_allreduce": (S, [vp, vp, sz, c_dtype, c_op, vp, R]),
    "mlc_allgather": (S, [vp, vp, sz, c_dtype, vp, R]),
    "mlc_allgatherv": (S, [vp, sz, vp, szp, szp, c_dtype, vp, R]),
    "mlc_reduce_scatter": (S, [vp, vp, sz, c_dtype, c_op, vp, R]),
    "mlc_alltoall": (S, [vp, vp, sz, c_dtype, vp, R]),
    "mlc_alltoallv": (S, [vp, szp, szp, vp, szp, szp, c_dtype, vp, R]),
    "mlc_gather": (S, [vp, vp, sz, c_dtype, ctypes.c_int, vp, R]),
    "mlc_gatherv": (S, [vp, sz, vp, szp, szp, c_dtype, ctypes.c_int, vp, R]),
    "mlc_scatter": (S, [vp, vp, sz, c_dtype, ctypes.c_int, vp, R]),
    "mlc_scatterv": (S, [vp, szp, szp, vp, sz, c_dtype, ctypes.c_int, vp, R]),
    "mlc_barrier": (S, [vp, R]),
    "mlc_send": (S, [vp, sz, c_dtype, ctypes.c_int, ctypes.c_int, vp, R]),
    "mlc_recv": (S, [vp, sz, c_dtype, ctypes.c_int, ctypes.c_int, vp, ctypes.POINTER(MsgStatus), R]),
    "mlc_sendrecv": (S, [vp, sz, ctypes.c_int, ctypes.c_int, vp, sz, ctypes.c_int, ctypes.c_int,
                         c_dtype, vp, ctypes.POINTER(MsgStatus), R]),
    "mlc_probe": (S, [ctypes.c_int, ctypes.c_int, vp, ctypes.POINTER(MsgStatus)]),
    "mlc_iprobe": (S, [ctypes.c_int, ctypes.c_int, vp, ip, ctypes.POINTER(MsgStatus)]),
    "mlc_profile_stats": (S, [vp, ctypes.POINTER(ProfileStat), szp]),
    # mlcomm_tensor.h
    "mlc_tensor_init": (S, [ctypes.POINTER(Tensor), vp, c_dtype, ctypes.c_int, szp]),
    "mlc_tensor_numel": (sz, [ctypes.POINTER(Tensor)]),
    "mlc_tensor_bytes": (sz, [ctypes.POINTER(Tensor)]),
    "mlc_tensor_split": (S, [sz, ctypes.c_int, ctypes.c_int, szp, szp]),
    "mlc_tensor_request_wait": (S, [pp]),
    "mlc_tensor_request_test": (S, [pp, ip]),
    "mlc_tensor_request_wait_all": (S, [sz, pp, ip]),
    "mlc_tensor_allgather": (S, [ctypes.POINTER(Tensor), ctypes.POINTER(Tensor), ctypes.c_int, vp, R]),
    "mlc_tensor_reduce_scatter": (S, [ctypes.POINTER(Tensor), ctypes.POINTER(Tensor), ctypes.c_int,
                                      c_op, vp, R]),
    "mlc_tensor_allreduce": (S, [ctypes.POINTER(Tensor), ctypes.POINTER(Tensor), c_op, vp, R]),
    "mlc_tensor_broadcast": (S, [ctypes.POINTER(Tensor), ctypes.c_int, vp, R]),
    "mlc_tensor_barrier": (S, [vp, R]),
    "mlc_tensor_set_checks": (S, [vp, ctypes.c_int32]),
    "mlc_tensor_get_checks": (ctypes.c_int32, [vp]),
    "mlc_mesh_create": (S, [vp, ip, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), pp]),
    "mlc_mesh_free": (S, [vp]),
    "mlc_mesh_ndims": (ctypes.c_int, [vp]),
    "mlc_mesh_size": (ctypes.c_int, [vp, ctypes.c_int]),
    "mlc_mesh_coord": (ctypes.c_int, [vp, ctypes.c_int]),
    "mlc_mesh_name": (ctypes.c_char_p, [vp, ctypes.c_int]),
    "mlc_mesh_comm": (vp, [vp, ctypes.c_int]),
    "mlc_mesh_axis": (S, [vp, ctypes.c_char_p, ip]),
    "mlc_mesh_rank_of": (S, [vp, ip, ip]),
    "mlc_mesh_coords": (S, [vp, ip]),
    "mlc_mesh_group": (S, [vp, ip, ctypes.c_int, pp]),
    "mlc_comm_create_from": (S, [ctypes.c_char_p, ctypes.POINTER(Option), sz, ctypes.POINTER(UniqueId),
                                 ctypes.c_int, pp, ip]),
    # mlcomm_exchange.h
    "mlc_exchange_create": (S, [vp, ctypes.POINTER(ExchangeConfig), pp]),
    "mlc_exchange_provide": (S, [vp, ctypes.POINTER(View), ip]),
    "mlc_exchange_need": (S, [vp, ctypes.POINTER(View), ip]),
    "mlc_exchange_set_data": (S, [vp, ctypes.c_int, ctypes.c_int, vp]),
    "mlc_exchange_clear": (S, [vp]),
    "mlc_exchange_set_topology_version": (S, [vp, ctypes.c_uint64]),
    "mlc_exchange_build": (S, [vp]),
    "mlc_exchange_set_executor": (S, [vp, ctypes.c_char_p]),
    "mlc_exchange_start": (S, [vp]),
    "mlc_exchange_finish": (S, [vp]),
    "mlc_exchange_run": (S, [vp]),
    "mlc_exchange_info": (S, [vp, ctypes.POINTER(ExchangeInfo)]),
    "mlc_exchange_free": (S, [vp]),
    "mlc_box_halo": (S, [ctypes.POINTER(Box), ip, ctypes.POINTER(Box), ip]),
    "mlc_combine": (S, [vp, vp, sz, sz, COMBINE_FN, ctypes.c_int, vp, vp]),
}

for _name, (_res, _args) in _sigs.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
    globals()[_name[4:]] = _f  # mlc_allreduce -> allreduce


def sizes(values):
    """A size_t array of `values` (or None)."""
    if values is None:
        return None
    values = [int(v) for v in values]
    return (ctypes.c_size_t * max(len(values), 1))(*values)
