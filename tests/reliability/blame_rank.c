/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run under `mlcomm-run -n N` with MLC_BACKEND=shm: blame_rank VICTIM MIB.
 * Every rank runs small allreduces in a loop; rank VICTIM, holding MIB MiB of
 * touched memory and a second thread, SIGKILLs itself from that thread in
 * iteration 20. Its process takes a while to tear down after its main thread
 * is gone, so the survivors (which see it dead and exit 1 with
 * MLC_ERR_PEER_LOST) may end before the kernel lets the launcher reap it.
 * blame_test.sh checks that mlcomm-run still names VICTIM as the cause.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlcomm.h"

#define KILL_ITERATION 20
#define ITERATIONS 100000

static void *killer(void *arg)
{
    (void)arg;
    raise(SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: blame_rank VICTIM MIB\n");
        return 2;
    }
    int victim = atoi(argv[1]);
    size_t mib = (size_t)atol(argv[2]);
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    int r = mlc_comm_rank(comm);
    char *ballast = NULL;
    if (r == victim) {
        ballast = malloc(mib << 20);
        if (!ballast) return 2;
        memset(ballast, 1, mib << 20);
    }
    for (int it = 0; it < ITERATIONS; it++) {
        if (r == victim && it == KILL_ITERATION) {
            pthread_t tid;
            pthread_create(&tid, NULL, killer, NULL);
            pause();
        }
        int64_t x = r, sum = 0;
        st = mlc_allreduce(&x, &sum, 1, MLC_INT64, MLC_SUM, comm, NULL);
        if (st != MLC_SUCCESS) {
            fprintf(stderr, "rank %d: %s in iteration %d: %s\n", r, mlc_status_name(st), it, mlc_last_error());
            return st == MLC_ERR_PEER_LOST ? 1 : 3;
        }
    }
    fprintf(stderr, "rank %d: completed every iteration although rank %d was to be killed\n", r, victim);
    free(ballast);
    mlc_comm_free(comm);
    return 4;
}
