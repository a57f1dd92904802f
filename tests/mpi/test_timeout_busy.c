/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MLC_TIMEOUT counts only progress on the request's own communicator: rank
 * 0 tests an allreduce on a that rank 1 never joins while allreduces on b
 * keep moving (forced ring: on mpi, polling one communicator moves the
 * other's steps too). The one on a must still time out.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

enum { N = 1 << 14, ROUNDS = 400 };

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    if (mlc_comm_size(comm) != 2) return MLC_TEST_SKIP;
    /* threads and shm: a rank's communicators share one engine endpoint,
     * whose progress counts for all of them (a known limit, docs/ENGINE.md). */
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return MLC_TEST_SKIP;
    mlc_comm_t *a = NULL, *b = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &a));
    CHECK_OK(mlc_comm_split(comm, 0, r, &b));
    int32_t *x = calloc(4 * N, sizeof *x);
    CHECK(x != NULL, "out of memory");
    mlc_request_t *stuck = NULL;
    if (r == 0) CHECK_OK(mlc_allreduce(x, x + N, N, MLC_INT32, MLC_SUM, a, &stuck));
    double t0 = mlc_test_now(), t_out = 0;
    mlc_status_t st = MLC_SUCCESS;
    /* Element 0 of each allreduce on b carries rank 0's "stop" flag, so both
     * ranks leave the loop on the same call and nothing but the stuck
     * allreduce can time out (a rank left waiting alone on b would race its
     * own timeout against the final check's). */
    int32_t *send = x + 2 * N, *recv = x + 3 * N;
    for (int k = 0; k < ROUNDS; k++) {
        send[0] = (r == 0 && t_out > 0);
        mlc_request_t *q = NULL;
        CHECK_OK(mlc_allreduce(send, recv, N, MLC_INT32, MLC_SUM, b, &q));
        int done = 0;
        for (int i = 0; r == 0 && t_out == 0 && i < 10 && st == MLC_SUCCESS && !done; i++) {
            st = mlc_request_test(&stuck, &done);
            usleep(2000);
        }
        if (r == 0 && st != MLC_SUCCESS && t_out == 0) t_out = mlc_test_now() - t0;
        CHECK(!done || st != MLC_SUCCESS, "the allreduce rank 1 never joined completed");
        CHECK_OK(mlc_request_wait(&q));
        if (recv[0] != 0) break;
    }
    if (r == 0) {
        CHECK(st == MLC_ERR_TIMEOUT, "the stuck allreduce: %s after %.1f s (%s), expected MLC_ERR_TIMEOUT",
              mlc_status_name(st), mlc_test_now() - t0, mlc_last_error());
        CHECK(t_out > 1.5 && t_out < 15, "timed out after %.1f s with MLC_TIMEOUT=2", t_out);
        CHECK_OK(mlc_request_wait(&stuck)); /* released by the test that reported it */
    }
    free(x);
    mlc_comm_free(a);
    mlc_comm_free(b);
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
