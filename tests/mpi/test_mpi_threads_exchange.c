/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two halo exchanges, each on its own communicator, run from two threads at
 * once (mlcomm.h allows it) on an MPI below MPI_THREAD_MULTIPLE
 * (MLC_MPI_THREAD_LEVEL=serialized or funneled), with the executor that
 * MLC_EXCHANGE_EXEC names (mpi_pack, mpi_subarray): their MPI calls must
 * take turns with every other mlcomm call of the process, as the
 * collectives' do (MPICH aborts in its progress engine otherwise). Each
 * thread owns cells [r*N, r*N+N) of a periodic line of p*N cells, needs one
 * cell either side, and checks both halo cells after every run. The
 * exchanges are created (a communicator each) before the threads start:
 * creating communicators from two threads at once is not allowed below
 * MPI_THREAD_MULTIPLE (docs/MPI.md). Exit 0 = pass.
 */
#include <stdint.h>
#include <stdio.h>
#include "mlcomm_exchange.h"
#include "two_threads.h"

#define ROUNDS 300
#define N 64

static int64_t value(int64_t cell, int round, int which) { return cell * 1000 + round * 10 + which; }

static int fail(two_threads_job_t *j, const char *what, mlc_status_t st)
{
    snprintf(j->why, sizeof j->why, "%s: %s: %s", what, mlc_status_name(st), mlc_last_error());
    j->bad = 1;
    return 1;
}

/* The exchange of one thread, on a periodic line of p * N cells (its state). */
static int exchange_create(two_threads_job_t *j)
{
    mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT;
    cfg.ndim = 1;
    cfg.dtype = MLC_INT64;
    cfg.domain = mlc_box_make(1, (int64_t[]){0}, (int64_t[]){(int64_t)mlc_comm_size(j->comm) * N});
    cfg.periodic[0] = 1;
    mlc_exchange_t *ex = NULL;
    mlc_status_t st = mlc_exchange_create(j->comm, &cfg, &ex);
    j->state = ex;
    return st != MLC_SUCCESS;
}

static void exchange_free(two_threads_job_t *j) { mlc_exchange_free(j->state); }

/* The rounds of one thread; 1 and j->why on failure. */
static int exchange_rounds(two_threads_job_t *j, int64_t *cells)
{
    int p = mlc_comm_size(j->comm), r = mlc_comm_rank(j->comm);
    int64_t lo = (int64_t)r * N, total = (int64_t)p * N;
    mlc_box_t parent = mlc_box_make(1, (int64_t[]){lo - 1}, (int64_t[]){N + 2});
    mlc_view_t own = {cells, parent, mlc_box_make(1, (int64_t[]){lo}, (int64_t[]){N})};
    mlc_view_t left = {cells, parent, mlc_box_make(1, (int64_t[]){lo - 1}, (int64_t[]){1})};
    mlc_view_t right = {cells, parent, mlc_box_make(1, (int64_t[]){lo + N}, (int64_t[]){1})};
    mlc_exchange_t *ex = j->state;
    int id;
    mlc_status_t st;
    if ((st = mlc_exchange_provide(ex, &own, &id)) || (st = mlc_exchange_need(ex, &left, &id)) ||
        (st = mlc_exchange_need(ex, &right, &id)) || (st = mlc_exchange_build(ex)))
        return fail(j, "building the exchange", st);
    for (int k = 0; k < ROUNDS && !j->bad; k++) {
        for (int64_t i = 0; i < N; i++) cells[1 + i] = value(lo + i, k, j->which);
        cells[0] = cells[N + 1] = -1;
        if ((st = mlc_exchange_run(ex))) {
            char what[64];
            snprintf(what, sizeof what, "round %d: mlc_exchange_run", k);
            fail(j, what, st);
            break;
        }
        int64_t want_l = value((lo - 1 + total) % total, k, j->which), want_r = value((lo + N) % total, k, j->which);
        if (cells[0] != want_l || cells[N + 1] != want_r) {
            snprintf(j->why, sizeof j->why, "round %d: halo cells %lld and %lld, want %lld and %lld", k,
                     (long long)cells[0], (long long)cells[N + 1], (long long)want_l, (long long)want_r);
            j->bad = 1;
        }
    }
    mlc_exchange_info_t info;
    if (!j->bad && mlc_exchange_info(ex, &info) == MLC_SUCCESS && j->which == 0 && r == 0)
        printf("thread %d: executor %s\n", j->which, info.executor);
    return j->bad;
}

static void *run(void *arg)
{
    two_threads_job_t *j = arg;
    int64_t cells[N + 2];
    exchange_rounds(j, cells);
    return NULL;
}

int main(void)
{
    char passed[96];
    snprintf(passed, sizeof passed, "two threads, two exchanges, %d rounds each: exact", ROUNDS);
    return two_threads_main(run, exchange_create, exchange_free, passed);
}
