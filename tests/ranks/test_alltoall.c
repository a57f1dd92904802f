/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alltoall and alltoallv.
 * alltoall: every dtype (and a record) at per-pair counts 0, 1, 7 and 1001
 * and 1 MiB in total, in-place (sendbuf == recvbuf) and out-of-place; every
 * algorithm the backend offers.
 * alltoallv: a different count for every pair (some 0), send blocks in
 * reverse order with gaps, receive blocks with gaps that must stay untouched.
 */
#include "harness.h"

static const size_t small_counts[] = {0, 1, 7, 1001};
#define MIB (1024u * 1024u)

static const mlc_dtype_t all_dtypes[] = {
#define X(name, str, size) name,
    MLC_DTYPE_LIST(X)
#undef X
        MLC_RECORD(7),
};
#define NDTYPES (sizeof all_dtypes / sizeof *all_dtypes)

/* The block rank `from` sends to rank `to`. */
static uint64_t pair_seed(uint64_t seed, int from, int to)
{
    return seed * 4096 + (uint64_t)from * 64 + (uint64_t)to;
}

static int check_alltoall(mlc_comm_t *comm, mlc_dtype_t dt, size_t count, int inplace,
                          uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt), bytes = count * es, total = bytes * (size_t)p;
    unsigned char *send = mlc_test_alloc(total), *recv = mlc_test_alloc(total);
    unsigned char *want = mlc_test_alloc(total);
    unsigned char *src = inplace ? recv : send;
    for (int j = 0; j < p; j++) {
        mlc_test_pattern_fill(src + (size_t)j * bytes, bytes, pair_seed(seed, r, j));
        mlc_test_pattern_fill(want + (size_t)j * bytes, bytes, pair_seed(seed, j, r));
    }
    CHECK_OK(mlc_alltoall(src, recv, count, dt, comm, NULL));
    CHECK_MEM(recv, want, total, es, "alltoall %s count=%zu %s algo=%s", mlc_dtype_name(dt),
              count, inplace ? "in-place" : "out-of-place", algo);
    if (!inplace)
        for (int j = 0; j < p; j++)
            CHECK(mlc_test_pattern_check(send + (size_t)j * bytes, bytes, pair_seed(seed, r, j)) ==
                      SIZE_MAX,
                  "sendbuf block %d modified by alltoall count=%zu", j, count);
    CHECK(mlc_test_guard_ok(recv, total) && mlc_test_guard_ok(send, total),
          "write past the end of a buffer (count=%zu)", count);
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

/* Elements rank `from` sends to rank `to`: varies per pair, some pairs 0. */
static size_t pair_count(size_t base, int from, int to)
{
    size_t k = (size_t)(from * 3 + to * 5) % 4;
    return k == 0 ? 0 : base * k + (size_t)from;
}

static int check_alltoallv(mlc_comm_t *comm, mlc_dtype_t dt, size_t base, size_t gap,
                           uint64_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt);
    size_t *sc = calloc((size_t)p, sizeof *sc), *sd = calloc((size_t)p, sizeof *sd);
    size_t *rc = calloc((size_t)p, sizeof *rc), *rd = calloc((size_t)p, sizeof *rd);
    CHECK(sc && sd && rc && rd, "out of memory");
    size_t sat = 0, rat = 0;
    for (int j = p - 1; j >= 0; j--) { /* send blocks in reverse order */
        sc[j] = pair_count(base, r, j);
        sat += gap;
        sd[j] = sat;
        sat += sc[j];
    }
    for (int j = 0; j < p; j++) {
        rc[j] = pair_count(base, j, r);
        rat += gap;
        rd[j] = rat;
        rat += rc[j];
    }
    unsigned char *send = mlc_test_alloc(sat * es), *recv = mlc_test_alloc(rat * es);
    unsigned char *want = mlc_test_alloc(rat * es); /* gaps keep the fresh fill */
    for (int j = 0; j < p; j++) {
        mlc_test_pattern_fill(send + sd[j] * es, sc[j] * es, pair_seed(seed, r, j));
        mlc_test_pattern_fill(want + rd[j] * es, rc[j] * es, pair_seed(seed, j, r));
    }
    CHECK_OK(mlc_alltoallv(send, sc, sd, recv, rc, rd, dt, comm, NULL));
    CHECK_MEM(recv, want, rat * es, es, "alltoallv %s base=%zu gap=%zu", mlc_dtype_name(dt), base,
              gap);
    CHECK(mlc_test_guard_ok(recv, rat * es), "write past the end of recvbuf");
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    uint64_t seed = 1;
    CHECK_OK(mlc_alltoall(NULL, NULL, 0, MLC_UINT64, comm, NULL));
    for (size_t d = 0; d < NDTYPES; d++)
        for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
            for (int inplace = 0; inplace < 2; inplace++)
                CHECK_RUN(check_alltoall(comm, all_dtypes[d], small_counts[k], inplace, seed++,
                                         "auto"));
    for (int inplace = 0; inplace < 2; inplace++)
        CHECK_RUN(check_alltoall(comm, MLC_INT32, MIB / 4 / (size_t)p, inplace, seed++, "auto"));

    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_ALLTOALL, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLTOALL, algos[a]));
        static const size_t counts[] = {1, 1001, MIB / 8 + 1};
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
            for (int inplace = 0; inplace < 2; inplace++)
                CHECK_RUN(check_alltoall(comm, MLC_UINT8, counts[k], inplace, seed++, algos[a]));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLTOALL, NULL));

    static const size_t bases[] = {0, 1, 97, MIB / 16};
    for (size_t k = 0; k < sizeof bases / sizeof *bases; k++) {
        CHECK_RUN(check_alltoallv(comm, MLC_FLOAT32, bases[k], 0, seed++));
        CHECK_RUN(check_alltoallv(comm, MLC_UINT8, bases[k], 5, seed++));
    }
    CHECK_RUN(check_alltoallv(comm, MLC_RECORD(20), 3, 1, seed++));
    nalgo = mlc_test_algos(comm, MLC_COLL_ALLTOALLV, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLTOALLV, algos[a]));
        CHECK_RUN(check_alltoallv(comm, MLC_INT64, 5, 2, seed++));
        CHECK_RUN(check_alltoallv(comm, MLC_UINT8, MIB / 8 + 1, 0, seed++));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLTOALLV, NULL));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
