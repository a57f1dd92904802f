/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks the init tests start by hand (fork, no launcher): waiting for one, with a bound. */
#ifndef MLC_TEST_REAP_WITHIN_H
#define MLC_TEST_REAP_WITHIN_H
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

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
