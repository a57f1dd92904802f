/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A collective whose ranks pass different counts, on mpi without MLC_CHECK
 * (the default): MPI may return an error or wrong data (docs/MPI.md), but
 * nothing may be written outside a receive buffer. Open MPI 4.1.4's
 * single-copy path wrote the root's whole message past the end of the
 * smaller buffers of broadcast, allreduce and reduce (1000 against 4000
 * int32: 12000 bytes past the end). Each case runs on a communicator of its
 * own, split for it and freed after (the mismatch fails it). A truncation
 * MPI reports is MLC_ERR_TRUNCATE (it was MLC_ERR_BACKEND with a deadline).
 * The large reduce and reduce_scatter cases take mlcomm's own algorithms
 * over MPI point-to-point when a deadline is set (binomial, ring): their
 * receives must be bounded as a user receive is. With Open MPI's single copy
 * on (the .cma variant: a user's OMPI_MCA_btl_vader_single_copy_mechanism,
 * as with a program that starts MPI itself) their plain receives took the
 * sender's whole message past the root's buffer (heap corruption, abort).
 *   test_mpi_count_mismatch      under mpirun, MLC_BACKEND=mpi
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

/* Counts (int32) of the smaller and the larger side. The big ones are past
 * the sizes from which mpi runs its own reduce (64 KiB) and reduce_scatter
 * (a send buffer of 256 KiB) when a deadline is set. */
enum { SMALL = 1000, LARGE = 4000, BIG_SMALL = 32768, BIG_LARGE = 131072, MAX_RANKS = 4 };
enum { GUARD = 4096, MAX_SEND = BIG_LARGE * MAX_RANKS, MAX_RECV = BIG_LARGE };
#define FILL 0x7eadbeef

/* In this order: a rank of the mismatched native reduce may wait out its
 * timeout, so it comes last. */
typedef enum { BCAST, ALLREDUCE, REDUCE_BIG, REDUCE_SCATTER_BIG, REDUCE, KINDS } kind_t;
static const char *const kind_name[KINDS] = {"broadcast", "allreduce", "large reduce", "large reduce_scatter",
                                             "reduce"};
/* Never freed: a collective MPI still holds after a failure may write them
 * later (docs/MPI.md), so each case has its own. Guard elements before and
 * after each buffer. */
static int32_t send_of[KINDS][GUARD + MAX_SEND + GUARD], recv_of[KINDS][GUARD + MAX_RECV + GUARD];

/* Elements of guard [at, at + GUARD) of buf that are not FILL. */
static size_t spoilt(const int32_t *buf, size_t at)
{
    size_t n = 0;
    for (size_t i = at; i < at + GUARD; i++) n += buf[i] != FILL;
    return n;
}

static double case_timeout; /* each case's communicator's; 0: none (MLC_TIMEOUT=0) */

static int one_case(mlc_comm_t *comm, kind_t kind)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &c));
    /* The case's own wait is short; the world's (the next split) outlasts it. */
    if (case_timeout > 0) CHECK_OK(mlc_comm_set_timeout(c, case_timeout));
    int p = mlc_comm_size(c);
    /* broadcast, allreduce: rank 0 passes LARGE, the others SMALL; reduce:
     * the root (1) LARGE. Large reduce: the root (0) the smaller count, so
     * the others' messages are longer than its buffers; large
     * reduce_scatter: rank 1 the larger count. */
    int root = kind == REDUCE ? 1 : 0;
    size_t mine;
    if (kind == REDUCE_BIG) mine = r == root ? BIG_SMALL : BIG_LARGE;
    else if (kind == REDUCE_SCATTER_BIG) mine = r == 1 ? BIG_LARGE : BIG_SMALL;
    else mine = r == root ? LARGE : SMALL;
    size_t nsend = kind == REDUCE_SCATTER_BIG ? mine * (size_t)p : mine;
    int32_t *send = send_of[kind] + GUARD, *recv = recv_of[kind] + GUARD;
    for (size_t i = 0; i < GUARD + MAX_SEND + GUARD; i++) send_of[kind][i] = FILL;
    for (size_t i = 0; i < nsend; i++) send[i] = 0x11111111;
    for (size_t i = 0; i < GUARD + MAX_RECV + GUARD; i++) recv_of[kind][i] = FILL;
    mlc_status_t st;
    if (kind == BCAST) st = mlc_broadcast(send, recv, mine, MLC_INT32, root, c, NULL);
    else if (kind == ALLREDUCE) st = mlc_allreduce(send, recv, mine, MLC_INT32, MLC_SUM, c, NULL);
    else if (kind == REDUCE_SCATTER_BIG) st = mlc_reduce_scatter(send, recv, mine, MLC_INT32, MLC_SUM, c, NULL);
    else st = mlc_reduce(send, recv, mine, MLC_INT32, MLC_SUM, root, c, NULL);
    size_t past = spoilt(recv_of[kind], GUARD + mine) + spoilt(recv_of[kind], 0); /* every kind receives `mine` */
    size_t past_send = spoilt(send_of[kind], GUARD + nsend) + spoilt(send_of[kind], 0);
    CHECK(past == 0 && past_send == 0,
          "%s of %zu int32 on rank %d -> %s (%s): %zu elements written outside the receive buffer, %zu outside "
          "the send buffer",
          kind_name[kind], mine, r, mlc_status_name(st), st ? mlc_last_error() : "", past, past_send);
    /* mlcomm's own algorithms see every length: the large reduce's root
     * receives longer messages than its count, and in the ring every rank
     * receives a piece of another length (or waits for a failed one). */
    CHECK(!((kind == REDUCE_BIG && r == root) || kind == REDUCE_SCATTER_BIG) || st != MLC_SUCCESS,
          "%s of %zu int32 on rank %d: succeeded although the ranks passed different counts", kind_name[kind], mine,
          r);
    /* At 2 ranks each rank's one receive decides: a longer piece is a
     * truncation (the root of the reduce, rank 0 of the ring), a shorter one
     * a mismatch (rank 1 of the ring), and the message says what to do. */
    if (p == 2 && ((kind == REDUCE_BIG && r == root) || kind == REDUCE_SCATTER_BIG)) {
        mlc_status_t want = kind == REDUCE_SCATTER_BIG && r == 1 ? MLC_ERR_MISMATCH : MLC_ERR_TRUNCATE;
        CHECK(st == want && strstr(mlc_last_error(), "MLC_CHECK") != NULL,
              "%s of %zu int32 on rank %d -> %s, want %s naming MLC_CHECK: %s", kind_name[kind], mine, r,
              mlc_status_name(st), mlc_status_name(want), mlc_last_error());
    }
    /* MPI saw a truncation: that is MLC_ERR_TRUNCATE, with or without a deadline. */
    CHECK(st == MLC_SUCCESS || !strcasestr(mlc_last_error(), "truncate") || st == MLC_ERR_TRUNCATE,
          "%s -> %s: %s", kind_name[kind], mlc_status_name(st), mlc_last_error());
    mlc_comm_free(c);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || mlc_comm_size(comm) < 2 ||
        mlc_comm_size(comm) > MAX_RANKS)
        return MLC_TEST_SKIP;
    /* Ranks of a mismatched call may wait out the case's timeout: 1 s at most. */
    case_timeout = mlc_comm_timeout(comm);
    if (case_timeout > 1) case_timeout = 1;
    /* Open MPI's single copy on (a user's setting): MPI's own collectives
     * write past a buffer shorter than their message, which mlcomm cannot
     * bound (docs/MPI.md); mlcomm's own algorithms must not. */
    const char *single_copy = getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
    bool native_unbounded = single_copy && strcmp(single_copy, "none") != 0;
    if (case_timeout > 0) CHECK_OK(mlc_comm_set_timeout(comm, 10 * case_timeout));
    int failed = 0;
    for (kind_t k = 0; k < KINDS; k++) {
        bool own_algorithm = k == REDUCE_BIG || k == REDUCE_SCATTER_BIG;
        /* Without a deadline these are MPI's own too (and a mismatched
         * reduce_scatter may wait for ever). */
        if (own_algorithm ? case_timeout == 0 : native_unbounded) continue;
        failed |= one_case(comm, k);
    }
    return failed;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
