/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ranks that disagree on having a deadline still meet on mpi. Without one
 * (timeout 0) a blocking call is MPI's blocking collective; with one it is
 * the nonblocking form, polled. MPI never matches the two (both Open MPI
 * and MPICH hang), so a communicator calls MPI's blocking collectives only
 * when every rank was created without a deadline, and then refuses a
 * deadline set later on one rank (mlc_comm_set_timeout), which those
 * blocking calls could not honour. Here:
 *  - rank 0 without a deadline, the others with 20 s: collectives agree and
 *    give the right results, with rank 0 also calling them with a request
 *    while the others block;
 *  - every rank without one: collectives work; mlc_comm_set_timeout(5) is
 *    refused with MLC_ERR_UNSUPPORTED saying why, 0 is accepted;
 *  - every rank with one: mlc_comm_set_timeout(0) on rank 0 alone is
 *    accepted and collectives still agree.
 */
#include <stdbool.h>
#include <string.h>
#include "harness.h"

/* With `requests`, rank 0 calls the allreduce with a request (and waits for
 * it) while the others call it blocking. */
static int collectives(mlc_comm_t *comm, const char *what, bool requests)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    for (int it = 0; it < 3; it++) {
        double x[1000], y[1000];
        for (int i = 0; i < 1000; i++) x[i] = r + i;
        if (requests && r == 0) {
            mlc_request_t *q = NULL;
            CHECK_OK(mlc_allreduce(x, y, 1000, MLC_FLOAT64, MLC_SUM, comm, &q));
            CHECK_OK(mlc_request_wait(&q));
        } else {
            CHECK_OK(mlc_allreduce(x, y, 1000, MLC_FLOAT64, MLC_SUM, comm, NULL));
        }
        for (int i = 0; i < 1000; i++)
            CHECK(y[i] == p * (p - 1) / 2.0 + (double)p * i, "%s: allreduce element %d is %g", what, i, y[i]);
        int v = r == 1 ? 77 + it : -1;
        CHECK_OK(mlc_broadcast(&v, &v, 1, MLC_INT32, 1 % p, comm, NULL));
        CHECK(v == (p > 1 ? 77 + it : -1), "%s: broadcast gave %d", what, v);
        int all[64] = {0};
        CHECK_OK(mlc_allgather(&r, all, 1, MLC_INT32, comm, NULL));
        for (int k = 0; k < p; k++) CHECK(all[k] == k, "%s: allgather slot %d is %d", what, k, all[k]);
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    return 0;
}

static int with_timeout(mlc_comm_t *comm, double mine, mlc_comm_t **out)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "mpi";
    cfg.timeout_s = mine;
    CHECK_OK(mlc_comm_init(&cfg, out)); /* CHECK names comm's rank */
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || p > 64) return MLC_TEST_SKIP;
    mlc_comm_t *c = NULL;

    CHECK_RUN(with_timeout(comm, r == 0 ? 0 : 20, &c));
    CHECK_RUN(collectives(c, "rank 0 without a deadline, the others with one", true));
    CHECK_OK(mlc_comm_free(c));

    CHECK_RUN(with_timeout(comm, 0, &c));
    CHECK_RUN(collectives(c, "no deadline anywhere", false));
    CHECK_ERR(mlc_comm_set_timeout(c, 5), MLC_ERR_UNSUPPORTED);
    CHECK(strstr(mlc_last_error(), "blocking") != NULL && strstr(mlc_last_error(), "MLC_TIMEOUT") != NULL,
          "the refusal says why: %s", mlc_last_error());
    CHECK(mlc_comm_timeout(c) == 0, "the refused deadline was kept: %g", mlc_comm_timeout(c));
    CHECK_OK(mlc_comm_set_timeout(c, 0));
    CHECK_RUN(collectives(c, "no deadline anywhere, after the refusal", false));
    CHECK_OK(mlc_comm_free(c));

    CHECK_RUN(with_timeout(comm, 20, &c));
    if (r == 0) CHECK_OK(mlc_comm_set_timeout(c, 0));
    CHECK_RUN(collectives(c, "deadlines at creation, rank 0's removed later", true));
    CHECK_OK(mlc_comm_set_timeout(c, 30));
    CHECK_OK(mlc_comm_free(c));
    return 0;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
