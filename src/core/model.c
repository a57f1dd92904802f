/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The selector's cost model for this host: beta (copy, s/byte) and gamma
 * (reduce, s/byte) measured once per process on 1 MiB buffers; alpha (the
 * per-message latency) keeps the shared-memory default, as it needs two
 * ranks to measure. Rank 0's model is broadcast at init so every rank picks
 * the same algorithm.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "base/clock.h"
#include "dtype.h"
#include "log.h"
#include "model.h"

static mlc_cost_model_t host_model;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

/* Best of a few timed repetitions of fn over n bytes: seconds per byte. */
static double per_byte(void (*fn)(char *, char *, size_t), char *a, char *b, size_t n)
{
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = mlc_now();
        fn(a, b, n);
        double t = mlc_now() - t0;
        if (t > 0 && t < best) best = t;
    }
    return best / (double)n;
}

static void copy_fn(char *a, char *b, size_t n) { memcpy(b, a, n); }
static void sum_fn(char *a, char *b, size_t n) { mlc_reduce_apply(a, b, n / 4, MLC_FLOAT32, MLC_SUM); }

static void measure(void)
{
    host_model = mlc_cost_model_default;
    size_t n = (size_t)1 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) goto out;
    memset(a, 1, n);
    memset(b, 2, n);
    double beta = per_byte(copy_fn, a, b, n), gamma = per_byte(sum_fn, a, b, n);
    /* A wild value (a preempted run) must not skew choices: keep sane bounds. */
    if (beta > 1e-12 && beta < 1e-8) host_model.beta = beta;
    if (gamma > 1e-12 && gamma < 1e-8) host_model.gamma = gamma;
out:
    free(a);
    free(b);
    MLC_DEBUG("cost model: alpha %.3g s, beta %.3g s/B (%.1f GB/s copy), gamma %.3g s/B (%.1f GB/s reduce)",
              host_model.alpha, host_model.beta, 1e-9 / host_model.beta, host_model.gamma,
              1e-9 / host_model.gamma);
}

mlc_status_t mlc_model_agree(mlc_comm_t *comm)
{
    comm->model = mlc_cost_model_default;
    if (!comm->be->algos) return MLC_SUCCESS; /* native collectives: no selector */
    if (comm->rank == 0) {
        pthread_once(&host_once, measure);
        comm->model = host_model;
    }
    if (comm->size == 1) return MLC_SUCCESS;
    return mlc_broadcast(&comm->model, &comm->model, sizeof comm->model, MLC_UINT8, 0, comm, NULL);
}
