/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * "key" = "value" options of mlc_comm_create_from, mapped onto
 * mlc_config_t fields. MLC_OPTION_LIST is the one list of keys.
 */
#ifndef MLC_TENSOR_OPTIONS_H
#define MLC_TENSOR_OPTIONS_H
#include "mlcomm_tensor.h"

/* X(key, parser, field, help) - parser is one of the option_parse_* kinds. */
#define MLC_OPTION_LIST(X)                                                                  \
    X("rank", RANK, rank, "this rank (with a unique id, or for a launched job)")            \
    X("world_size", COUNT, world_size, "number of ranks")                                   \
    X("local_rank", RANK, local_rank, "rank among the processes of this host")              \
    X("local_size", COUNT, local_size, "number of ranks on this host")                      \
    X("job_id", STRING, job_id, "job identifier shared by all ranks")                       \
    X("timeout", SECONDS, timeout_s, "seconds without progress before a timeout (0 = never)") \
    X("log_level", LOG_LEVEL, log_level, "error, warn, info, debug, trace")                 \
    X("log_file", STRING, log_file, "log file; %h = host, %p = pid")                        \
    X("profile", STRING, profile, "trace file per rank; %r = rank")                         \
    X("memory", MEMORY, memory, "host, cuda, rocm, auto")                                   \
    X("mpi_thread_level", THREAD_LEVEL, mpi_thread_level,                                   \
      "single, funneled, serialized, multiple")                                             \
    X("cma", BOOL, cma, "shm single-copy transfers (0/1)")

/* Prefix of the per-collective algorithm keys: "algo_allreduce", ... */
#define MLC_OPTION_ALGO_PREFIX "algo_"

/*
 * Apply options to *cfg (string fields then point into the options).
 * Keys starting with MLC_OPTION_ALGO_PREFIX are checked to name a
 * collective (MLC_COLL_LIST) and left for the caller: *algo_count receives
 * how many there were. Errors: CONFIG naming the key (unknown key, bad
 * value, key given twice), INVALID_ARG (NULL key).
 */
mlc_status_t mlc_options_apply(const mlc_option_t *options, size_t n, mlc_config_t *cfg,
                               size_t *algo_count);
/* The collective an "algo_<name>" key names, or -1. */
int mlc_options_algo_coll(const char *key);
#endif
