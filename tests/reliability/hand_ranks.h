/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks the init tests start by hand (fork, no launcher): their environment,
 * and waiting for one with a bound. */
#ifndef MLC_TEST_HAND_RANKS_H
#define MLC_TEST_HAND_RANKS_H
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

/* In the forked child: rank `rank` of `world` shm ranks of job `job`, with
 * MLC_TIMEOUT `timeout` and MLC_FAULT_INIT `fault`. */
static inline void hand_rank_env(int rank, int world, const char *job, const char *timeout, const char *fault)
{
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world);
    setenv("MLC_BACKEND", "shm", 1);
    setenv("MLC_RANK", r, 1);
    setenv("MLC_WORLD_SIZE", w, 1);
    setenv("MLC_JOB_ID", job, 1);
    setenv("MLC_TIMEOUT", timeout, 1);
    setenv("MLC_FAULT_INIT", fault, 1);
}

/* Wait up to `secs` for pid; returns its wait status, or -1 if it did not end. */
static inline int reap_within(pid_t pid, double secs)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (double t = 0; t < secs; t += 0.01) {
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) return ws;
        nanosleep(&nap, NULL);
    }
    return -1;
}
#endif
