/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The frame of the two-thread MPI tests: split the world twice (on the main
 * thread: communicators are created one thread at a time below
 * MPI_THREAD_MULTIPLE, docs/MPI.md), let the test prepare each thread's
 * job there too, run each job on its own thread, then agree over the world
 * whether any failed. Exit status 0 = pass.
 */
#ifndef MLC_TEST_TWO_THREADS_H
#define MLC_TEST_TWO_THREADS_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "mlcomm.h"

typedef struct two_threads_job {
    mlc_comm_t *comm; /* this thread's own communicator */
    int which, bad;   /* which: 0 or 1; bad: set with why on failure */
    char why[512];
    void *state;      /* the test's own, made by prepare */
} two_threads_job_t;

/* prepare (may be NULL) runs on the main thread per job, 0 = fine;
 * finish (may be NULL) releases what it made. */
static inline int two_threads_main(void *(*run)(void *), int (*prepare)(two_threads_job_t *),
                                   void (*finish)(two_threads_job_t *), const char *passed)
{
    mlc_comm_t *world = NULL;
    if (mlc_comm_init(NULL, &world) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init: %s\n", mlc_last_error());
        return 1;
    }
    int r = mlc_comm_rank(world);
    two_threads_job_t jobs[2] = {{NULL, 0, 0, "", NULL}, {NULL, 1, 0, "", NULL}};
    for (int t = 0; t < 2; t++)
        if (mlc_comm_split(world, 0, r, &jobs[t].comm) != MLC_SUCCESS || (prepare && prepare(&jobs[t]))) {
            fprintf(stderr, "split or preparing thread %d's job: %s\n", t, mlc_last_error());
            return 1;
        }
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
    for (int t = 0; t < 2; t++) {
        if (finish) finish(&jobs[t]);
        mlc_comm_free(jobs[t].comm);
    }
    mlc_comm_free(world);
    if (st == MLC_SUCCESS && all == 0 && r == 0) printf("%s\n", passed);
    return st == MLC_SUCCESS && all == 0 ? 0 : 1;
}
#endif
