/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests on two communicators, waited in different orders on different
 * ranks, complete: a wait on one communicator also advances the algorithm
 * steps of the other (run with a forced algorithm, whose steps only mlcomm's
 * own calls advance on mpi). So does a blocking collective on one
 * communicator while an operation of the other is still in flight, and a
 * blocking collective of MPI's own while one rank has such an operation in
 * flight and the others do not.
 */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"

enum { N = 1 << 18 }; /* 1 MiB of int32: past every MPI's eager limit */

static int32_t expected(int p, size_t i, int salt)
{
    int32_t s = 0;
    for (int k = 0; k < p; k++) s += k * 7 + salt + (int32_t)(i % 1000);
    return s;
}

static int check_sum(mlc_comm_t *comm, const int32_t *y, int salt, const char *what)
{
    int p = mlc_comm_size(comm);
    for (size_t i = 0; i < N; i += 997)
        CHECK(y[i] == expected(p, i, salt), "%s [%zu] = %d, want %d", what, i, y[i], expected(p, i, salt));
    CHECK(y[N - 1] == expected(p, N - 1, salt), "%s [last] = %d", what, y[N - 1]);
    return 0;
}

static void fill(int32_t *x, int r, int salt)
{
    for (size_t i = 0; i < N; i++) x[i] = r * 7 + salt + (int32_t)(i % 1000);
}

static int body(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    int32_t *x = malloc(sizeof(int32_t) * N * 4), *ya = x + N, *yb = x + 2 * N, *xb = x + 3 * N;
    CHECK(x != NULL, "out of memory");
    mlc_comm_t *a = NULL, *b = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &a));
    CHECK_OK(mlc_comm_split(comm, 0, r, &b));
    int failed = 0;
    for (int round = 0; round < 3 && !failed; round++) {
        /* Both started everywhere; even ranks wait a then b, odd ranks b then a. */
        mlc_request_t *qa = NULL, *qb = NULL;
        fill(x, r, round);
        fill(xb, r, round + 50);
        CHECK_OK(mlc_allreduce(x, ya, N, MLC_INT32, MLC_SUM, a, &qa));
        CHECK_OK(mlc_allreduce(xb, yb, N, MLC_INT32, MLC_SUM, b, &qb));
        if (r % 2 == 0) {
            CHECK_OK(mlc_request_wait(&qa));
            CHECK_OK(mlc_request_wait(&qb));
        } else {
            /* a test loop on b alone must advance a too */
            int done = 0;
            while (!done) CHECK_OK(mlc_request_test(&qb, &done));
            CHECK_OK(mlc_request_wait(&qa));
        }
        failed = check_sum(comm, ya, round, "allreduce on a") || check_sum(comm, yb, round + 50, "allreduce on b");
    }
    if (!failed) {
        /* Rank 0 runs a blocking allreduce on b while its allreduce on a is in
         * flight; the others finish a first, then join b. */
        mlc_request_t *qa = NULL;
        fill(x, r, 9);
        CHECK_OK(mlc_allreduce(x, ya, N, MLC_INT32, MLC_SUM, a, &qa));
        fill(xb, r, 11);
        if (r == 0) {
            CHECK_OK(mlc_allreduce(xb, yb, N, MLC_INT32, MLC_SUM, b, NULL));
            CHECK_OK(mlc_request_wait(&qa));
        } else {
            CHECK_OK(mlc_request_wait(&qa));
            CHECK_OK(mlc_allreduce(xb, yb, N, MLC_INT32, MLC_SUM, b, NULL));
        }
        failed = check_sum(comm, ya, 9, "allreduce on a") || check_sum(comm, yb, 11, "blocking allreduce on b");
    }
    if (!failed) {
        /* Rank 0's allreduce on a is in flight while every rank calls a
         * blocking broadcast of MPI's own on the parent: every rank must call
         * it in the same form (MPI matches blocking only with blocking). */
        mlc_request_t *qa = NULL;
        fill(x, r, 13);
        if (r == 0) CHECK_OK(mlc_allreduce(x, ya, N, MLC_INT32, MLC_SUM, a, &qa));
        for (size_t i = 0; i < N; i++) yb[i] = r == 0 ? (int32_t)i : -1;
        CHECK_OK(mlc_broadcast(yb, yb, N, MLC_INT32, 0, comm, NULL));
        for (size_t i = 0; i < N; i += 4099) CHECK(yb[i] == (int32_t)i, "broadcast [%zu] = %d", i, yb[i]);
        if (r != 0) CHECK_OK(mlc_allreduce(x, ya, N, MLC_INT32, MLC_SUM, a, &qa));
        CHECK_OK(mlc_request_wait(&qa));
        failed = check_sum(comm, ya, 13, "allreduce on a around a broadcast");
    }
    CHECK_OK(mlc_comm_free(a));
    CHECK_OK(mlc_comm_free(b));
    free(x);
    return mlc_test_any_failed(comm, failed);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
