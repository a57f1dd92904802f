/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_init on mpi honours MLC_TIMEOUT while MPI_Init_thread waits for a
 * rank that never comes: the last rank of the job never initializes (it
 * sleeps, as a rank whose own setup failed and lingers would), and every
 * other rank's mlc_comm_init must fail with MLC_ERR_TIMEOUT within about
 * MLC_TIMEOUT, naming MPI_Init_thread, and a second call must fail at once
 * (MLC_ERR_UNAVAILABLE). They sat in MPI_Init_thread, silent, for as long as
 * the missing rank lived. Each rank prints one line, "rank R: PASS ..." or
 * "rank R: FAIL ..."; init_timeout.sh runs the job and reads them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mlcomm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int env_int(const char *a, const char *b)
{
    const char *v = getenv(a) ? getenv(a) : getenv(b);
    return v ? atoi(v) : -1;
}

int main(void)
{
    int rank = env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK"), size = env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
    if (rank < 0 || size < 2) {
        printf("SKIP: not started by mpirun with 2 or more ranks\n");
        return 77;
    }
    if (rank == size - 1) {
        sleep(20); /* never initializes; the launcher ends it once the others exit */
        return 0;
    }
    double t0 = now();
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    double took = now() - t0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    int ok = st == MLC_ERR_TIMEOUT && comm == NULL && took < 10 && strstr(msg, "MPI_Init_thread") &&
             strstr(msg, "MLC_TIMEOUT");
    mlc_status_t again = mlc_comm_init(NULL, &comm);
    ok = ok && again == MLC_ERR_UNAVAILABLE && strstr(mlc_last_error(), "MPI_Init_thread");
    printf("rank %d: %s: mlc_comm_init -> %s after %.1f s (%s); again -> %s (%s)\n", rank, ok ? "PASS" : "FAIL",
           mlc_status_name(st), took, msg, mlc_status_name(again), mlc_last_error());
    fflush(stdout);
    sleep(3); /* the launcher may end the job once one rank exits: let the others print first */
    return ok ? 0 : 1; /* as a program would, with MPI_Init_thread still running on its thread */
}
