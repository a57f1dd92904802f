/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm-bench's command line. */
#ifndef MLC_TOOLS_BENCH_OPTS_H
#define MLC_TOOLS_BENCH_OPTS_H
#include <stdbool.h>
#include <stddef.h>
#include "bench_colls.h"
#include "bench_mem.h"

typedef struct mlc_bench_opts {
    const mlc_bench_coll_t *coll;
    size_t min_bytes, max_bytes;
    size_t step_bytes;  /* used when step_factor is 1 */
    size_t step_factor;
    int iters, warmup;
    int check;          /* 0 or 1 */
    int percentiles;    /* 1: time every call alone too, report p50 and p99 */
    mlc_dtype_t dtype;
    mlc_op_t op;
    int root;
    const char *algo;   /* NULL: the selector's choice; "all": every algorithm of the collective */
    int threads;        /* 0: this process is one rank; N: N ranks as threads (mlc_comm_init_all) */
    mlc_bench_mem_kind_t memory; /* where send and receive buffers live */
} mlc_bench_opts_t;

/* 0: run; 1: help was printed; -1: usage error (message printed). */
int mlc_bench_parse(int argc, char **argv, mlc_bench_opts_t *o);

/* Advance *size to the next size of the sweep; false when the sweep is over. */
bool mlc_bench_next_size(const mlc_bench_opts_t *o, size_t *size);
#endif
