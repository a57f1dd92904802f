/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * broadcast: every dtype (and two record sizes) at sizes 0, 1, 7 and 1001
 * from every root, in-place (root sendbuf == recvbuf) and out-of-place
 * (non-roots pass sendbuf NULL); 1 MiB from every root; every algorithm the
 * backend offers.
 */
#include "harness.h"

static const size_t small_counts[] = {0, 1, 7, 1001};
#define MIB (1024u * 1024u)

static const mlc_dtype_t all_dtypes[] = {
#define X(name, str, size) name,
    MLC_DTYPE_LIST(X)
#undef X
        MLC_RECORD(3),
    MLC_RECORD(24),
};
#define NDTYPES (sizeof all_dtypes / sizeof *all_dtypes)

static int check_bcast(mlc_comm_t *comm, mlc_dtype_t dt, size_t count, int root, int inplace,
                       uint64_t seed, const char *algo)
{
    int r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt), bytes = count * es;
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes);
    unsigned char *want = mlc_test_alloc(bytes);
    mlc_test_pattern_fill(want, bytes, seed);
    if (r == root) mlc_test_pattern_fill(inplace ? recv : send, bytes, seed);
    const void *sb = r != root ? NULL : inplace ? recv : send;
    CHECK_OK(mlc_broadcast(sb, recv, count, dt, root, comm, NULL));
    CHECK_MEM(recv, want, bytes, es, "broadcast %s count=%zu root=%d %s algo=%s",
              mlc_dtype_name(dt), count, root, inplace ? "in-place" : "out-of-place", algo);
    if (r == root && !inplace)
        CHECK(mlc_test_pattern_check(send, bytes, seed) == SIZE_MAX, "root sendbuf modified");
    CHECK(mlc_test_guard_ok(recv, bytes), "write past the end of recvbuf (count=%zu)", count);
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    uint64_t seed = 1;
    CHECK_OK(mlc_broadcast(NULL, NULL, 0, MLC_FLOAT64, p - 1, comm, NULL));
    for (size_t d = 0; d < NDTYPES; d++)
        for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
            for (int root = 0; root < p; root++)
                for (int inplace = 0; inplace < 2; inplace++)
                    CHECK_RUN(check_bcast(comm, all_dtypes[d], small_counts[k], root, inplace,
                                          seed++, "auto"));
    for (int root = 0; root < p; root++)
        for (int inplace = 0; inplace < 2; inplace++) {
            mlc_dtype_t dt = all_dtypes[(size_t)(root * 2 + inplace) % NDTYPES];
            CHECK_RUN(check_bcast(comm, dt, MIB / mlc_dtype_size(dt), root, inplace, seed++,
                                  "auto"));
        }

    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_BROADCAST, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_BROADCAST, algos[a]));
        static const size_t counts[] = {1, 1001, MIB + 5};
        for (int root = 0; root < p; root++)
            for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
                CHECK_RUN(check_bcast(comm, MLC_UINT8, counts[k], root, root % 2, seed++,
                                      algos[a]));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_BROADCAST, NULL));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
