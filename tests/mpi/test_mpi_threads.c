/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two communicators used from two threads at once (mlcomm.h allows it) on
 * an MPI below MPI_THREAD_MULTIPLE (MLC_MPI_THREAD_LEVEL=serialized or
 * funneled): mlcomm must not call MPI from both threads at once (MPICH
 * aborted in its progress engine). Each thread runs many small and
 * medium all-reduces and checks every result. Exit 0 = pass.
 */
#include <stdint.h>
#include <stdio.h>
#include "two_threads.h"

#define ROUNDS 300

static void *run(void *arg)
{
    two_threads_job_t *j = arg;
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
    char passed[96];
    snprintf(passed, sizeof passed, "two threads, two communicators, %d rounds each: exact", ROUNDS);
    return two_threads_main(run, NULL, NULL, passed);
}
