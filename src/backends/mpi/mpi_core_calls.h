/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside the module, every call to a core function listed in
 * MLC_MPI_CORE_FUNCS goes through the bound table (see mpi_core_api.h).
 * Function-like macros: only calls are rerouted, never member names.
 * Include this after every core header.
 */
#ifndef MLC_MPI_CORE_CALLS_H
#define MLC_MPI_CORE_CALLS_H
#include "mpi_core_api.h"

extern mlc_mpi_core_t mlc_mpi_core;

#define mlc_error(...) mlc_mpi_core.mlc_error(__VA_ARGS__)
#define mlc_error_clear(...) mlc_mpi_core.mlc_error_clear(__VA_ARGS__)
#define mlc_last_error(...) mlc_mpi_core.mlc_last_error(__VA_ARGS__)
#define mlc_log_write(...) mlc_mpi_core.mlc_log_write(__VA_ARGS__)
#define mlc_request_complete(...) mlc_mpi_core.mlc_request_complete(__VA_ARGS__)
#define mlc_comm_fail(...) mlc_mpi_core.mlc_comm_fail(__VA_ARGS__)
#define mlc_comm_check(...) mlc_mpi_core.mlc_comm_check(__VA_ARGS__)
#define mlc_op_commutative(...) mlc_mpi_core.mlc_op_commutative(__VA_ARGS__)
#define mlc_reduce_apply(...) mlc_mpi_core.mlc_reduce_apply(__VA_ARGS__)
#define mlc_reduce_divide(...) mlc_mpi_core.mlc_reduce_divide(__VA_ARGS__)
#define mlc_request_desc(...) mlc_mpi_core.mlc_request_desc(__VA_ARGS__)
#define mlc_algo_find(...) mlc_mpi_core.mlc_algo_find(__VA_ARGS__)
#define mlc_algo_build(...) mlc_mpi_core.mlc_algo_build(__VA_ARGS__)
#define mlc_algo_names(...) mlc_mpi_core.mlc_algo_names(__VA_ARGS__)
#define mlc_sched_free(...) mlc_mpi_core.mlc_sched_free(__VA_ARGS__)
#define mlc_exec_create(...) mlc_mpi_core.mlc_exec_create(__VA_ARGS__)
#define mlc_exec_progress(...) mlc_mpi_core.mlc_exec_progress(__VA_ARGS__)
#define mlc_exec_pending_peers(...) mlc_mpi_core.mlc_exec_pending_peers(__VA_ARGS__)
#define mlc_exec_destroy(...) mlc_mpi_core.mlc_exec_destroy(__VA_ARGS__)
#define mlc_gpudirect_set_mpi(...) mlc_mpi_core.mlc_gpudirect_set_mpi(__VA_ARGS__)

/* MLC_LOG and friends read the bound core's level. */
#undef mlc_log_level_current
#define mlc_log_level_current (*mlc_mpi_core.log_level)

#endif
