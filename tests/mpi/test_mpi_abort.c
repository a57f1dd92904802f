/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_abort on one rank reaches the others: a receive they are waiting
 * for fails with MLC_ERR_ABORTED, and so does every later call. A second
 * communicator, split off beforehand, stays usable for the epilogue. On mpi
 * the notice travels on the hidden communicator and wakes a wait that sits
 * in MPI (MLC_TIMEOUT=0) as well as the polling loop of a deadline (the default).
 * Odd ranks wait in a blocking receive (no request): with MLC_TIMEOUT unset
 * the default timeout applies, so that wait is polled, not MPI's own
 * MPI_Recv, which nothing could end. With MLC_TIMEOUT=0 (no deadline: on
 * mpi, MPI's blocking calls) every rank waits on a request instead.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "harness.h"

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    const char *t = getenv("MLC_TIMEOUT");
    bool no_deadline = t && strcmp(t, "0") == 0;
    mlc_comm_t *side = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &side));
    int32_t x[4] = {0}, y = 0;
    if (r == 0) {
        CHECK_OK(mlc_barrier(side, NULL));
        /* the blocking receivers are inside their receive by now, usually */
        nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL);
        CHECK_OK(mlc_comm_abort(comm));
        CHECK(mlc_comm_status(comm) == MLC_ERR_ABORTED, "aborting rank's status %d", mlc_comm_status(comm));
    } else if (r % 2 == 1 && !no_deadline) {
        CHECK_OK(mlc_barrier(side, NULL));
        CHECK_ERR(mlc_recv(x, 4, MLC_INT32, 0, 1, comm, NULL, NULL), MLC_ERR_ABORTED);
    } else {
        mlc_request_t *q = NULL;
        CHECK_OK(mlc_recv(x, 4, MLC_INT32, 0, 1, comm, NULL, &q));
        CHECK_OK(mlc_barrier(side, NULL));
        CHECK_ERR(mlc_request_wait(&q), MLC_ERR_ABORTED);
        CHECK(q == NULL, "failed request not released");
    }
    /* Sticky: every later call fails at once. */
    CHECK_ERR(mlc_allreduce(x, &y, 1, MLC_INT32, MLC_SUM, comm, NULL), MLC_ERR_ABORTED);
    CHECK_ERR(mlc_send(x, 1, MLC_INT32, 0, 1, comm, NULL), MLC_ERR_ABORTED);
    CHECK(mlc_comm_status(comm) == MLC_ERR_ABORTED, "status %d", mlc_comm_status(comm));
    /* The other communicator is unaffected. */
    int32_t one = 1, n = 0;
    CHECK_OK(mlc_allreduce(&one, &n, 1, MLC_INT32, MLC_SUM, side, NULL));
    CHECK(n == mlc_comm_size(side), "side allreduce %d", n);
    CHECK_OK(mlc_comm_free(side));
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
