/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rank of a job launched without mlcomm-run (or with it) by
 * job_identity_test.sh: mlc_comm_init with the environment's settings, then
 * an allreduce (sum) of JOB_VALUE over the ranks. Prints one line:
 *   rank R/N: OK sum=S (init T s)          the job ran alone (S = N * JOB_VALUE)
 *   rank R/N: CROSS-JOB sum=S expected=E   a rank of another job took part
 *   rank R: FAIL MLC_ERR_X after T s: msg  init or the allreduce failed (R from
 *                                          MLC_RANK or RANK when init failed)
 * Exit status: 0 ok, 3 cross-job, 2 failure.
 * JOB_DELAY=R:S makes rank R (MLC_RANK or RANK) sleep S seconds before init:
 * a rank that is late to the rendezvous. JOB_PRINT_ID=1 first prints
 *   rank R: job id ID                      MLC_JOB_ID as this rank got it
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mlcomm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *rank_env(void)
{
    return getenv("MLC_RANK") ? getenv("MLC_RANK") : getenv("RANK") ? getenv("RANK") : "?";
}

static void delay_if_late(void)
{
    const char *d = getenv("JOB_DELAY"), *me = rank_env();
    char *end;
    long r = d ? strtol(d, &end, 10) : -1;
    if (r < 0 || end == d || *end != ':' || me[0] < '0' || me[0] > '9' || atol(me) != r) return;
    double s = atof(end + 1);
    if (!(s > 0 && s < 60)) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int main(void)
{
    const char *v = getenv("JOB_VALUE");
    long long value = v ? atoll(v) : 1;
    if (getenv("JOB_PRINT_ID")) {
        printf("rank %s: job id %s\n", rank_env(), getenv("MLC_JOB_ID") ? getenv("MLC_JOB_ID") : "(none)");
        fflush(stdout);
    }
    delay_if_late();
    double t0 = now();
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        printf("rank %s: FAIL %s after %.3f s: %s\n", rank_env(), mlc_status_name(st), now() - t0,
               mlc_last_error());
        return 2;
    }
    double t_init = now() - t0;
    int rank = mlc_comm_rank(comm), size = mlc_comm_size(comm);
    long long sum = 0;
    st = mlc_allreduce(&value, &sum, 1, MLC_INT64, MLC_SUM, comm, NULL);
    if (st != MLC_SUCCESS) {
        printf("rank %d/%d: FAIL %s after %.3f s: %s\n", rank, size, mlc_status_name(st), now() - t0,
               mlc_last_error());
        mlc_comm_free(comm);
        return 2;
    }
    mlc_comm_free(comm);
    if (sum != value * size) {
        printf("rank %d/%d: CROSS-JOB sum=%lld expected=%lld\n", rank, size, sum, value * size);
        return 3;
    }
    printf("rank %d/%d: OK sum=%lld (init %.3f s)\n", rank, size, sum, t_init);
    return 0;
}
