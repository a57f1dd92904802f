/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that owns MPI hands mlcomm its own communicator (mlcomm_mpi.h):
 *  - mlcomm works on a duplicate (congruent, not identical) and gives it back;
 *  - the program's own MPI traffic with the same tags never collides with
 *    mlcomm's point-to-point or collectives;
 *  - mlc_comm_free does not finalize MPI, nor does anything else in mlcomm:
 *    the program keeps using MPI and finalizes it itself.
 * Run under mpirun; exit 0 = pass.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "mlcomm_mpi.h"

static int failures;
static int world_rank;
#define CHECK_COUNTER failures
#define CHECK_WHO() fprintf(stderr, "[world rank %d] ", world_rank)
#define CHECK_TAIL() fprintf(stderr, " (%s)", mlc_last_error())
#include "check.h"

int main(int argc, char **argv)
{
    /* Before MPI_Init (and after MPI_Finalize, below) a handover is an error,
     * not a crash in MPI's handle conversion. */
    mlc_comm_t *early = NULL;
    CHECK(mlc_comm_from_mpi(MPI_COMM_WORLD, NULL, &early) == MLC_ERR_INVALID_ARG && early == NULL &&
              strstr(mlc_last_error(), "not initialized") != NULL,
          "before MPI_Init");
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int p = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);

    /* Errors come back as codes, not crashes. */
    mlc_comm_t *bad = NULL;
    CHECK(mlc_comm_from_mpi(MPI_COMM_NULL, NULL, &bad) == MLC_ERR_INVALID_ARG && bad == NULL, "MPI_COMM_NULL");
    CHECK(mlc_comm_from_mpi(MPI_COMM_WORLD, NULL, NULL) == MLC_ERR_INVALID_ARG, "out NULL");
    /* A Fortran handle that names no communicator, with MPI_COMM_WORLD's
     * handler left fatal (the default): an error, not the job's end. */
    mlc_status_t garbage = mlc_comm_from_mpi_f(123456, NULL, &bad);
    CHECK(garbage != MLC_SUCCESS && bad == NULL, "a garbage handle: %s", mlc_status_name(garbage));

    /* The program's own sub-communicator: world ranks in reverse order. */
    MPI_Comm mine;
    MPI_Comm_split(MPI_COMM_WORLD, 0, p - world_rank, &mine);
    int r = 0;
    MPI_Comm_rank(mine, &r);

    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "shm"; /* ignored: a handed-over communicator is always on mpi */
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_from_mpi(mine, &cfg, &comm);
    CHECK(st == MLC_SUCCESS, "mlc_comm_from_mpi: %s", mlc_status_name(st));
    if (st != MLC_SUCCESS) {
        MPI_Finalize();
        return 1;
    }
    CHECK(mlc_comm_rank(comm) == r && mlc_comm_size(comm) == p, "rank %d/%d", mlc_comm_rank(comm),
          mlc_comm_size(comm));
    CHECK(strcmp(mlc_comm_backend(comm), "mpi") == 0, "backend %s", mlc_comm_backend(comm));

    MPI_Comm dup = MPI_COMM_NULL;
    CHECK(mlc_comm_get_mpi(comm, &dup) == MLC_SUCCESS, "mlc_comm_get_mpi");
    int cmp = -1;
    MPI_Comm_compare(mine, dup, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "mlcomm's communicator compares %d to the program's (want congruent)", cmp);

    /* The program posts a receive for anything on its communicator... */
    int32_t prog_box = -1;
    MPI_Request prog_req;
    MPI_Irecv(&prog_box, 1, MPI_INT32_T, MPI_ANY_SOURCE, MPI_ANY_TAG, mine, &prog_req);
    /* ...while mlcomm sends around a ring with tag 7 and reduces. */
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    int32_t out = 100 + r, in = -1, sum = 0;
    mlc_request_t *q = NULL;
    mlc_msg_status_t ms;
    CHECK(mlc_recv(&in, 1, MLC_INT32, MLC_ANY_SOURCE, 7, comm, &ms, &q) == MLC_SUCCESS, "recv");
    CHECK(mlc_send(&out, 1, MLC_INT32, next, 7, comm, NULL) == MLC_SUCCESS, "send");
    CHECK(mlc_request_wait(&q) == MLC_SUCCESS, "wait");
    CHECK(in == 100 + prev && ms.source == prev, "ring got %d from %d", in, ms.source);
    CHECK(mlc_allreduce(&out, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL) == MLC_SUCCESS, "allreduce");
    CHECK(sum == 100 * p + p * (p - 1) / 2, "allreduce %d", sum);
    int flag = 1;
    MPI_Test(&prog_req, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag, "the program's receive matched mlcomm traffic (got %d)", prog_box);
    MPI_Barrier(mine); /* everyone has looked before anyone sends its own message */
    /* The program's own message, same tag, completes its receive. */
    int32_t prog_msg = 7000 + r;
    MPI_Request preq;
    MPI_Isend(&prog_msg, 1, MPI_INT32_T, next, 7, mine, &preq);
    MPI_Wait(&prog_req, MPI_STATUS_IGNORE);
    MPI_Wait(&preq, MPI_STATUS_IGNORE);
    CHECK(prog_box == 7000 + prev, "the program's receive got %d", prog_box);
    /* and mlcomm's receive does not see the program's messages either
     * (nonblocking: with one rank, next is this rank) */
    MPI_Request sreq;
    MPI_Isend(&prog_msg, 1, MPI_INT32_T, next, 8, mine, &sreq);
    int mflag = 1, pflag = 0;
    mlc_msg_status_t ps;
    while (!pflag) MPI_Iprobe(prev, 8, mine, &pflag, MPI_STATUS_IGNORE);
    CHECK(mlc_iprobe(MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &mflag, &ps) == MLC_SUCCESS && !mflag,
          "mlcomm sees the program's message");
    MPI_Recv(&prog_box, 1, MPI_INT32_T, prev, 8, mine, MPI_STATUS_IGNORE);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);

    /* Split on the handed-over communicator: MPI_Comm_split underneath. */
    mlc_comm_t *half = NULL;
    CHECK(mlc_comm_split(comm, r % 2, r, &half) == MLC_SUCCESS, "split");
    if (half) {
        int32_t one = 1, n = 0;
        CHECK(mlc_allreduce(&one, &n, 1, MLC_INT32, MLC_SUM, half, NULL) == MLC_SUCCESS && n == (p + 1 - r % 2) / 2,
              "split allreduce %d", n);
        mlc_comm_free(half);
    }

    /* Freeing never finalizes MPI: the program still uses it. */
    CHECK(mlc_comm_free(comm) == MLC_SUCCESS, "free");
    int fin = 1;
    MPI_Finalized(&fin);
    CHECK(!fin, "mlc_comm_free finalized MPI");
    int total = 0, one = 1;
    CHECK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, mine) == MPI_SUCCESS && total == p, "MPI after free");
    /* A second communicator from the same MPI works as well. */
    comm = NULL;
    CHECK(mlc_comm_from_mpi(MPI_COMM_WORLD, NULL, &comm) == MLC_SUCCESS, "second handover");
    CHECK(mlc_barrier(comm, NULL) == MLC_SUCCESS, "barrier");
    mlc_comm_free(comm);
    MPI_Comm_free(&mine);
    /* A communicator the program forgets to free before MPI_Finalize: its
     * calls afterwards fail with an error saying so, never call MPI. */
    mlc_comm_t *forgotten = NULL;
    CHECK(mlc_comm_from_mpi(MPI_COMM_WORLD, NULL, &forgotten) == MLC_SUCCESS, "a third handover");

    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    if (forgotten) {
        int32_t x = 1, n = 0;
        mlc_request_t *req = NULL;
        CHECK(mlc_allreduce(&x, &n, 1, MLC_INT32, MLC_SUM, forgotten, NULL) == MLC_ERR_UNAVAILABLE &&
                  strstr(mlc_last_error(), "MPI_Finalize was called") != NULL,
              "an allreduce after MPI_Finalize");
        CHECK(mlc_recv(&n, 1, MLC_INT32, 0, 3, forgotten, NULL, &req) == MLC_ERR_UNAVAILABLE && req == NULL,
              "a receive after MPI_Finalize");
        CHECK(mlc_barrier(forgotten, NULL) == MLC_ERR_UNAVAILABLE, "a barrier after MPI_Finalize");
        CHECK(mlc_comm_free(forgotten) == MLC_SUCCESS, "free after MPI_Finalize");
    }
    mlc_comm_t *late = NULL;
    CHECK(mlc_comm_from_mpi(MPI_COMM_WORLD, NULL, &late) == MLC_ERR_INVALID_ARG && late == NULL &&
              strstr(mlc_last_error(), "already finalized") != NULL,
          "after MPI_Finalize");
    return any || failures ? 1 : 0;
}
