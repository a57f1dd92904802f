/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * barrier: no rank leaves before the last one has entered. Each rank in turn
 * arrives late; every rank notes (CLOCK_MONOTONIC, shared by all processes of
 * a host) when it entered and left, and the notes are compared: the earliest
 * exit must not precede the latest entry. Also many barriers back to back,
 * and an asynchronous barrier completed through mlc_request_test.
 */
#include "harness.h"

static int late_rank_round(mlc_comm_t *comm, int late, int async)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    double *enter = calloc((size_t)p, sizeof *enter), *leave = calloc((size_t)p, sizeof *leave);
    CHECK(enter && leave, "out of memory");
    if (r == late) mlc_test_sleep_ms(30);
    double t_in = mlc_test_now();
    if (async) {
        mlc_request_t *req = NULL;
        int done = 0;
        CHECK_OK(mlc_barrier(comm, &req));
        CHECK(req != NULL, "async barrier gave no request");
        while (!done) CHECK_OK(mlc_request_test(&req, &done));
        CHECK(req == NULL, "completed request not cleared");
    } else {
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    double t_out = mlc_test_now();
    CHECK_OK(mlc_allgather(&t_in, enter, 1, MLC_FLOAT64, comm, NULL));
    CHECK_OK(mlc_allgather(&t_out, leave, 1, MLC_FLOAT64, comm, NULL));
    double last_in = enter[0], first_out = leave[0];
    int who_in = 0, who_out = 0;
    for (int q = 1; q < p; q++) {
        if (enter[q] > last_in) last_in = enter[q], who_in = q;
        if (leave[q] < first_out) first_out = leave[q], who_out = q;
    }
    CHECK(first_out >= last_in,
          "rank %d left the %s barrier %.6f s before rank %d entered it (late rank %d)", who_out,
          async ? "async" : "blocking", last_in - first_out, who_in, late);
    free(enter);
    free(leave);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    for (int late = 0; late < p; late++) {
        CHECK_RUN(late_rank_round(comm, late, 0));
        CHECK_RUN(late_rank_round(comm, late, 1));
    }
    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_BARRIER, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_BARRIER, algos[a]));
        CHECK_RUN(late_rank_round(comm, (int)a % p, 0));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_BARRIER, NULL));
    for (int i = 0; i < 300; i++) CHECK_OK(mlc_barrier(comm, NULL));
    /* Several barriers in flight at once complete in order. */
    mlc_request_t *reqs[8];
    mlc_status_t sts[8];
    for (int i = 0; i < 8; i++) CHECK_OK(mlc_barrier(comm, &reqs[i]));
    CHECK_OK(mlc_request_wait_all(8, reqs, sts));
    for (int i = 0; i < 8; i++) {
        CHECK(reqs[i] == NULL, "request %d not cleared by wait_all", i);
        CHECK(sts[i] == MLC_SUCCESS, "barrier %d: %s", i, mlc_status_name(sts[i]));
    }
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
