/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Large in-place broadcasts back to back: the shm engine streams them through
 * the root's stage, a few 64 KiB chunks it reuses while its readers copy out.
 * Every rank checks every byte of every broadcast:
 *  - roots rotate and sizes are no multiple of a chunk (a short last chunk);
 *  - small collectives come between them (the next staged broadcast then
 *    follows an op that took another path);
 *  - one reader enters late, so the root fills its stage and must wait for
 *    that reader before it reuses a chunk;
 *  - a second communicator (ranks reversed) broadcasts through its own stages
 *    between broadcasts of the first.
 * Out-of-place roots come last: under MLC_STAGES=on they stage too (copying
 * each chunk on into their own receive buffer), and in a job where single
 * copy is fast they keep the single-copy path; a reader must follow whichever
 * path its root announced, also with a reader late.
 */
#include "harness.h"

#define MIB ((size_t)1 << 20)
static const size_t sizes[] = {MIB, 3 * MIB + 17, MIB + 65536, 5 * MIB - 3};
#define NSIZES (sizeof sizes / sizeof *sizes)
#define MOST (5 * MIB) /* every buffer's size */
#define TAIL 0x5a      /* what the buffer holds past the broadcast's bytes */

static int one(mlc_comm_t *comm, unsigned char *buf, unsigned char *send, size_t bytes, int root, int inplace,
               uint64_t seed, const char *what)
{
    int r = mlc_comm_rank(comm);
    if (r == root)
        mlc_test_pattern_fill(inplace ? buf : send, bytes, seed);
    else
        memset(buf, 0xa5, bytes);
    memset(buf + bytes, TAIL, MOST - bytes);
    const void *sb = r != root ? NULL : inplace ? buf : send;
    CHECK_OK(mlc_broadcast(sb, buf, bytes, MLC_UINT8, root, comm, NULL));
    size_t bad = mlc_test_pattern_check(buf, bytes, seed);
    CHECK(bad == SIZE_MAX, "%s: broadcast of %zu bytes from root %d (%s): byte %zu wrong", what, bytes, root,
          inplace ? "in place" : "out of place", bad);
    for (size_t i = bytes; i < MOST; i++)
        CHECK(buf[i] == TAIL, "%s: broadcast of %zu bytes wrote byte %zu past its end", what, bytes, i - bytes);
    CHECK(mlc_test_guard_ok(buf, MOST), "%s: write past the end of the buffer", what);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    unsigned char *buf = mlc_test_alloc(MOST), *send = mlc_test_alloc(MOST);
    uint64_t seed = 100;
    mlc_comm_t *rev = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, p - 1 - r, &rev));

    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < NSIZES; k++) {
            int root = (int)(k + (size_t)round) % p;
            CHECK_RUN(one(comm, buf, send, sizes[k], root, 1, seed++, "back to back"));
        }

    for (size_t k = 0; k < NSIZES; k++) {
        int root = (int)k % p;
        double x = 1.0;
        CHECK_OK(mlc_allreduce(&x, &x, 1, MLC_FLOAT64, MLC_SUM, comm, NULL));
        CHECK(x == (double)p, "small allreduce between broadcasts: %g", x);
        CHECK_RUN(one(comm, buf, send, sizes[k], root, 1, seed++, "after a small op"));
        CHECK_OK(mlc_barrier(comm, NULL));
        CHECK_RUN(one(comm, buf, send, sizes[k], root, 1, seed++, "after a barrier"));
    }

    for (int root = 0; root < p; root++) {
        int late = (root + 1) % p;
        if (r == late && p > 1) mlc_test_sleep_ms(50);
        CHECK_RUN(one(comm, buf, send, 5 * MIB - 3, root, 1, seed++, "one reader late"));
    }

    for (size_t k = 0; k < NSIZES; k++) {
        int root = (int)k % p;
        CHECK_RUN(one(rev, buf, send, sizes[k], root, 1, seed++, "second communicator"));
        CHECK_RUN(one(comm, buf, send, sizes[k], root, 1, seed++, "first communicator"));
    }

    for (int root = 0; root < p; root++) {
        CHECK_RUN(one(comm, buf, send, 3 * MIB + 17, root, 0, seed++, "out of place"));
        CHECK_RUN(one(comm, buf, send, 3 * MIB + 17, root, 1, seed++, "in place again"));
    }
    for (size_t k = 0; k < NSIZES; k++)
        CHECK_RUN(one(comm, buf, send, sizes[k], (int)(k + 1) % p, 0, seed++, "out of place, every size"));
    for (int root = 0; root < p; root++) {
        if (r == (root + 1) % p && p > 1) mlc_test_sleep_ms(50);
        CHECK_RUN(one(comm, buf, send, 5 * MIB - 3, root, 0, seed++, "out of place, one reader late"));
    }

    CHECK_OK(mlc_comm_free(rev));
    mlc_test_free(buf);
    mlc_test_free(send);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
