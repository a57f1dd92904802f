/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small broadcasts on the shared-memory engine (threads, shm) pipeline:
 *  - root ahead: the root completes RUN_AHEAD small broadcasts before any
 *    reader has called the first (it then sends each reader a token the
 *    readers wait for before they start), and every reader still gets
 *    every value in order;
 *  - readers apart: a reader completes a broadcast while another reader has
 *    not called it yet (rank 1 sends rank 2 a token after its broadcast;
 *    rank 2 waits for it before its own), so readers never wait for one
 *    another.
 * Without either, the ranks wait for each other until MLC_TIMEOUT and the
 * test fails. Other backends make no such promise: SKIP there.
 */
#include <string.h>
#include "harness.h"

/* How far the engine's root may run ahead (its announcement ring holds 128 ops). */
#define RUN_AHEAD 120
#define TOKEN_TAG 77

static int root_ahead(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    uint64_t got[RUN_AHEAD], token = 0;
    if (r == 0) {
        for (uint64_t i = 0; i < RUN_AHEAD; i++) {
            uint64_t v = 1000 + i;
            CHECK_OK(mlc_broadcast(&v, &got[i], 1, MLC_UINT64, 0, comm, NULL));
        }
        for (int q = 1; q < p; q++) CHECK_OK(mlc_send(&token, 1, MLC_UINT64, q, TOKEN_TAG, comm, NULL));
        return 0;
    }
    CHECK_OK(mlc_recv(&token, 1, MLC_UINT64, 0, TOKEN_TAG, comm, NULL, NULL));
    for (uint64_t i = 0; i < RUN_AHEAD; i++) {
        got[i] = 0;
        CHECK_OK(mlc_broadcast(NULL, &got[i], 1, MLC_UINT64, 0, comm, NULL));
        CHECK(got[i] == 1000 + i, "root ahead: broadcast %llu delivered %llu", (unsigned long long)i,
              (unsigned long long)got[i]);
    }
    return 0;
}

static int readers_apart(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    if (p < 3) return 0;
    uint32_t v = r == 0 ? 0xfeedu : 0, token = 1;
    if (r == 2) CHECK_OK(mlc_recv(&token, 1, MLC_UINT32, 1, TOKEN_TAG, comm, NULL, NULL));
    CHECK_OK(mlc_broadcast(r == 0 ? &v : NULL, &v, 1, MLC_UINT32, 0, comm, NULL));
    CHECK(v == 0xfeedu, "readers apart: got %#x", v);
    if (r == 1) CHECK_OK(mlc_send(&token, 1, MLC_UINT32, 2, TOKEN_TAG, comm, NULL));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    const char *be = mlc_comm_backend(comm);
    if (strcmp(be, "threads") != 0 && strcmp(be, "shm") != 0) {
        if (mlc_comm_rank(comm) == 0) printf("SKIP: backend %s promises no pipelining\n", be);
        return MLC_TEST_SKIP;
    }
    CHECK_RUN(root_ahead(comm));
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_RUN(readers_apart(comm));
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
