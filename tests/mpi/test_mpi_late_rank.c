/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank that comes late to a collective its peers have already timed out
 * on (MLC_TIMEOUT, the test sets 2 s): its call fails at once with
 * MLC_ERR_TIMEOUT and starts nothing in MPI. The peers' collective is still
 * in flight in MPI (MPI cannot cancel collectives), so a collective the
 * late rank started would be matched with it and write into the late
 * rank's buffers after its call had returned the error (and after the
 * caller's stack frame was gone). Its receive buffer must keep its
 * contents while every rank drives MPI for a while afterwards.
 */
#include <stdint.h>
#include <string.h>
#include "harness.h"

/* The peers' buffers stay with MPI after their call timed out: not on the stack. */
static int32_t peer_x = 1, peer_y = -1;

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || p < 2) return MLC_TEST_SKIP;
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.timeout_s = 0;
    mlc_comm_t *side = NULL;
    CHECK_OK(mlc_comm_init(&cfg, &side));
    int late = p - 1;
    if (r != late) {
        CHECK_ERR(mlc_allreduce(&peer_x, &peer_y, 1, MLC_INT32, MLC_SUM, comm, NULL), MLC_ERR_TIMEOUT);
        CHECK_OK(mlc_barrier(side, NULL)); /* the late rank may come now */
    } else {
        CHECK_OK(mlc_barrier(side, NULL));
        int32_t x = 1, y = -777;
        CHECK_ERR(mlc_allreduce(&x, &y, 1, MLC_INT32, MLC_SUM, comm, NULL), MLC_ERR_TIMEOUT);
        /* Everyone drives MPI: a collective started above would complete now. */
        for (int i = 0; i < 50; i++) CHECK_OK(mlc_barrier(side, NULL));
        CHECK(y == -777, "the late rank's receive buffer was written after its call failed: %d", (int)y);
    }
    if (r != late)
        for (int i = 0; i < 50; i++) CHECK_OK(mlc_barrier(side, NULL));
    CHECK_OK(mlc_comm_free(side));
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
