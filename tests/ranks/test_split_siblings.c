/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A failure stays on its communicator: one mlc_comm_split makes sibling
 * communicators with no member in common (colour r % 2), and a failure on
 * one sibling (an abort; calls that do not match) must not fail the
 * other. The healthy sibling then still computes right, its status stays
 * MLC_SUCCESS, and a later failure of its own still reaches all its
 * members, with its own cause. Needs an even rank count of at least 4 (two
 * ranks per sibling). The world communicator orders the steps: it is not a
 * member of either failure.
 */
#include "harness.h"

typedef enum { BY_ABORT, BY_MISMATCH } cause_t;

/* On the failing sibling: its first rank has failed it (an abort, before
 * the world's barrier) or fails it now, and every member sees it. */
static int fail_sibling(mlc_comm_t *comm, mlc_comm_t *sib, cause_t cause)
{
    int sr = mlc_comm_rank(sib);
    if (cause == BY_ABORT) {
        /* The abort was posted before the barrier: the status says so before
         * any call here (shm, threads; on mpi a call finds it). */
        if (sr != 0 && strcmp(mlc_comm_backend(sib), "mpi") != 0)
            CHECK(mlc_comm_status(sib) == MLC_ERR_ABORTED, "a member's status after the abort: %s",
                  mlc_status_name(mlc_comm_status(sib)));
        CHECK_ERR(mlc_barrier(sib, NULL), MLC_ERR_ABORTED);
    } else {
        int a[2] = {1, 1}, b[2];
        mlc_status_t st = mlc_allreduce(a, b, sr == 0 ? 1 : 2, MLC_INT32, MLC_SUM, sib, NULL);
        if (st == MLC_SUCCESS) st = mlc_barrier(sib, NULL); /* a rank whose part had completed */
        CHECK(st == MLC_ERR_MISMATCH, "the mismatched sibling returned %s: %s", mlc_status_name(st), mlc_last_error());
    }
    return 0;
}

/* On the healthy sibling: right sums, healthy status. */
static int use_sibling(mlc_comm_t *comm, mlc_comm_t *sib, const char *after)
{
    int n = mlc_comm_size(sib);
    for (int i = 0; i < 20; i++) {
        int a = i, b = -1;
        mlc_status_t st = mlc_allreduce(&a, &b, 1, MLC_INT32, MLC_SUM, sib, NULL);
        CHECK(st == MLC_SUCCESS, "after %s on the other sibling, call %d here returned %s: %s", after, i,
              mlc_status_name(st), mlc_last_error());
        CHECK(b == i * n, "after %s on the other sibling, call %d summed %d, not %d", after, i, b, i * n);
    }
    CHECK(mlc_comm_status(sib) == MLC_SUCCESS, "after %s on the other sibling, status %s: %s", after,
          mlc_status_name(mlc_comm_status(sib)), mlc_last_error());
    return 0;
}

static int round_of(mlc_comm_t *comm, cause_t cause, const char *name)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *sib = NULL;
    CHECK_OK(mlc_comm_split(comm, r % 2, r, &sib));
    bool failing = r % 2 == 1;
    if (failing && cause == BY_ABORT && mlc_comm_rank(sib) == 0) CHECK_OK(mlc_comm_abort(sib));
    CHECK_OK(mlc_barrier(comm, NULL));
    if (failing && fail_sibling(comm, sib, cause)) return 1;
    CHECK_OK(mlc_barrier(comm, NULL)); /* the failure has been published */
    if (!failing && use_sibling(comm, sib, name)) return 1;
    CHECK_OK(mlc_barrier(comm, NULL));
    /* Now the healthy sibling fails too, by an abort: its members learn of it
     * (not the other sibling's cause). */
    if (!failing) {
        int sr = mlc_comm_rank(sib);
        if (sr == 0) CHECK_OK(mlc_comm_abort(sib));
        CHECK_ERR(mlc_barrier(sib, NULL), MLC_ERR_ABORTED);
        /* It names the call (not, with MLC_CHECK=1 on mpi, the collective
         * that compares its arguments), also where an earlier call found
         * the failure. */
        CHECK(strstr(mlc_last_error(), "rank 0") && strstr(mlc_last_error(), "mlc_comm_abort") &&
                  (sr == 0 || strstr(mlc_last_error(), "barrier")),
              "the abort's message: %s", mlc_last_error());
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    mlc_comm_free(sib);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    if (p < 4 || p % 2) return MLC_TEST_SKIP;
    if (round_of(comm, BY_ABORT, "an abort")) return 1;
    if (round_of(comm, BY_MISMATCH, "a mismatch")) return 1;
    return 0;
}

MLC_TEST_MAIN(body)
