/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Large allgathers: between processes on shm, with MLC_STAGES=on (as ctest
 * runs this) or where single copy is missing or slow, every allgather too
 * large for the slots goes through the ranks' stages, each rank staging its
 * own block while it copies the others' out (docs/ENGINE.md). Every rank
 * checks every byte:
 *  - block sizes that end mid-chunk, exactly on a chunk, and one just past
 *    the slots (a single short chunk);
 *  - in place and out of place;
 *  - a small allreduce, a barrier and a staged broadcast between them (the
 *    next staged allgather follows an op that took another path; the
 *    broadcast shares the stages);
 *  - one rank enters late (the others wait for it before they stage
 *    anything: a rank stages once every rank has published the call);
 *  - a second communicator (ranks reversed) between calls of the first.
 * With MLC_CMA=0 (the ctest variant "nocma") shm has no single copy: the
 * engine's own allgather must still take these sizes, so the selector must
 * name "direct" for them there.
 */
#include "harness.h"

#define KIB ((size_t)1 << 10)
static const size_t blocks[] = {256 * KIB, 1024 * KIB + 17, 320 * KIB, 8 * KIB + 1, 3 * 1024 * KIB - 5};
#define NBLOCKS (sizeof blocks / sizeof *blocks)
#define MOST_BLOCK (3 * 1024 * KIB) /* every block's room */
#define TAIL 0x5a                   /* what the receive buffer holds past the result */

static uint64_t seed_of(uint64_t seed, int r)
{
    return seed * 1000 + (uint64_t)r;
}

static int one(mlc_comm_t *comm, unsigned char *recv, unsigned char *send, size_t block, int inplace, uint64_t seed,
               const char *what)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t room = MOST_BLOCK * (size_t)p;
    memset(recv, 0xa5, block * (size_t)p);
    memset(recv + block * (size_t)p, TAIL, room - block * (size_t)p);
    unsigned char *mine = inplace ? recv + (size_t)r * block : send;
    mlc_test_pattern_fill(mine, block, seed_of(seed, r));
    CHECK_OK(mlc_allgather(mine, recv, block, MLC_UINT8, comm, NULL));
    for (int q = 0; q < p; q++) {
        size_t bad = mlc_test_pattern_check(recv + (size_t)q * block, block, seed_of(seed, q));
        CHECK(bad == SIZE_MAX, "%s: allgather of %zu bytes per rank (%s): rank %d's block wrong at byte %zu", what,
              block, inplace ? "in place" : "out of place", q, bad);
    }
    for (size_t i = block * (size_t)p; i < room; i++)
        CHECK(recv[i] == TAIL, "%s: allgather of %zu bytes per rank wrote byte %zu past its end", what, block,
              i - block * (size_t)p);
    if (!inplace) {
        size_t bad = mlc_test_pattern_check(send, block, seed_of(seed, r));
        CHECK(bad == SIZE_MAX, "%s: allgather of %zu bytes per rank changed the send buffer at byte %zu", what, block,
              bad);
    }
    CHECK(mlc_test_guard_ok(recv, room) && mlc_test_guard_ok(send, MOST_BLOCK), "%s: write past a buffer", what);
    return 0;
}

/* Without single copy (MLC_CMA=0) on shm between processes, the staged sizes
 * must still be the engine's own allgather. */
static int path_named(mlc_comm_t *comm)
{
    const char *cma = getenv("MLC_CMA");
    if (mlc_comm_size(comm) < 2 || strcmp(mlc_comm_backend(comm), "shm") != 0 || !cma || strcmp(cma, "0") != 0)
        return 0;
    const char *name = NULL;
    CHECK_OK(mlc_comm_get_algo(comm, MLC_COLL_ALLGATHER, 256 * KIB, &name));
    CHECK(name && strcmp(name, "direct") == 0, "allgather of 256 KiB per rank on shm without single copy: the "
          "selector names '%s', not the engine's staged 'direct'", name ? name : "(null)");
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    unsigned char *recv = mlc_test_alloc(MOST_BLOCK * (size_t)p), *send = mlc_test_alloc(MOST_BLOCK);
    uint64_t seed = 7;
    mlc_comm_t *rev = NULL;
    CHECK_RUN(path_named(comm));
    CHECK_OK(mlc_comm_split(comm, 0, p - 1 - r, &rev));

    for (int inplace = 0; inplace < 2; inplace++)
        for (size_t k = 0; k < NBLOCKS; k++) CHECK_RUN(one(comm, recv, send, blocks[k], inplace, seed++, "back to back"));

    for (size_t k = 0; k < NBLOCKS; k++) {
        double x = 1.0;
        CHECK_OK(mlc_allreduce(&x, &x, 1, MLC_FLOAT64, MLC_SUM, comm, NULL));
        CHECK(x == (double)p, "small allreduce between allgathers: %g", x);
        CHECK_RUN(one(comm, recv, send, blocks[k], (int)k & 1, seed++, "after a small op"));
        CHECK_OK(mlc_barrier(comm, NULL));
        CHECK_RUN(one(comm, recv, send, blocks[k], 0, seed++, "after a barrier"));
        size_t n = 2 * 1024 * KIB + 3;
        if (r == 0) mlc_test_pattern_fill(send, n, seed);
        CHECK_OK(mlc_broadcast(send, send, n, MLC_UINT8, 0, comm, NULL));
        size_t bad = mlc_test_pattern_check(send, n, seed++);
        CHECK(bad == SIZE_MAX, "broadcast between allgathers differs at byte %zu", bad);
        CHECK_RUN(one(comm, recv, send, blocks[k], 1, seed++, "after a broadcast"));
    }

    for (int late = 0; late < p; late++) {
        if (r == late) mlc_test_sleep_ms(50);
        CHECK_RUN(one(comm, recv, send, 3 * 1024 * KIB - 5, late & 1, seed++, "one rank late"));
    }

    for (size_t k = 0; k < NBLOCKS; k++) {
        CHECK_RUN(one(rev, recv, send, blocks[k], 0, seed++, "second communicator"));
        CHECK_RUN(one(comm, recv, send, blocks[k], 1, seed++, "first communicator"));
    }

    CHECK_OK(mlc_comm_free(rev));
    mlc_test_free(recv);
    mlc_test_free(send);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
