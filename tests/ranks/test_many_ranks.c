/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_init_all is linear in ranks: N thread ranks (default 1024) are
 * formed, run one allreduce, a neighbour sendrecv (eager and rendezvous
 * sizes) and one barrier, and are freed, with the
 * process's peak resident memory under a bound (default 1 GiB). The time of
 * each phase is printed (reported, not asserted: the machine may be loaded).
 *
 *   test_many_ranks [N] [max MiB]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include "mlcomm.h"

typedef struct rank_arg {
    mlc_comm_t *comm;
    int failed;
} rank_arg_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static void *run_rank(void *p)
{
    rank_arg_t *a = p;
    mlc_comm_t *comm = a->comm;
    int r = mlc_comm_rank(comm), n = mlc_comm_size(comm);
    int64_t x[2] = {r, 1}, sum[2] = {0, 0};
    mlc_status_t st = mlc_allreduce(x, sum, 2, MLC_INT64, MLC_SUM, comm, NULL);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "rank %d: allreduce: %s: %s\n", r, mlc_status_name(st), mlc_last_error());
        a->failed = 1;
        mlc_comm_abort(comm);
        return NULL;
    }
    if (sum[0] != (int64_t)n * (n - 1) / 2 || sum[1] != n) {
        fprintf(stderr, "rank %d: allreduce gave {%lld, %lld}, want {%lld, %d}\n", r, (long long)sum[0],
                (long long)sum[1], (long long)n * (n - 1) / 2, n);
        a->failed = 1;
        mlc_comm_abort(comm);
        return NULL;
    }
    /* Neighbour exchange through the (small) rings: an eager and a rendezvous size. */
    static const size_t sizes[2] = {400, 20000};
    for (int k = 0; k < 2; k++) {
        size_t len = sizes[k];
        unsigned char *out = malloc(len), *in = malloc(len);
        if (!out || !in) {
            a->failed = 1;
            free(out);
            free(in);
            mlc_comm_abort(comm);
            return NULL;
        }
        for (size_t i = 0; i < len; i++) out[i] = (unsigned char)(r * 31 + (int)i);
        int from = (r + n - 1) % n;
        st = mlc_sendrecv(out, len, (r + 1) % n, 7, in, len, from, 7, MLC_UINT8, comm, NULL, NULL);
        int bad = -1;
        for (size_t i = 0; st == MLC_SUCCESS && i < len && bad < 0; i++)
            if (in[i] != (unsigned char)(from * 31 + (int)i)) bad = (int)i;
        free(out);
        free(in);
        if (st != MLC_SUCCESS || bad >= 0) {
            fprintf(stderr, "rank %d: sendrecv of %zu bytes: %s %s (first bad byte %d)\n", r, len,
                    mlc_status_name(st), st ? mlc_last_error() : "", bad);
            a->failed = 1;
            mlc_comm_abort(comm);
            return NULL;
        }
    }
    st = mlc_barrier(comm, NULL);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "rank %d: barrier: %s: %s\n", r, mlc_status_name(st), mlc_last_error());
        a->failed = 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    double max_mib = argc > 2 ? atof(argv[2]) : 1024.0;
    if (n < 1) return 2;
    mlc_comm_t **comms = calloc((size_t)n, sizeof *comms);
    rank_arg_t *args = calloc((size_t)n, sizeof *args);
    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    if (!comms || !args || !tids) return 2;
    double base = peak_mib();
    double t0 = now();
    mlc_status_t st = mlc_comm_init_all(n, NULL, comms);
    double t_init = now() - t0;
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init_all(%d): %s: %s\n", n, mlc_status_name(st), mlc_last_error());
        return 1;
    }
    double after_init = peak_mib();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    t0 = now();
    int started = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        args[i].comm = comms[i];
        if (pthread_create(&tids[i], &attr, run_rank, &args[i]) != 0) {
            fprintf(stderr, "pthread_create failed for rank %d\n", i);
            failed = 1;
            for (int k = 0; k < n; k++) mlc_comm_abort(comms[k]);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        failed |= args[i].failed;
    }
    double t_run = now() - t0;
    t0 = now();
    for (int i = 0; i < n; i++) mlc_comm_free(comms[i]);
    double t_free = now() - t0;
    double peak = peak_mib();
    printf("%d thread ranks: init_all %.3f s, allreduce + sendrecv + barrier %.3f s, free %.3f s; peak RSS %.0f MiB "
           "(%.0f MiB before init, %.0f MiB after init)\n",
           n, t_init, t_run, t_free, peak, base, after_init);
    if (peak > max_mib) {
        fprintf(stderr, "peak RSS %.0f MiB exceeds %.0f MiB for %d ranks\n", peak, max_mib, n);
        failed = 1;
    }
    pthread_attr_destroy(&attr);
    free(comms);
    free(args);
    free(tids);
    return failed ? 1 : 0;
}
