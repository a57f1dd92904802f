/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectives of zero elements return at once, without communicating: as in
 * MPI, nothing moves, so no rank waits for another. Shown by making only
 * rank 0 call them (blocking and request forms, every collective whose
 * count is the same on every rank): with a call that waited for its peers,
 * rank 0 would hang until MLC_TIMEOUT. They take no call number either, so
 * the ranks' next real collective still matches and gives the right data.
 * Invalid arguments are still refused at zero count, and so is a call on a
 * communicator that has failed: after mlc_comm_abort a zero-count call
 * returns the communicator's sticky MLC_ERR_ABORTED like any other, also on
 * the other ranks, which no wait has told of the abort yet.
 */
#include "harness.h"

static int zero_calls(mlc_comm_t *comm, int use_req)
{
    int root = mlc_comm_size(comm) - 1;
    mlc_request_t *reqs[8] = {NULL};
    mlc_request_t **rq[8];
    for (int i = 0; i < 8; i++) rq[i] = use_req ? &reqs[i] : NULL;
    CHECK_OK(mlc_allreduce(NULL, NULL, 0, MLC_FLOAT32, MLC_SUM, comm, rq[0]));
    CHECK_OK(mlc_allgather(NULL, NULL, 0, MLC_INT32, comm, rq[1]));
    CHECK_OK(mlc_reduce_scatter(NULL, NULL, 0, MLC_FLOAT64, MLC_MAX, comm, rq[2]));
    CHECK_OK(mlc_broadcast(NULL, NULL, 0, MLC_UINT8, root, comm, rq[3]));
    CHECK_OK(mlc_reduce(NULL, NULL, 0, MLC_INT64, MLC_SUM, root, comm, rq[4]));
    CHECK_OK(mlc_alltoall(NULL, NULL, 0, MLC_FLOAT16, comm, rq[5]));
    CHECK_OK(mlc_gather(NULL, NULL, 0, MLC_INT8, root, comm, rq[6]));
    CHECK_OK(mlc_scatter(NULL, NULL, 0, MLC_BFLOAT16, root, comm, rq[7]));
    if (use_req) {
        for (int i = 0; i < 8; i++) {
            CHECK(reqs[i] != NULL, "request form %d of a zero-count call gave no request", i);
            int done = 0;
            CHECK_OK(mlc_request_test(&reqs[i], &done));
            CHECK(done && reqs[i] == NULL, "zero-count request %d not complete at its first test", i);
        }
    }
    return 0;
}

/* An aborted communicator fails every zero-count call too, blocking and request
 * forms. The abort is on a one-rank split, so the other ranks are not told. */
static int after_abort(mlc_comm_t *comm)
{
    mlc_comm_t *solo = NULL;
    CHECK_OK(mlc_comm_split(comm, mlc_comm_rank(comm), 0, &solo));
    CHECK_OK(mlc_comm_abort(solo));
    CHECK(mlc_comm_status(solo) == MLC_ERR_ABORTED, "status after abort: %s", mlc_status_name(mlc_comm_status(solo)));
    CHECK_ERR(mlc_allreduce(NULL, NULL, 0, MLC_FLOAT32, MLC_SUM, solo, NULL), MLC_ERR_ABORTED);
    CHECK(strstr(mlc_last_error(), "abort"), "zero-count allreduce after abort: unexpected message: %s",
          mlc_last_error());
    mlc_request_t *req = NULL;
    CHECK_ERR(mlc_broadcast(NULL, NULL, 0, MLC_INT32, 0, solo, &req), MLC_ERR_ABORTED);
    CHECK(req == NULL, "a refused zero-count broadcast handed out a request");
    mlc_comm_free(solo);
    return 0;
}

/* A peer's abort that no wait here has seen yet: a zero-count call checks the
 * communicator's health as a wait would, and fails with MLC_ERR_ABORTED. On
 * mpi the abort travels as a message, with no order against another
 * communicator's barrier, so only the engine backends are asked. */
static int after_peer_abort(mlc_comm_t *comm)
{
    if (mlc_comm_size(comm) < 2 || strcmp(mlc_comm_backend(comm), "mpi") == 0) return 0;
    mlc_comm_t *dup = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &dup));
    if (mlc_comm_rank(comm) == 0) CHECK_OK(mlc_comm_abort(dup));
    /* Rank 0 aborted dup before it entered this barrier. */
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_ERR(mlc_allreduce(NULL, NULL, 0, MLC_FLOAT32, MLC_SUM, dup, NULL), MLC_ERR_ABORTED);
    CHECK(mlc_comm_status(dup) == MLC_ERR_ABORTED, "status after rank 0's abort: %s",
          mlc_status_name(mlc_comm_status(dup)));
    mlc_comm_free(dup);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (r == 0) {
        CHECK_RUN(zero_calls(comm, 0));
        CHECK_RUN(zero_calls(comm, 1));
        /* Still validated: a bad dtype or root fails at zero count too. */
        CHECK(mlc_allreduce(NULL, NULL, 0, (mlc_dtype_t)999, MLC_SUM, comm, NULL) == MLC_ERR_INVALID_ARG,
              "zero-count allreduce with dtype 999 was accepted");
        CHECK(mlc_broadcast(NULL, NULL, 0, MLC_INT32, p, comm, NULL) == MLC_ERR_INVALID_ARG,
              "zero-count broadcast with root %d of %d ranks was accepted", p, p);
    }
    /* Every rank's next collective is the same call: it matches and is right. */
    int32_t mine = r + 1, sum = 0;
    CHECK_OK(mlc_allreduce(&mine, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p * (p + 1) / 2, "allreduce after zero-count calls: %d, want %d", sum, p * (p + 1) / 2);
    /* Every rank calling them is fine too. */
    CHECK_RUN(zero_calls(comm, 0));
    CHECK_OK(mlc_allreduce(&mine, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p * (p + 1) / 2, "second allreduce: %d, want %d", sum, p * (p + 1) / 2);
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "communicator failed: %s", mlc_status_name(mlc_comm_status(comm)));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    CHECK_RUN(after_abort(comm));
    CHECK_RUN(after_peer_abort(comm));
    return 0;
}

MLC_TEST_MAIN(body)
