/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two communicators used from two threads at once (mlcomm.h allows it) on
 * an MPI below MPI_THREAD_MULTIPLE (MLC_MPI_THREAD_LEVEL=serialized or
 * funneled): mlcomm must not call MPI from both threads at once (MPICH
 * aborted in its progress engine). Each thread runs many small and
 * medium all-reduces and checks every result. Exit 0 = pass.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlcomm.h"

#define ROUNDS 300

typedef struct job {
    mlc_comm_t *comm;
    int which, bad;
    char why[512];
} job_t;

static void *run(void *arg)
{
    job_t *j = arg;
    int p = mlc_comm_size(j->comm), r = mlc_comm_rank(j->comm);
    int32_t in[1024], out[1024];
    for (int k = 0; k < ROUNDS && !j->bad; k++) {
        size_t n = k % 3 == 0 ? 1024 : 1 + (size_t)(k % 7);
        for (size_t i = 0; i < n; i++) in[i] = r + (int32_t)i + k + j->which;
        mlc_status_t st = mlc_allreduce(in, out, n, MLC_INT32, MLC_SUM, j->comm, NULL);
        if (st != MLC_SUCCESS) {
            snprintf(j->why, sizeof j->why, "round %d: %s: %s", k, mlc_status_name(st), mlc_last_error());
            j->bad = 1;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            int32_t want = p * (p - 1) / 2 + p * ((int32_t)i + k + j->which);
            if (out[i] != want) {
                snprintf(j->why, sizeof j->why, "round %d: element %zu is %d, want %d", k, i, out[i], want);
                j->bad = 1;
                break;
            }
        }
    }
    return NULL;
}

int main(void)
{
    mlc_comm_t *world = NULL, *comms[2] = {NULL, NULL};
    if (mlc_comm_init(NULL, &world) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init: %s\n", mlc_last_error());
        return 1;
    }
    int r = mlc_comm_rank(world);
    for (int t = 0; t < 2; t++)
        if (mlc_comm_split(world, 0, r, &comms[t]) != MLC_SUCCESS) {
            fprintf(stderr, "split: %s\n", mlc_last_error());
            return 1;
        }
    job_t jobs[2] = {{comms[0], 0, 0, ""}, {comms[1], 1, 0, ""}};
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, run, &jobs[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    int bad = 0;
    for (int t = 0; t < 2; t++)
        if (jobs[t].bad) {
            fprintf(stderr, "rank %d, thread %d: %s\n", r, t, jobs[t].why);
            bad = 1;
        }
    int32_t any = bad, all = 0;
    mlc_status_t st = mlc_allreduce(&any, &all, 1, MLC_INT32, MLC_MAX, world, NULL);
    for (int t = 0; t < 2; t++) mlc_comm_free(comms[t]);
    mlc_comm_free(world);
    if (st == MLC_SUCCESS && all == 0 && r == 0) printf("two threads, two communicators, %d rounds each: exact\n", ROUNDS);
    return st == MLC_SUCCESS && all == 0 ? 0 : 1;
}
