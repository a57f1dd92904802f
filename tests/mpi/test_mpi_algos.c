/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Forced algorithms (MLC_ALGO_ALLREDUCE=ring, ... set by the test) run our
 * schedules over the backend's point-to-point: on mpi, over MPI on the
 * hidden communicator. Their messages must never match a user receive
 * posted for anything (any source, any tag), and results must be right,
 * with more of them in flight at once than MPI tags can tell apart.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

enum { N = 1031 };

/* A split communicator (ranks reversed) inherits the forced algorithms and
 * has the same tag bound as its parent: forced algorithms really run there. */
static int split_algos(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, p - r, &child));
    CHECK(mlc_comm_tag_max(child) == mlc_comm_tag_max(comm), "split communicator's tag bound %d, parent's %d",
          mlc_comm_tag_max(child), mlc_comm_tag_max(comm));
    const char *name = NULL;
    CHECK_OK(mlc_comm_get_algo(child, MLC_COLL_ALLREDUCE, 4096, &name));
    CHECK(strcmp(name, "ring") == 0, "split communicator's allreduce algorithm %s, want ring", name);
    int cr = mlc_comm_rank(child);
    int64_t x[N], y[N];
    for (size_t i = 0; i < N; i++) x[i] = cr * 5 + (int64_t)i;
    CHECK_OK(mlc_allreduce(x, y, N, MLC_INT64, MLC_SUM, child, NULL));
    for (size_t i = 0; i < N; i++)
        CHECK(y[i] == 5 * p * (p - 1) / 2 + p * (int64_t)i, "split ring allreduce [%zu] = %lld", i, (long long)y[i]);
    CHECK_OK(mlc_comm_free(child));
    return 0;
}

/* More forced-algorithm collectives in flight at once than there are tag
 * windows on mpi (MPI_TAG_UB >> 20: 2047 with Open MPI, 255 with MPICH):
 * each must still pair its messages with its own. (They took each other's
 * data: wrong sums and no error.) Then the same on two communicators whose
 * collectives the ranks start in opposite orders: a start that waited for
 * its tags to come free waited for a peer that was starting the other
 * communicator's first. */
enum { IN_FLIGHT = 2100, SMALL = 64 }; /* past Open MPI's window of 2047 */

static int64_t in_value(size_t k, size_t i, int r) { return (int64_t)k * 1000003 + (int64_t)i * 7 + r; }

/* Start IN_FLIGHT ring allreduces on c (the k-th: x + k * SMALL into y). */
static int post_many(mlc_comm_t *comm, mlc_comm_t *c, const int64_t *x, int64_t *y, mlc_request_t **q)
{
    for (size_t k = 0; k < IN_FLIGHT; k++)
        CHECK_OK(mlc_allreduce(x + k * SMALL, y + k * SMALL, SMALL, MLC_INT64, MLC_SUM, c, &q[k]));
    return 0;
}

static int check_many(mlc_comm_t *comm, const int64_t *y, const char *what)
{
    int p = mlc_comm_size(comm);
    size_t wrong = 0, first = 0;
    for (size_t k = 0; k < IN_FLIGHT; k++)
        for (size_t i = 0; i < SMALL; i++) {
            int64_t want = (in_value(k, i, 0)) * p + (int64_t)p * (p - 1) / 2;
            if (y[k * SMALL + i] != want && wrong++ == 0) first = k;
        }
    CHECK(wrong == 0, "%d ring allreduces in flight at once (%s): %zu elements wrong, the first in #%zu", IN_FLIGHT,
          what, wrong, first);
    return 0;
}

static int many_in_flight(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return 0; /* MPI tags only */
    int r = mlc_comm_rank(comm);
    int64_t *x = malloc(sizeof *x * IN_FLIGHT * SMALL), *y = malloc(sizeof *y * IN_FLIGHT * SMALL * 2);
    mlc_request_t **q = calloc(2 * IN_FLIGHT, sizeof *q);
    CHECK(x && y && q, "malloc");
    for (size_t k = 0; k < IN_FLIGHT; k++)
        for (size_t i = 0; i < SMALL; i++) x[k * SMALL + i] = in_value(k, i, r);
    int failed = post_many(comm, comm, x, y, q);
    for (size_t k = IN_FLIGHT; k-- > 0 && !failed;) CHECK_OK(mlc_request_wait(&q[k]));
    failed = failed || check_many(comm, y, "one communicator");

    /* Rank 0 starts X's then Y's, the others Y's then X's. */
    mlc_comm_t *c[2] = {NULL, NULL};
    for (int k = 0; k < 2 && !failed; k++) CHECK_OK(mlc_comm_split(comm, 0, r, &c[k]));
    for (int n = 0; n < 2 && !failed; n++) {
        int k = r == 0 ? n : 1 - n;
        failed = post_many(comm, c[k], x, y + (size_t)k * IN_FLIGHT * SMALL, q + (size_t)k * IN_FLIGHT);
    }
    for (size_t k = 2 * IN_FLIGHT; k-- > 0 && !failed;) CHECK_OK(mlc_request_wait(&q[k]));
    for (int k = 0; k < 2 && !failed; k++)
        failed = check_many(comm, y + (size_t)k * IN_FLIGHT * SMALL, k ? "Y, started second on rank 0" : "X");
    for (int k = 0; k < 2; k++) mlc_comm_free(c[k]);
    free(x);
    free(y);
    free(q);
    return failed;
}

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    const char *name = NULL;
    CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, 4096, &name));
    CHECK(strcmp(name, "ring") == 0, "allreduce algorithm %s, want ring (MLC_ALGO_ALLREDUCE)", name);
    CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLGATHER, 4096, &name));
    CHECK(strcmp(name, "ring") == 0, "allgather algorithm %s", name);

    /* A receive for anything, posted first: only the user's message may match it. */
    int32_t box[8] = {0};
    mlc_msg_status_t st;
    mlc_request_t *catch_all = NULL;
    CHECK_OK(mlc_recv(box, 8, MLC_INT32, MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &st, &catch_all));

    int32_t x[N * 4], y[N * 4]; /* per rank: threads ranks share statics */
    for (int mode = 0; mode < 2; mode++) {
        mlc_request_t *q = NULL, **qp = mode ? &q : NULL;
        for (size_t i = 0; i < N; i++) x[i] = r * 3 + (int32_t)i;
        CHECK_OK(mlc_allreduce(x, y, N, MLC_INT32, MLC_SUM, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t i = 0; i < N; i++)
            CHECK(y[i] == 3 * p * (p - 1) / 2 + p * (int32_t)i, "ring allreduce [%zu] = %d", i, y[i]);
        CHECK_OK(mlc_allreduce(x, x, N, MLC_INT32, MLC_AVG, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t i = 0; i < N; i++)
            CHECK(x[i] == (3 * p * (p - 1) / 2 + p * (int32_t)i) / p, "ring avg in place [%zu] = %d", i, x[i]);

        for (size_t i = 0; i < N; i++) x[i] = r + 100 * (int32_t)i;
        CHECK_OK(mlc_allgather(x, y, N, MLC_INT32, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t i = 0; i < N * (size_t)p; i++)
            CHECK(y[i] == (int32_t)(i / N) + 100 * (int32_t)(i % N), "ring allgather [%zu] = %d", i, y[i]);

        int root = p - 1;
        for (size_t i = 0; i < N; i++) y[i] = r == root ? 5 * (int32_t)i : -1;
        CHECK_OK(mlc_broadcast(r == root ? y : NULL, y, N, MLC_INT32, root, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t i = 0; i < N; i++) CHECK(y[i] == 5 * (int32_t)i, "binomial bcast [%zu] = %d", i, y[i]);

        for (size_t i = 0; i < N * (size_t)p; i++) x[i] = r + (int32_t)i;
        CHECK_OK(mlc_reduce_scatter(x, y, N, MLC_INT32, MLC_MAX, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t i = 0; i < N; i++)
            CHECK(y[i] == p - 1 + r * N + (int32_t)i, "ring reduce_scatter [%zu] = %d", i, y[i]);

        size_t sc[4], sd[4], rc[4], rd[4];
        for (int k = 0; k < p; k++) {
            sc[k] = rc[k] = 7;
            sd[k] = rd[k] = (size_t)k * 9;
        }
        for (size_t i = 0; i < 9 * (size_t)p; i++) x[i] = r * 1000 + (int32_t)i, y[i] = -1;
        CHECK_OK(mlc_alltoallv(x, sc, sd, y, rc, rd, MLC_INT32, comm, qp));
        CHECK_OK(mlc_request_wait(&q));
        for (int k = 0; k < p; k++)
            for (size_t i = 0; i < 7; i++)
                CHECK(y[k * 9 + i] == k * 1000 + r * 9 + (int32_t)i, "pairwise alltoallv [%d][%zu]", k, i);
    }

    /* None of that traffic matched the catch-all receive. Every rank looks
     * before the barrier and sends its own message only after it. */
    int done = 0;
    CHECK_OK(mlc_request_test(&catch_all, &done));
    CHECK(!done, "an algorithm's message matched a user receive (source %d, tag %d)", st.source, st.tag);
    CHECK_OK(mlc_barrier(comm, NULL));
    int32_t msg[2] = {r, 77};
    CHECK_OK(mlc_send(msg, 2, MLC_INT32, (r + 1) % p, 9, comm, NULL));
    CHECK_OK(mlc_request_wait(&catch_all));
    CHECK(st.source == (r + p - 1) % p && st.tag == 9 && box[0] == (r + p - 1) % p && box[1] == 77,
          "user message: source %d tag %d data %d %d", st.source, st.tag, box[0], box[1]);
    return split_algos(comm) || many_in_flight(comm) || mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
