/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * v-collectives whose counts disagree between a pair of ranks where one side
 * passes 0: a gatherv whose root expects a block from rank 1 that sends none
 * (or the other way round), a scatterv likewise, an alltoallv where rank 0
 * sends rank 1 nothing while rank 1 expects a block (or the other way
 * round). Every rank must get MLC_ERR_MISMATCH, from the call or (a rank
 * whose part had completed) from the next call, long before MLC_TIMEOUT
 * (10 s, set by ctest: a timeout fails the check); before the fix, a side
 * that sends nothing sent no message, so its peer waited for ever or took
 * nothing and returned success. Each case on a fresh child communicator.
 */
#include <string.h>
#include "harness.h"

typedef enum { GATHERV_SENDS_NONE, GATHERV_ROOT_WANTS_NONE, SCATTERV_ROOT_SENDS_NONE, SCATTERV_WANTS_NONE,
               ALLTOALLV_SENDS_NONE, ALLTOALLV_WANTS_NONE, CASES } case_t;
static const char *const case_names[] = {
    "gatherv: rank 1 sends 0 elements, the root expects 4 from it",
    "gatherv: rank 1 sends 4 elements, the root expects 0 from it",
    "scatterv: the root sends rank 1 0 elements, rank 1 expects 4",
    "scatterv: the root sends rank 1 4 elements, rank 1 expects 0",
    "alltoallv: rank 0 sends rank 1 0 elements, rank 1 expects 4 from it",
    "alltoallv: rank 0 sends rank 1 4 elements, rank 1 expects 0 from it",
};

static mlc_status_t run(case_t k, mlc_comm_t *c, float *a, float *b)
{
    int p = mlc_comm_size(c), r = mlc_comm_rank(c);
    size_t counts[8], displs[8], rcounts[8];
    for (int q = 0; q < p; q++) {
        counts[q] = rcounts[q] = 4;
        displs[q] = (size_t)q * 4;
    }
    switch (k) {
    case GATHERV_SENDS_NONE: return mlc_gatherv(a, r == 1 ? 0 : 4, b, counts, displs, MLC_FLOAT32, 0, c, NULL);
    case GATHERV_ROOT_WANTS_NONE:
        counts[1] = 0;
        return mlc_gatherv(a, 4, b, counts, displs, MLC_FLOAT32, 0, c, NULL);
    case SCATTERV_ROOT_SENDS_NONE:
        counts[1] = 0;
        return mlc_scatterv(a, counts, displs, b, 4, MLC_FLOAT32, 0, c, NULL);
    case SCATTERV_WANTS_NONE: return mlc_scatterv(a, counts, displs, b, r == 1 ? 0 : 4, MLC_FLOAT32, 0, c, NULL);
    case ALLTOALLV_SENDS_NONE:
        if (r == 0) counts[1] = 0;
        return mlc_alltoallv(a, counts, displs, b, rcounts, displs, MLC_FLOAT32, c, NULL);
    case ALLTOALLV_WANTS_NONE:
        if (r == 1) rcounts[0] = 0;
        return mlc_alltoallv(a, counts, displs, b, rcounts, displs, MLC_FLOAT32, c, NULL);
    default: return MLC_ERR_INVALID_ARG;
    }
}

static int one_case(mlc_comm_t *comm, case_t k)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &c));
    float a[32], b[32];
    for (int i = 0; i < 32; i++) a[i] = (float)(r + 1), b[i] = -1;
    double t0 = mlc_test_now();
    mlc_status_t st = run(k, c, a, b);
    const char *when = "the call";
    if (st == MLC_SUCCESS) {
        st = mlc_barrier(c, NULL);
        when = "the barrier after it";
    }
    CHECK(st == MLC_ERR_MISMATCH, "%s: %s returned %s (%s), expected MLC_ERR_MISMATCH after %.1f s", case_names[k],
          when, mlc_status_name(st), mlc_last_error(), mlc_test_now() - t0);
    if (r == 0) fprintf(stderr, "  %s: rank 0 says: %s\n", case_names[k], mlc_last_error());
    CHECK_OK(mlc_comm_free(c));
    CHECK_OK(mlc_barrier(comm, NULL)); /* the parent is untouched */
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (mlc_comm_size(comm) < 2 || mlc_comm_size(comm) > 8) return MLC_TEST_SKIP;
    for (int k = 0; k < CASES; k++) {
        int bad = one_case(comm, (case_t)k);
        if (mlc_test_any_failed(comm, bad)) return 1;
    }
    return 0;
}

MLC_TEST_MAIN(body)
