/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MLC_TIMEOUT on mpi (the test sets 2 s): a receive nobody answers (a sendrecv's) returns
 * MLC_ERR_TIMEOUT naming the peer, the communicator stays failed, and the
 * other ranks are told: their communicator fails with MLC_ERR_TIMEOUT
 * naming rank 0, without a wait of their own timing out (else a late
 * collective of theirs would meet one the failed rank left in MPI). The
 * unmatched receive is cancelled when the communicator is freed.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || p < 2) return MLC_TEST_SKIP;
    /* The others wait for rank 0 on a communicator of their own, without the
     * 2 s timeout (rank 0 spends 2 s timing out first). */
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.timeout_s = 0;
    mlc_comm_t *side = NULL;
    CHECK_OK(mlc_comm_init(&cfg, &side));
    int32_t x[4] = {0}, y = 0, one_out = 1;
    if (r == 0) {
        /* a sendrecv with rank 1 both ways: its small send goes out, its receive waits */
        CHECK_ERR(mlc_sendrecv(&one_out, 1, 1, 5, x, 4, 1, 5, MLC_INT32, comm, NULL, NULL), MLC_ERR_TIMEOUT);
        CHECK(strstr(mlc_last_error(), "sendrecv") != NULL && strstr(mlc_last_error(), "1, 1") == NULL,
              "timeout message (names the peer once): %s", mlc_last_error());
        CHECK(mlc_comm_status(comm) == MLC_ERR_TIMEOUT, "status %d", mlc_comm_status(comm));
        CHECK_ERR(mlc_allreduce(x, &y, 1, MLC_INT32, MLC_SUM, comm, NULL), MLC_ERR_TIMEOUT);
        /* an asynchronous one on the failed communicator fails at once as well */
        mlc_request_t *q = NULL;
        CHECK_ERR(mlc_recv(x, 4, MLC_INT32, 1, 5, comm, NULL, &q), MLC_ERR_TIMEOUT);
        CHECK(q == NULL, "a request was handed out on a failed communicator");
    }
    /* the side communicator still works for everyone */
    int32_t one = 1, n = 0;
    CHECK_OK(mlc_allreduce(&one, &n, 1, MLC_INT32, MLC_SUM, side, NULL));
    CHECK(n == p, "side allreduce %d", n);
    if (r != 0) {
        /* Rank 0 told us before it joined the side allreduce: a zero-count
         * call (which only looks for posted failures) finds it within a second. */
        mlc_status_t st = MLC_SUCCESS;
        for (int i = 0; i < 1000 && st == MLC_SUCCESS; i++) {
            st = mlc_allreduce(x, &y, 0, MLC_INT32, MLC_SUM, comm, NULL);
            if (st == MLC_SUCCESS) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        }
        CHECK(st == MLC_ERR_TIMEOUT, "rank %d was not told of rank 0's timeout: %s", r, mlc_status_name(st));
        CHECK(strstr(mlc_last_error(), "rank 0") != NULL, "the message names rank 0: %s", mlc_last_error());
        CHECK_ERR(mlc_barrier(comm, NULL), MLC_ERR_TIMEOUT);
    }
    CHECK_OK(mlc_comm_free(side));
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
