/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_init_rank across "hosts": the MPI processes split into two host
 * identities (MLC_HOST_ID), rank 0 makes a unique id and MPI hands its bytes
 * to the others. On the mpi backend every process joins (in reversed rank
 * order, as the callers ask) and data moves; shm is refused with a message
 * naming both hosts. Run under mpirun with 2 or more ranks; exit 0 = pass.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "mlcomm.h"

static int failures;
static int world_rank;
#define CHECK_COUNTER failures
#define CHECK_WHO() fprintf(stderr, "[world rank %d] ", world_rank)
#include "check.h"

static void shared_id(mlc_unique_id_t *id)
{
    memset(id, 0, sizeof *id);
    if (world_rank == 0) CHECK_OK(mlc_get_unique_id(id));
    MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int provided = 0, p = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int half = (p + 1) / 2;
    setenv("MLC_HOST_ID", world_rank < half ? "hostA" : "hostB", 1);

    mlc_unique_id_t id;
    shared_id(&id);
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "mpi";
    cfg.timeout_s = 60;
    mlc_comm_t *comm = NULL;
    int me = p - 1 - world_rank;
    CHECK_OK(mlc_comm_init_rank(&id, p, me, &cfg, &comm));
    if (comm) {
        CHECK(mlc_comm_rank(comm) == me && mlc_comm_size(comm) == p, "joined as %d of %d", mlc_comm_rank(comm),
              mlc_comm_size(comm));
        int32_t v = me + 1, sum = 0;
        CHECK_OK(mlc_allreduce(&v, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
        CHECK(sum == p * (p + 1) / 2, "allreduce gave %d", sum);
        mlc_comm_free(comm);
    }

    shared_id(&id);
    cfg.backend = "shm";
    comm = NULL;
    mlc_status_t st = mlc_comm_init_rank(&id, p, world_rank, &cfg, &comm);
    char want[64];
    snprintf(want, sizeof want, "'hostA' (rank%s 0", half > 1 ? "s" : "");
    CHECK(st == MLC_ERR_UNSUPPORTED && strstr(mlc_last_error(), want) && strstr(mlc_last_error(), "'hostB' (rank"),
          "shm over two hosts: %s: %s", mlc_status_name(st), mlc_last_error());
    if (comm) mlc_comm_free(comm);

    MPI_Finalize();
    if (failures) fprintf(stderr, "[world rank %d] %d check(s) failed\n", world_rank, failures);
    return failures != 0;
}
