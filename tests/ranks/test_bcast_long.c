/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A collective that keeps moving is not stalled: the timeout bounds the time
 * without progress, not a call's duration. A 768 MiB in-place broadcast
 * (which the shm engine streams through the root's stage chunk by chunk)
 * runs with a timeout far below its duration: it must complete, every byte
 * right, from either root. The ranks meet in a barrier under a long timeout
 * first (filling the buffer takes longer than the short one). The short
 * timeout is half the time of one memcpy of the buffer, measured first (at
 * least SHORT_S): the broadcast takes longer than that copy, so one that
 * showed no progress until its end fails, and a rank descheduled for less
 * than that does not. Registered for shm only (tests/ranks/CMakeLists.txt
 * says why).
 */
#include "harness.h"

#define BYTES ((size_t)768 << 20)
#define SHORT_S 0.04
#define LONG_S 60.0

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    unsigned char *buf = mlc_test_alloc(BYTES), *copy = mlc_test_alloc(BYTES);
    memset(buf, 1, BYTES);
    double took = 1e9;
    for (int i = 0; i < 2; i++) {
        double t0 = mlc_test_now();
        memcpy(copy, buf, BYTES);
        double t = mlc_test_now() - t0;
        if (t < took) took = t;
    }
    mlc_test_free(copy);
    CHECK_OK(mlc_allreduce(&took, &took, 1, MLC_FLOAT64, MLC_MAX, comm, NULL));
    double short_s = took / 2 > SHORT_S ? took / 2 : SHORT_S;
    for (int root = 0; root < p && root < 2; root++) {
        uint64_t seed = 40 + (uint64_t)root;
        if (r == root)
            mlc_test_pattern_fill(buf, BYTES, seed);
        else
            memset(buf, 0, BYTES);
        CHECK_OK(mlc_comm_set_timeout(comm, LONG_S));
        CHECK_OK(mlc_barrier(comm, NULL));
        CHECK_OK(mlc_comm_set_timeout(comm, short_s));
        double t0 = mlc_test_now();
        mlc_status_t st = mlc_broadcast(r == root ? buf : NULL, buf, BYTES, MLC_UINT8, root, comm, NULL);
        double dt = mlc_test_now() - t0;
        CHECK_OK(mlc_comm_set_timeout(comm, LONG_S));
        CHECK(st == MLC_SUCCESS, "broadcast of %zu bytes from root %d, timeout %.3f s: %s after %.3f s: %s", BYTES,
              root, short_s, mlc_status_name(st), dt, mlc_last_error());
        size_t bad = mlc_test_pattern_check(buf, BYTES, seed);
        CHECK(bad == SIZE_MAX, "broadcast from root %d: byte %zu wrong", root, bad);
    }
    mlc_test_free(buf);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
