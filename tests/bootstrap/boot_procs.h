/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launcher-less process helpers of the bootstrap tests: fork ranks, hand a
 * unique id from one process to the others through a file, reap every child
 * within a deadline (a hung child is killed and counts as failed).
 */
#ifndef MLC_TEST_BOOT_PROCS_H
#define MLC_TEST_BOOT_PROCS_H
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mlcomm.h"

/* Write the id's bytes to path (atomically: a reader sees all of it or nothing). */
static inline int boot_write_id(const char *path, const mlc_unique_id_t *id)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    size_t n = fwrite(id, 1, sizeof *id, f);
    if (fclose(f) != 0 || n != sizeof *id) return -1;
    return rename(tmp, path);
}

/* Wait up to timeout_s for path, then read the id's bytes from it. */
static inline int boot_read_id(const char *path, mlc_unique_id_t *id, double timeout_s)
{
    for (int i = 0; i < (int)(timeout_s * 100); i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, 1, sizeof *id, f);
            fclose(f);
            return n == sizeof *id ? 0 : -1;
        }
        usleep(10000);
    }
    return -1;
}

/* Fork n children running fn(i, arg); returns how many exited non-zero
 * (killed, or still running after timeout_s). */
static inline int boot_run_children(int n, int (*fn)(int i, void *arg), void *arg, double timeout_s)
{
    pid_t pids[64];
    int failed = 0;
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) _exit(fn(i, arg));
        if (pids[i] < 0) return n;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int left = n; left > 0;) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                failed++;
                for (int i = 0; i < n; i++)
                    if (pids[i] == p)
                        fprintf(stderr, "child %d (pid %d) %s %d\n", i, (int)p,
                                WIFEXITED(status) ? "exited with" : "was killed by signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            }
            continue;
        }
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > timeout_s) {
            fprintf(stderr, "children still running after %.0f s: killing them\n", timeout_s);
            for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
            while (waitpid(-1, &status, 0) > 0) failed++;
            break;
        }
        usleep(10000);
    }
    return failed;
}
#endif
