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
 *   test_mpi_count_mismatch      under mpirun, MLC_BACKEND=mpi
 */
#include <stdint.h>
#include <string.h>
#include "harness.h"

enum { SMALL = 1000, LARGE = 4000, GUARD = LARGE + 1024 };
#define FILL 0x7eadbeef

typedef enum { BCAST, ALLREDUCE, REDUCE, KINDS } kind_t;
static const char *const kind_name[KINDS] = {"broadcast", "allreduce", "reduce"};
/* Never freed: a collective MPI still holds after a failure may write them
 * later (docs/MPI.md), so each case has its own. */
static int32_t send_of[KINDS][LARGE], recv_of[KINDS][LARGE + GUARD];

static int one_case(mlc_comm_t *comm, kind_t kind)
{
    int r = mlc_comm_rank(comm);
    mlc_comm_t *c = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, r, &c));
    /* The root (0; reduce: 1) passes LARGE, everyone else SMALL. */
    int root = kind == REDUCE ? 1 : 0;
    size_t mine = r == root || (kind == ALLREDUCE && r == 0) ? LARGE : SMALL;
    int32_t *send = send_of[kind], *recv = recv_of[kind];
    for (size_t i = 0; i < LARGE; i++) send[i] = 0x11111111;
    for (size_t i = 0; i < mine + GUARD; i++) recv[i] = FILL;
    mlc_status_t st;
    if (kind == BCAST) st = mlc_broadcast(send, recv, mine, MLC_INT32, root, c, NULL);
    else if (kind == ALLREDUCE) st = mlc_allreduce(send, recv, mine, MLC_INT32, MLC_SUM, c, NULL);
    else st = mlc_reduce(send, recv, mine, MLC_INT32, MLC_SUM, root, c, NULL);
    size_t past = 0;
    for (size_t i = mine; i < mine + GUARD; i++) past += recv[i] != FILL;
    CHECK(past == 0, "%s of %zu int32 (the root passed %d) -> %s: %zu elements written past the receive buffer",
          kind_name[kind], mine, LARGE, mlc_status_name(st), past);
    /* MPI saw a truncation: that is MLC_ERR_TRUNCATE, with or without a deadline. */
    CHECK(st == MLC_SUCCESS || !strcasestr(mlc_last_error(), "truncate") || st == MLC_ERR_TRUNCATE,
          "%s -> %s: %s", kind_name[kind], mlc_status_name(st), mlc_last_error());
    mlc_comm_free(c);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0 || mlc_comm_size(comm) < 2) return MLC_TEST_SKIP;
    int failed = 0;
    for (kind_t k = 0; k < KINDS; k++) failed |= one_case(comm, k);
    return failed;
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
