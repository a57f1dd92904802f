/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The interface between core and the MPI module (libmlcomm-mpi.so).
 *
 * libmlcomm never links libmpi (MPI's ABI differs between implementations),
 * so the MPI backend is a module built against the MPI CMake found, loaded
 * on first use by src/core/mpi_module.c. The module exports one symbol,
 * MLC_MPI_ENTRY_SYMBOL. Core calls it with the table of core functions the
 * module may call (mlc_mpi_core_t); it answers with what the module offers
 * (mlc_mpi_module_t). libmlcomm.so exports only the public API (its linker
 * version script), so this table is the module's only way into core, and it
 * always reaches the core that loaded it (a program linking the static
 * libmlcomm carries its own copy of core's process state).
 *
 * No MPI header here: both sides compile it.
 */
#ifndef MLC_CORE_MPI_MODULE_H
#define MLC_CORE_MPI_MODULE_H
#include <stdint.h>
#include "algos/exec.h"
#include "backend.h"
#include "base/dtype.h"
#include "base/error.h"
#include "devrt/gpudirect.h"
#include "base/log.h"
#include "base/op_failure.h"

/* X(field, function): every core function the module calls, as
 * mlc_core->field(...) in the module (src/backends/mpi/mpi_impl.h). */
#define MLC_MPI_CORE_FUNCS(X)                        \
    X(error, mlc_error)                              \
    X(error_clear, mlc_error_clear)                  \
    X(last_error, mlc_last_error)                    \
    X(log_write, mlc_log_write)                      \
    X(request_complete, mlc_request_complete)        \
    X(comm_fail, mlc_comm_fail)                      \
    X(comm_check, mlc_comm_check)                    \
    X(request_comm_failed, mlc_request_comm_failed)  \
    X(comm_create_with, mlc_comm_create_with)        \
    X(op_commutative, mlc_op_commutative)            \
    X(reduce_apply, mlc_reduce_apply)                \
    X(op_failures, mlc_op_failures_unscoped)         \
    X(reduce_divide, mlc_reduce_divide)              \
    X(request_desc, mlc_request_desc)                \
    X(algo_find, mlc_algo_find)                      \
    X(algo_build, mlc_algo_build)                    \
    X(algo_names, mlc_algo_names)                    \
    X(sched_free, mlc_sched_free)                    \
    X(exec_create, mlc_exec_create)                  \
    X(exec_progress, mlc_exec_progress)              \
    X(exec_pending_peers, mlc_exec_pending_peers)    \
    X(exec_destroy, mlc_exec_destroy)                \
    X(gpudirect_set_mpi, mlc_gpudirect_set_mpi)      \
    X(coll_name, mlc_coll_name)                      \
    X(dtype_name, mlc_dtype_name)                    \
    X(dtype_size, mlc_dtype_size)                    \
    X(op_name, mlc_op_name)                          \
    X(status_name, mlc_status_name)                  \
    X(env_text, mlc_env_text)                        \
    X(env_export, mlc_env_export)

#define MLC_MPI_ABI 9u

typedef struct mlc_mpi_core {
    uint32_t abi;  /* MLC_MPI_ABI */
    uint32_t size; /* sizeof(mlc_mpi_core_t) */
    /* Layout of the objects both sides touch: a module built against another
     * libmlcomm is refused rather than trusted. */
    uint32_t comm_bytes, request_bytes, backend_bytes, cfg_bytes;
    const int *log_level; /* &mlc_log_level_current */
#define MLC_X_FIELD(field, fn) __typeof__(&fn) field;
    MLC_MPI_CORE_FUNCS(MLC_X_FIELD)
#undef MLC_X_FIELD
} mlc_mpi_core_t;

/* The table of the core this initializer is compiled into (core only). */
#define MLC_X_INIT(field, fn) .field = fn,
#define MLC_MPI_CORE_INIT                                                              \
    {                                                                                  \
        .abi = MLC_MPI_ABI, .size = sizeof(mlc_mpi_core_t),                            \
        .comm_bytes = sizeof(mlc_comm_t), .request_bytes = sizeof(mlc_request_t),      \
        .backend_bytes = sizeof(mlc_backend_t), .cfg_bytes = sizeof(mlc_cfg_t),        \
        .log_level = &mlc_log_level_current, MLC_MPI_CORE_FUNCS(MLC_X_INIT)            \
    }

struct mlc_xexec_mpi_table;

/* What the module offers, valid for the life of the process. */
typedef struct mlc_mpi_module {
    uint32_t abi;  /* MLC_MPI_ABI */
    uint32_t size; /* sizeof(mlc_mpi_module_t) */
    const mlc_backend_t *backend;
    /* The exchange planner's MPI executors (src/exchange/xexec_mpi.h). */
    const struct mlc_xexec_mpi_table *xexec;
    /* mlcomm_mpi.h, with the MPI communicator as its Fortran handle
     * (MPI_Comm_c2f), the one representation both sides can name. */
    mlc_status_t (*from_mpi)(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out);
    mlc_status_t (*get_mpi)(const mlc_comm_t *comm, int64_t *comm_f);
} mlc_mpi_module_t;

#define MLC_MPI_ENTRY_SYMBOL "mlc_mpi_module_entry"
/* Bind the module to `core` and describe it; NULL with the reason in why. */
typedef const mlc_mpi_module_t *(*mlc_mpi_entry_fn_t)(const mlc_mpi_core_t *core, char *why, size_t why_len);

/* The loaded module (src/core/mpi_module.c), loading it on first use; NULL
 * with the reason as the thread's error (UNAVAILABLE) when it cannot be. */
const mlc_mpi_module_t *mlc_mpi_module(void);
/* Whether the module can be loaded; else why. */
int mlc_mpi_module_available(char *why, size_t why_len);

#endif
