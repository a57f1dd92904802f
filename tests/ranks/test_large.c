/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Above 64 MiB: one float32 allreduce of 64 MiB + 48 KiB per rank and one
 * uint8 allgather whose result is above 64 MiB, both checked element by
 * element and bitwise identical on every rank.
 */
#include "harness.h"

#define MIB (1024u * 1024u)

static int big_allreduce(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t count = 64u * MIB / 4 + 12345;
    float *send = mlc_test_alloc(count * 4), *recv = mlc_test_alloc(count * 4);
    for (size_t i = 0; i < count; i++) send[i] = (float)((i + (size_t)r) % 8);
    CHECK_OK(mlc_allreduce(send, recv, count, MLC_FLOAT32, MLC_SUM, comm, NULL));
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int q = 0; q < p; q++) want += (float)((i + (size_t)q) % 8);
        CHECK(recv[i] == want, "allreduce element %zu is %g, expected %g", i, recv[i], want);
    }
    CHECK(mlc_test_guard_ok(recv, count * 4), "write past the end of recvbuf");
    CHECK(mlc_test_same_on_all_ranks(comm, recv, count * 4, "large allreduce") == 0,
          "ranks disagree on the large allreduce");
    mlc_test_free(send);
    mlc_test_free(recv);
    return 0;
}

static int big_allgather(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t count = 64u * MIB / (size_t)p + 1001, total = count * (size_t)p;
    unsigned char *send = mlc_test_alloc(count), *recv = mlc_test_alloc(total);
    mlc_test_pattern_fill(send, count, 7000 + (uint64_t)r);
    CHECK_OK(mlc_allgather(send, recv, count, MLC_UINT8, comm, NULL));
    for (int q = 0; q < p; q++) {
        size_t bad = mlc_test_pattern_check(recv + (size_t)q * count, count, 7000 + (uint64_t)q);
        CHECK(bad == SIZE_MAX, "allgather block %d differs at byte %zu", q, bad);
    }
    CHECK(mlc_test_guard_ok(recv, total), "write past the end of recvbuf");
    CHECK(mlc_test_same_on_all_ranks(comm, recv, total, "large allgather") == 0,
          "ranks disagree on the large allgather");
    mlc_test_free(send);
    mlc_test_free(recv);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    CHECK_RUN(big_allreduce(comm));
    CHECK_RUN(big_allgather(comm));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
