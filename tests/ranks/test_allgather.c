/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * allgather and allgatherv.
 * allgather: every dtype (and a record) at per-rank counts 0, 1, 7 and 1001
 * and 1 MiB, in-place (sendbuf == recvbuf + rank*count) and out-of-place,
 * results identical on every rank; every algorithm the backend offers.
 * allgatherv: uneven counts (one rank sends nothing), displacements in
 * reverse rank order with gaps that must stay untouched.
 */
#include "harness.h"

static const size_t small_counts[] = {0, 1, 7, 1001};
#define MIB (1024u * 1024u)

static const mlc_dtype_t all_dtypes[] = {
#define X(name, str, size) name,
    MLC_DTYPE_LIST(X)
#undef X
        MLC_RECORD(5),
};
#define NDTYPES (sizeof all_dtypes / sizeof *all_dtypes)

/* The data rank q contributes in the case with this seed. */
static uint64_t block_seed(uint64_t seed, int q) { return seed * 64 + (uint64_t)q; }

static int check_allgather(mlc_comm_t *comm, mlc_dtype_t dt, size_t count, int inplace,
                           uint64_t seed, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt), bytes = count * es, total = bytes * (size_t)p;
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(total);
    unsigned char *want = mlc_test_alloc(total);
    for (int q = 0; q < p; q++) mlc_test_pattern_fill(want + (size_t)q * bytes, bytes, block_seed(seed, q));
    const void *sb = send;
    if (inplace) {
        sb = recv + (size_t)r * bytes;
        mlc_test_pattern_fill(recv + (size_t)r * bytes, bytes, block_seed(seed, r));
    } else {
        mlc_test_pattern_fill(send, bytes, block_seed(seed, r));
    }
    CHECK_OK(mlc_allgather(sb, recv, count, dt, comm, NULL));
    CHECK_MEM(recv, want, total, es, "allgather %s count=%zu %s algo=%s", mlc_dtype_name(dt),
              count, inplace ? "in-place" : "out-of-place", algo);
    if (!inplace)
        CHECK(mlc_test_pattern_check(send, bytes, block_seed(seed, r)) == SIZE_MAX,
              "sendbuf modified by allgather count=%zu", count);
    CHECK(mlc_test_guard_ok(recv, total), "write past the end of recvbuf (count=%zu)", count);
    CHECK(mlc_test_same_on_all_ranks(comm, recv, total, "allgather") == 0,
          "ranks disagree in allgather %s count=%zu", mlc_dtype_name(dt), count);
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

/*
 * allgatherv with rank q sending counts[q] = base*(q+1) + q elements except
 * rank 1 (nothing); blocks are laid out in reverse rank order with a gap of
 * `gap` elements before each.
 */
static int check_allgatherv(mlc_comm_t *comm, mlc_dtype_t dt, size_t base, size_t gap,
                            uint64_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(dt);
    size_t *counts = calloc((size_t)p, sizeof *counts), *displs = calloc((size_t)p, sizeof *displs);
    CHECK(counts && displs, "out of memory");
    size_t at = 0;
    for (int q = 0; q < p; q++) counts[q] = q == 1 ? 0 : base * (size_t)(q + 1) + (size_t)q;
    for (int q = p - 1; q >= 0; q--) {
        at += gap;
        displs[q] = at;
        at += counts[q];
    }
    size_t total = at * es;
    unsigned char *send = mlc_test_alloc(counts[r] * es), *recv = mlc_test_alloc(total);
    unsigned char *want = mlc_test_alloc(total); /* gaps keep the fresh fill */
    for (int q = 0; q < p; q++)
        mlc_test_pattern_fill(want + displs[q] * es, counts[q] * es, block_seed(seed, q));
    mlc_test_pattern_fill(send, counts[r] * es, block_seed(seed, r));
    CHECK_OK(mlc_allgatherv(send, counts[r], recv, counts, displs, dt, comm, NULL));
    CHECK_MEM(recv, want, total, es, "allgatherv %s base=%zu gap=%zu", mlc_dtype_name(dt), base, gap);
    CHECK(mlc_test_guard_ok(recv, total), "write past the end of recvbuf");
    CHECK(mlc_test_same_on_all_ranks(comm, recv, total, "allgatherv") == 0, "ranks disagree");
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    free(counts);
    free(displs);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    uint64_t seed = 1;
    CHECK_OK(mlc_allgather(NULL, NULL, 0, MLC_INT8, comm, NULL));
    for (size_t d = 0; d < NDTYPES; d++)
        for (size_t k = 0; k < sizeof small_counts / sizeof *small_counts; k++)
            for (int inplace = 0; inplace < 2; inplace++)
                CHECK_RUN(check_allgather(comm, all_dtypes[d], small_counts[k], inplace, seed++,
                                          "auto"));
    for (int inplace = 0; inplace < 2; inplace++)
        CHECK_RUN(check_allgather(comm, MLC_FLOAT32, MIB / 4, inplace, seed++, "auto"));

    const char *algos[32];
    size_t nalgo = mlc_test_algos(comm, MLC_COLL_ALLGATHER, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLGATHER, algos[a]));
        static const size_t counts[] = {1, 1001, MIB / (size_t)2 + 3};
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
            for (int inplace = 0; inplace < 2; inplace++)
                CHECK_RUN(check_allgather(comm, MLC_BFLOAT16, counts[k], inplace, seed++, algos[a]));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLGATHER, NULL));

    static const size_t bases[] = {0, 1, 100, MIB / 8};
    for (size_t k = 0; k < sizeof bases / sizeof *bases; k++) {
        CHECK_RUN(check_allgatherv(comm, MLC_INT64, bases[k], 0, seed++));
        CHECK_RUN(check_allgatherv(comm, MLC_FLOAT16, bases[k], 3, seed++));
    }
    CHECK_RUN(check_allgatherv(comm, MLC_RECORD(12), 9, 2, seed++));
    nalgo = mlc_test_algos(comm, MLC_COLL_ALLGATHERV, algos, 32);
    for (size_t a = 0; a < nalgo; a++) {
        CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLGATHERV, algos[a]));
        CHECK_RUN(check_allgatherv(comm, MLC_UINT32, 1, 1, seed++));
        CHECK_RUN(check_allgatherv(comm, MLC_UINT8, MIB / 4 + 1, 0, seed++));
    }
    CHECK_OK(mlc_comm_set_algo(comm, MLC_COLL_ALLGATHERV, NULL));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
