/* SPDX-License-Identifier: BSD-3-Clause */
/* One rank of an mlcomm-bench run. */
#ifndef MLC_TOOLS_BENCH_RUN_H
#define MLC_TOOLS_BENCH_RUN_H
#include "bench_opts.h"

#define MLC_BENCH_EXIT_WRONG 1 /* some result was wrong */
#define MLC_BENCH_EXIT_USAGE 2
#define MLC_BENCH_EXIT_ERROR 3 /* a call failed */

/*
 * Run the sweep of `o` on this rank of comm, with buffers in `mem` (set up by
 * mlc_bench_mem_setup; device memory on the calling thread's current
 * device); rank 0 prints the table.
 * `ranks_are` says what a rank is ("threads of one process"). Collective over
 * comm. Returns 0 or an MLC_BENCH_EXIT_* code, the same on every rank except
 * after a failed call (the failing rank aborts comm so its peers stop too).
 */
int mlc_bench_rank(const mlc_bench_opts_t *o, const mlc_bench_mem_t *mem, mlc_comm_t *comm,
                   const char *ranks_are);
#endif
