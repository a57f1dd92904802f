/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A member that frees a communicator and stays alive (it goes on with the
 * parent) is gone from that communicator: a probe, a receive or a collective
 * that waits for it there fails with MLC_ERR_PEER_LOST naming it, long before
 * MLC_TIMEOUT (30 s, set by ctest; a timeout fails the check). Each case on
 * a fresh child of the test's communicator; the last rank frees it at once.
 * And members that free a child after their last call on it are not
 * reported to the others still finishing that call.
 */
#include <string.h>
#include "harness.h"

typedef enum { PROBE, RECV, ALLREDUCE } wait_kind_t;
static const char *const kind_names[] = {"probe", "recv", "allreduce"};

static int one_case(mlc_comm_t *comm, wait_kind_t kind)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), leaver = p - 1;
    mlc_comm_t *child = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &child));
    if (r == leaver) {
        CHECK_OK(mlc_comm_free(child));
    } else {
        mlc_status_t st = MLC_SUCCESS;
        mlc_msg_status_t ms;
        int x = 0;
        float a = 1, b = 0;
        switch (kind) {
        case PROBE: st = mlc_probe(leaver, 7, child, &ms); break;
        case RECV: st = mlc_recv(&x, 1, MLC_INT32, leaver, 7, child, NULL, NULL); break;
        case ALLREDUCE: st = mlc_allreduce(&a, &b, 1, MLC_FLOAT32, MLC_SUM, child, NULL); break;
        }
        CHECK(st == MLC_ERR_PEER_LOST, "%s from a member that freed the communicator: %s (%s), expected "
              "MLC_ERR_PEER_LOST", kind_names[kind], mlc_status_name(st), mlc_last_error());
        CHECK(strstr(mlc_last_error(), "freed the communicator") != NULL, "%s: the message does not say so: %s",
              kind_names[kind], mlc_last_error());
        CHECK_OK(mlc_comm_free(child));
    }
    /* The parent is untouched. */
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

/* Members that free a child right after their last call on it, while the
 * others still finish theirs (a ring allreduce takes several rounds), are
 * never reported: nothing waits for them any more. */
static int free_after_use(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    enum { N = 16384 };
    float *a = mlc_test_alloc(N * sizeof *a), *b = mlc_test_alloc(N * sizeof *b);
    for (int i = 0; i < N; i++) a[i] = (float)(r + i % 7);
    for (int it = 0; it < 40; it++) {
        mlc_comm_t *child = NULL;
        CHECK_OK(mlc_comm_split(comm, 0, r, &child));
        (void)mlc_comm_set_algo(child, MLC_COLL_ALLREDUCE, it % 2 ? "ring" : NULL); /* not every backend has it */
        CHECK_OK(mlc_allreduce(a, b, N, MLC_FLOAT32, MLC_SUM, child, NULL));
        CHECK_OK(mlc_comm_free(child));
    }
    mlc_test_free(a);
    mlc_test_free(b);
    CHECK_OK(mlc_barrier(comm, NULL));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (mlc_comm_size(comm) < 2) return MLC_TEST_SKIP;
    for (int k = PROBE; k <= ALLREDUCE; k++) {
        int bad = one_case(comm, (wait_kind_t)k);
        if (mlc_test_any_failed(comm, bad)) return 1;
    }
    int bad = free_after_use(comm);
    if (mlc_test_any_failed(comm, bad)) return 1;
    return 0;
}

MLC_TEST_MAIN(body)
