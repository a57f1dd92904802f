/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-bench: nccl-tests-style bandwidth and correctness sweeps of one
 * collective. See `mlcomm-bench --help` and bench_colls.h for conventions.
 *
 *   mlcomm-bench -t 4 allreduce -b 8 -e 64M -f 2        4 ranks as threads
 *   mlcomm-run -n 4 mlcomm-bench allgather -b 1K -e 1M   4 processes (shm)
 *   mlcomm-run -n 2 mlcomm-bench -M device allreduce     buffers on the GPUs
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_model.h"
#include "bench_run.h"
#include "base/config.h"
#include "tool_version.h"

typedef struct thread_rank {
    const mlc_bench_opts_t *o;
    const mlc_bench_mem_t *mem;
    mlc_comm_t *comm;
    int rank, code;
} thread_rank_t;

static void *run_thread_rank(void *arg)
{
    thread_rank_t *t = arg;
    /* the device is per thread: rank r takes device r mod count */
    mlc_status_t st = mlc_bench_mem_use_device(t->mem, t->rank);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: rank %d: %s\n", t->rank, mlc_last_error());
        mlc_comm_abort(t->comm); /* the other ranks must not wait for this one */
        t->code = MLC_BENCH_EXIT_ERROR;
        return NULL;
    }
    t->code = mlc_bench_rank(t->o, t->mem, t->comm, "threads of one process");
    return NULL;
}

static int run_threads(const mlc_bench_opts_t *o, const mlc_bench_mem_t *mem)
{
    int n = o->threads, code = 0;
    mlc_comm_t **comms = calloc((size_t)n, sizeof *comms);
    thread_rank_t *ranks = calloc((size_t)n, sizeof *ranks);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    if (!comms || !ranks || !threads) {
        fprintf(stderr, "mlcomm-bench: out of memory for %d ranks\n", n);
        code = MLC_BENCH_EXIT_ERROR;
        goto out;
    }
    mlc_status_t st = mlc_comm_init_all(n, NULL, comms);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: mlc_comm_init_all(%d) failed: %s: %s\n", n,
                mlc_status_name(st), mlc_last_error());
        code = MLC_BENCH_EXIT_ERROR;
        goto out;
    }
    int started = 0;
    for (; started < n; started++) {
        ranks[started] = (thread_rank_t){o, mem, comms[started], started, 0};
        if (pthread_create(&threads[started], NULL, run_thread_rank, &ranks[started]) != 0) {
            fprintf(stderr, "mlcomm-bench: cannot start thread %d\n", started);
            code = MLC_BENCH_EXIT_ERROR;
            /* the started ranks wait for this one: stop them */
            mlc_comm_abort(comms[0]);
            break;
        }
    }
    for (int r = 0; r < started; r++) {
        pthread_join(threads[r], NULL);
        if (ranks[r].code > code) code = ranks[r].code;
    }
    for (int r = 0; r < n; r++) mlc_comm_free(comms[r]);
out:
    free(comms);
    free(ranks);
    free(threads);
    return code;
}

/* This process's local rank as mlc_comm_init will see it (0 if the
 * environment is malformed: init reports that). */
static int local_rank(void)
{
    mlc_cfg_t cfg;
    return mlc_config_resolve(NULL, &cfg) == MLC_SUCCESS ? cfg.local_rank : 0;
}

static int run_process(const mlc_bench_opts_t *o, const mlc_bench_mem_t *mem)
{
    /* Before init: the nccl backend keeps a device the caller chose. */
    mlc_status_t st = mlc_bench_mem_use_device(mem, local_rank());
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: %s\n", mlc_last_error());
        return MLC_BENCH_EXIT_ERROR;
    }
    mlc_comm_t *comm;
    st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: mlc_comm_init failed: %s: %s\n", mlc_status_name(st),
                mlc_last_error());
        return MLC_BENCH_EXIT_ERROR;
    }
    int code = mlc_bench_rank(o, mem, comm, "one per process");
    mlc_comm_free(comm);
    return code;
}

int main(int argc, char **argv)
{
    if (mlc_tool_version_wanted(argc, argv)) {
        mlc_tool_print_version("mlcomm-bench");
        return 0;
    }
    if (mlc_bench_model_wanted(argc, argv)) return mlc_bench_model_main(argc, argv);
    mlc_bench_opts_t o;
    int rc = mlc_bench_parse(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : MLC_BENCH_EXIT_USAGE;
    mlc_bench_mem_t mem;
    rc = mlc_bench_mem_setup(o.memory, &mem);
    if (rc != 0) return rc;
    return o.threads > 0 ? run_threads(&o, &mem) : run_process(&o, &mem);
}
