/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests outlive their communicator: a request still pending when its
 * communicator is freed (or aborted, then freed) stays a valid handle; waiting
 * or testing it returns MLC_ERR_ABORTED with a message and releases it, and
 * until then a call on the freed communicator fails with MLC_ERR_INVALID_ARG.
 * The communicators here are children of the test's communicator (split), so
 * the body can free them itself. Also sends queued behind a full ring when their
 * communicator is freed: cancelled before any of them was written, they are
 * released once, and the endpoint's later operations and its release do not
 * find them twice (a double free aborts the process).
 */
#include <string.h>
#include "harness.h"

static int is_mpi(mlc_comm_t *comm) { return strcmp(mlc_comm_backend(comm), "mpi") == 0; }

/* Post what will never complete: a receive nobody sends, and (except on mpi,
 * which cannot cancel collectives) a barrier that rank 0 never joins. */
static int post_pending(mlc_comm_t *comm, mlc_comm_t *child, int *buf, mlc_request_t **recv,
                        mlc_request_t **coll)
{
    int p = mlc_comm_size(child), r = mlc_comm_rank(child);
    *recv = *coll = NULL;
    CHECK_OK(mlc_recv(buf, 1, MLC_INT32, (r + 1) % p, 4242, child, NULL, recv));
    if (p > 1 && r != 0 && !is_mpi(comm)) CHECK_OK(mlc_barrier(child, coll));
    int done = 1;
    CHECK_OK(mlc_request_test(recv, &done));
    CHECK(done == 0, "a receive nobody sends completed");
    return 0;
}

static int check_aborted_wait(mlc_comm_t *comm, mlc_request_t **req, const char *what)
{
    CHECK(*req != NULL, "%s: no request", what);
    CHECK_ERR(mlc_request_wait(req), MLC_ERR_ABORTED);
    CHECK(*req == NULL, "%s: wait did not clear the handle", what);
    return 0;
}

static int check_aborted_test(mlc_comm_t *comm, mlc_request_t **req, const char *what)
{
    CHECK(*req != NULL, "%s: no request", what);
    int done = 0;
    CHECK_ERR(mlc_request_test(req, &done), MLC_ERR_ABORTED);
    CHECK(done == 1, "%s: test after the communicator went did not report done", what);
    CHECK(*req == NULL, "%s: test did not clear the handle", what);
    return 0;
}

/* Free with requests pending, then wait one and test the other. */
static int freed_then_waited(mlc_comm_t *comm)
{
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &child));
    int buf = 0;
    mlc_request_t *recv, *coll;
    CHECK_RUN(post_pending(comm, child, &buf, &recv, &coll));
    int anybuf = 0;
    mlc_request_t *any = NULL;
    CHECK_OK(mlc_recv(&anybuf, 1, MLC_INT32, MLC_ANY_SOURCE, MLC_ANY_TAG, child, NULL, &any));
    /* Every rank has posted (and tested) before any frees: a receive from a
     * member that freed the communicator fails with MLC_ERR_PEER_LOST. */
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_comm_free(child));
    /* Memory churn: a freed communicator reused by the allocator would show here. */
    for (int i = 0; i < 64; i++) free(calloc(1, 4096 + (size_t)i * 64));
    /* The requests still hold the freed communicator: calls on it fail, and
     * reach no backend (which is gone). */
    int one = 1, sum = 0;
    mlc_comm_t *grandchild = NULL;
    CHECK_ERR(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, child, NULL), MLC_ERR_INVALID_ARG);
    CHECK(strstr(mlc_last_error(), "freed this communicator") != NULL, "a call on a freed communicator: %s",
          mlc_last_error());
    CHECK_ERR(mlc_send(&one, 1, MLC_INT32, 0, 1, child, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_split(child, 0, 0, &grandchild), MLC_ERR_INVALID_ARG);
    /* A second free is refused: it would tear the backend down twice. */
    CHECK_ERR(mlc_comm_free(child), MLC_ERR_INVALID_ARG);
    CHECK(strstr(mlc_last_error(), "mlc_comm_free") != NULL && strstr(mlc_last_error(), "already freed") != NULL,
          "a second free: %s", mlc_last_error());
    CHECK_RUN(check_aborted_wait(comm, &recv, "receive pending at free (wait)"));
    CHECK(strstr(mlc_last_error(), "free") != NULL, "message does not say the communicator was freed: %s",
          mlc_last_error());
    if (coll) CHECK_RUN(check_aborted_test(comm, &coll, "barrier pending at free (test)"));
    CHECK_RUN(check_aborted_wait(comm, &any, "receive from any source pending at free"));
    CHECK(strstr(mlc_last_error(), "recv (any source, any tag, 4 bytes)") != NULL, "how it is named: %s",
          mlc_last_error());
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

/* Abort: pending requests fail with ABORTED; one waited before free, one after. */
static int aborted_then_freed(mlc_comm_t *comm)
{
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &child));
    int buf = 0, buf2 = 0;
    mlc_request_t *recv, *coll, *recv2 = NULL;
    CHECK_RUN(post_pending(comm, child, &buf, &recv, &coll));
    int p = mlc_comm_size(child), r = mlc_comm_rank(child);
    CHECK_OK(mlc_recv(&buf2, 1, MLC_INT32, (r + p - 1) % p, 4343, child, NULL, &recv2));
    CHECK_OK(mlc_barrier(comm, NULL)); /* every rank has posted before any aborts */
    CHECK_OK(mlc_comm_abort(child));
    CHECK_RUN(check_aborted_wait(comm, &recv, "receive pending at abort"));
    CHECK_OK(mlc_comm_free(child));
    CHECK_RUN(check_aborted_test(comm, &recv2, "receive pending at abort, tested after free"));
    if (coll) CHECK_RUN(check_aborted_wait(comm, &coll, "barrier pending at abort, waited after free"));
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

/* Many requests left pending over several pool chunks; released in reverse. */
static int many_freed(mlc_comm_t *comm)
{
    enum { K = 70 };
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &child));
    int p = mlc_comm_size(child), r = mlc_comm_rank(child);
    int bufs[K];
    mlc_request_t *reqs[K];
    for (int k = 0; k < K; k++) CHECK_OK(mlc_recv(&bufs[k], 1, MLC_INT32, (r + 1) % p, 5000 + k, child, NULL, &reqs[k]));
    CHECK_OK(mlc_comm_free(child));
    for (int k = K - 1; k >= 0; k--) CHECK_RUN(check_aborted_wait(comm, &reqs[k], "one of many receives"));
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

/* Each rank sends K eager messages (16 KiB, 4 MiB in all) nobody receives:
 * the ring to the next rank fills and the later sends wait in its queue, some
 * not written at all, when the communicator is freed. Every send then completes (it was
 * pushed before the free) or fails with MLC_ERR_ABORTED; traffic afterwards
 * reuses the released operations. Not on mpi (cancelling a send there is
 * MPI's business). */
static int sends_queued_freed(mlc_comm_t *comm)
{
    enum { K = 256, BYTES = 16384 };
    if (is_mpi(comm)) return 0;
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, mlc_comm_rank(comm), &child));
    int p = mlc_comm_size(child), r = mlc_comm_rank(child);
    char *data = mlc_test_alloc((size_t)K * BYTES);
    CHECK(data, "out of memory");
    memset(data, r, (size_t)K * BYTES);
    mlc_request_t *reqs[K];
    CHECK_OK(mlc_barrier(comm, NULL));
    for (int k = 0; k < K; k++)
        CHECK_OK(mlc_send(data + (size_t)k * BYTES, BYTES, MLC_UINT8, (r + 1) % p, 6000 + k, child, &reqs[k]));
    CHECK_OK(mlc_comm_free(child));
    for (int k = 0; k < K; k++) {
        mlc_status_t st = mlc_request_wait(&reqs[k]);
        CHECK(st == MLC_SUCCESS || st == MLC_ERR_ABORTED, "send %d of %d queued when its communicator was freed: %s",
              k, K, mlc_status_name(st));
    }
    /* Operations reused from the pool: a ring of messages on the parent. */
    for (int i = 0; i < 8; i++) {
        mlc_request_t *s = NULL;
        int out = r * 100 + i, in = -1;
        CHECK_OK(mlc_send(&out, 1, MLC_INT32, (mlc_comm_rank(comm) + 1) % mlc_comm_size(comm), 7000 + i, comm, &s));
        CHECK_OK(mlc_recv(&in, 1, MLC_INT32, (mlc_comm_rank(comm) + mlc_comm_size(comm) - 1) % mlc_comm_size(comm),
                          7000 + i, comm, NULL, NULL));
        CHECK_OK(mlc_request_wait(&s));
    }
    mlc_test_free(data);
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    CHECK_RUN(freed_then_waited(comm));
    CHECK_RUN(aborted_then_freed(comm));
    CHECK_RUN(many_freed(comm));
    CHECK_RUN(sends_queued_freed(comm));
    return 0;
}

MLC_TEST_MAIN(body)
