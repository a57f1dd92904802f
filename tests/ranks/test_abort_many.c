/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Abort has no per-job limit: 100 communicators split from the world, each
 * aborted by one rank (a different one each time), and every other rank's
 * next call on it fails with MLC_ERR_ABORTED naming who aborted, promptly.
 * Prints the slowest time from the abort to a peer's failure.
 */
#include <time.h>
#include "harness.h"

#define ROUNDS 100

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2) return MLC_TEST_SKIP;
    double worst = 0;
    for (int i = 0; i < ROUNDS; i++) {
        mlc_comm_t *child = NULL;
        CHECK_OK(mlc_comm_split(comm, 0, r, &child));
        int aborter = i % p;
        double t0 = 0;
        /* Everyone is in the child before the abort: the abort's time is the peers' start. */
        CHECK_OK(mlc_barrier(comm, NULL));
        if (r == aborter) {
            CHECK_OK(mlc_comm_abort(child));
            CHECK_ERR(mlc_barrier(child, NULL), MLC_ERR_ABORTED);
        } else {
            t0 = now_s();
            CHECK_ERR(mlc_barrier(child, NULL), MLC_ERR_ABORTED);
            double dt = now_s() - t0;
            if (dt > worst) worst = dt;
            char want[32];
            snprintf(want, sizeof want, "rank %d", aborter);
            CHECK(strstr(mlc_last_error(), want) != NULL, "round %d: the message does not name %s: %s", i, want,
                  mlc_last_error());
        }
        mlc_comm_free(child);
    }
    CHECK(worst < 2.0, "a peer learnt of an abort only after %.3f s", worst);
    double all = 0;
    CHECK_OK(mlc_allreduce(&worst, &all, 1, MLC_FLOAT64, MLC_MAX, comm, NULL));
    if (r == 0) printf("abort: %d aborts, slowest peer failed %.1f ms after entering its call\n", ROUNDS, all * 1e3);
    return 0;
}

MLC_TEST_MAIN(body)
