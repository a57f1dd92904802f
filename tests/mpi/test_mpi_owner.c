/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that never calls MPI: mlc_comm_init with MLC_BACKEND=mpi
 * initializes MPI at the configured thread level (MLC_MPI_THREAD_LEVEL,
 * default multiple); mlc_comm_free leaves it initialized (a second
 * communicator still works); MPI is finalized at process exit, by mlcomm.
 * The program asks MPI only questions allowed at any time.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlcomm.h"

/* Registered before mlcomm's own exit handler, so it runs after it. */
static void check_finalized(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        fprintf(stderr, "MPI was not finalized at exit by mlcomm\n");
        _exit(3);
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, mlc_last_error());
    return 1;
}

int main(void)
{
    int inited = 1;
    MPI_Initialized(&inited);
    if (inited) return fail("MPI initialized before mlcomm");
    atexit(check_finalized);

    mlc_comm_t *comm = NULL;
    if (mlc_comm_init(NULL, &comm) != MLC_SUCCESS) return fail("mlc_comm_init");
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return fail("backend is not mpi");
    MPI_Initialized(&inited);
    if (!inited) return fail("MPI not initialized by mlc_comm_init");
    int level = -1, want = MPI_THREAD_MULTIPLE;
    MPI_Query_thread(&level);
    const char *env = getenv("MLC_MPI_THREAD_LEVEL");
    if (env && strcmp(env, "funneled") == 0) want = MPI_THREAD_FUNNELED;
    if (level < want) {
        fprintf(stderr, "thread level %d, asked for %d\n", level, want);
        return 1;
    }
    int32_t x = mlc_comm_rank(comm) + 1, s = 0;
    int p = mlc_comm_size(comm);
    if (mlc_allreduce(&x, &s, 1, MLC_INT32, MLC_SUM, comm, NULL) != MLC_SUCCESS || s != p * (p + 1) / 2)
        return fail("allreduce");
    if (mlc_comm_free(comm) != MLC_SUCCESS) return fail("free");

    int fin = 1;
    MPI_Finalized(&fin);
    if (fin) return fail("mlc_comm_free finalized MPI");
    /* a second communicator on the same (still initialized) MPI */
    if (mlc_comm_init(NULL, &comm) != MLC_SUCCESS) return fail("second mlc_comm_init");
    if (mlc_barrier(comm, NULL) != MLC_SUCCESS) return fail("barrier");
    mlc_comm_free(comm);
    return 0; /* exit: mlcomm finalizes MPI, then check_finalized runs */
}
