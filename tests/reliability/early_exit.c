/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank that finished and exited normally is not a lost peer. After a
 * final allreduce rank 0 leaves at once (with shm: its process exits 0);
 * the other ranks wait until it is surely gone and then keep talking among
 * themselves on the same communicator (p2p ring of ranks 1..p-1) and on a
 * subgroup without rank 0. Neither may fail with MLC_ERR_PEER_LOST.
 */
#include "harness.h"

#define MIB (1024u * 1024u)

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 2) return MLC_TEST_SKIP;
    mlc_comm_t *rest = NULL;
    CHECK_OK(mlc_comm_split(comm, r == 0 ? MLC_UNDEFINED : 1, 0, &rest));
    float *buf = mlc_test_alloc(MIB);
    for (size_t i = 0; i < MIB / 4; i++) buf[i] = (float)(i % 3);
    CHECK_OK(mlc_allreduce(buf, buf, MIB / 4, MLC_FLOAT32, MLC_SUM, comm, NULL));
    for (size_t i = 0; i < MIB / 4; i++)
        CHECK(buf[i] == (float)(p * (int)(i % 3)), "element %zu is %g", i, buf[i]);
    mlc_test_free(buf);
    if (r == 0) return 0; /* done: leave while the others still work */

    mlc_test_sleep_ms(300);
    int n = p - 1, me = r - 1; /* ring over ranks 1..p-1 */
    int next = 1 + (me + 1) % n, prev = 1 + (me + n - 1) % n;
    int32_t out = 100 + r, in = -1;
    CHECK_OK(mlc_sendrecv(&out, 1, next, 5, &in, 1, prev, 5, MLC_INT32, comm, NULL, NULL));
    CHECK(in == 100 + prev, "ring message %d, expected %d", in, 100 + prev);
    int32_t one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, rest, NULL));
    CHECK(sum == p - 1, "allreduce over ranks 1..%d gave %d", p - 1, sum);
    CHECK_OK(mlc_comm_free(rest));
    return 0;
}

MLC_TEST_MAIN(body)
