/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The core functions the MPI module calls, handed to it by whoever loads it.
 *
 * The module links libmlcomm.so, but a program may carry its own copy of
 * core (linked with the static libmlcomm, as the in-tree tests are). Core
 * keeps process state (the user-op table, each thread's last error, the log
 * level), so the module must call the copy that loaded it: the registry's
 * proxy (src/core/backend_mpi_proxy.c) passes its own functions through
 * mlc_mpi_module_bind() before the first use. A program that links the
 * module directly (mlcomm_mpi.h) gets libmlcomm.so's functions by default.
 *
 * This header includes no MPI header: the proxy compiles it inside libmlcomm.
 */
#ifndef MLC_MPI_CORE_API_H
#define MLC_MPI_CORE_API_H
#include <stdint.h>
#include "algos/exec.h"
#include "backend.h"
#include "dtype.h"
#include "error.h"
#include "gpu/gpudirect.h"
#include "log.h"

/* Every core function with state or a thread-local effect the module calls.
 * src/backends/mpi/mpi_core_calls.h routes the module's calls through the
 * bound table; tests/mpi checks the module references none of them directly. */
#define MLC_MPI_CORE_FUNCS(X) \
    X(mlc_error)              \
    X(mlc_error_clear)        \
    X(mlc_last_error)         \
    X(mlc_log_write)          \
    X(mlc_request_complete)   \
    X(mlc_comm_fail)          \
    X(mlc_comm_check)         \
    X(mlc_op_commutative)     \
    X(mlc_reduce_apply)       \
    X(mlc_reduce_divide)      \
    X(mlc_request_desc)       \
    X(mlc_algo_find)          \
    X(mlc_algo_build)         \
    X(mlc_algo_names)         \
    X(mlc_sched_free)         \
    X(mlc_exec_create)        \
    X(mlc_exec_progress)      \
    X(mlc_exec_pending_peers) \
    X(mlc_exec_destroy)       \
    X(mlc_gpudirect_set_mpi)

#define MLC_MPI_CORE_ABI 1u

typedef struct mlc_mpi_core {
    uint32_t abi;  /* MLC_MPI_CORE_ABI */
    uint32_t size; /* sizeof(mlc_mpi_core_t) */
    /* Layout of the objects both sides touch: a module built against another
     * libmlcomm is refused rather than trusted. */
    uint32_t comm_bytes, request_bytes, backend_bytes, cfg_bytes;
    int *log_level; /* &mlc_log_level_current */
#define MLC_X_FIELD(fn) __typeof__(&fn) fn;
    MLC_MPI_CORE_FUNCS(MLC_X_FIELD)
#undef MLC_X_FIELD
} mlc_mpi_core_t;

#define MLC_MPI_X_INIT(fn) .fn = fn,
/* The table of the core this initializer is compiled into. */
#define MLC_MPI_CORE_INIT                                                              \
    {                                                                                  \
        .abi = MLC_MPI_CORE_ABI, .size = sizeof(mlc_mpi_core_t),                       \
        .comm_bytes = sizeof(mlc_comm_t), .request_bytes = sizeof(mlc_request_t),      \
        .backend_bytes = sizeof(mlc_backend_t), .cfg_bytes = sizeof(mlc_cfg_t),        \
        .log_level = &mlc_log_level_current, MLC_MPI_CORE_FUNCS(MLC_MPI_X_INIT)        \
    }

/* Symbols the module exports (looked up with dlsym by the proxy). */
#define MLC_MPI_BIND_SYMBOL "mlc_mpi_module_bind"
#define MLC_MPI_TABLE_SYMBOL "mlc_mpi_backend_table"
/* Bind the module to `core`; 0 on success, else -1 with the reason in why. */
typedef int (*mlc_mpi_bind_fn_t)(const mlc_mpi_core_t *core, char *why, size_t why_len);

#endif
