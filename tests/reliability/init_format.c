/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ranks of one job built from different mlcomm versions: rank 0 makes the
 * shared segment and, through MLC_FAULT_INIT=0:format, marks it with another
 * build's format word. Rank 1 must refuse it at once with MLC_ERR_MISMATCH
 * naming both format words, and rank 0 must fail its init too, both long
 * before MLC_TIMEOUT (60 s): nobody waits for a peer that can never attach.
 *
 * Two ranks started by hand (no launcher).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mlcomm.h"
#include "hand_ranks.h"

/* Exit codes of a rank: 0 failed as expected, 2 init succeeded, 3 wrong status, 4 wrong message. */
static pid_t start_rank(int rank, const char *job)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    hand_rank_env(rank, 2, job, "60", "0:format");
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st == MLC_SUCCESS) {
        fprintf(stderr, "rank %d: mlc_comm_init succeeded on a segment of another format\n", rank);
        _exit(2);
    }
    const char *msg = mlc_last_error();
    fprintf(stderr, "rank %d: mlc_comm_init failed: %s: %s\n", rank, mlc_status_name(st), msg);
    if (rank == 1 && st != MLC_ERR_MISMATCH) _exit(3);
    if (rank == 1 && (!strstr(msg, "another build") || !strstr(msg, "format word"))) _exit(4);
    _exit(0);
}

static int check(int rank, pid_t pid)
{
    int ws = reap_within(pid, 30);
    if (ws == -1) {
        fprintf(stderr, "FAIL: rank %d did not end within 30 s (MLC_TIMEOUT is 60)\n", rank);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    if (WIFSIGNALED(ws)) {
        fprintf(stderr, "FAIL: rank %d ended by signal %d (%s)\n", rank, WTERMSIG(ws), strsignal(WTERMSIG(ws)));
        return 1;
    }
    if (WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "FAIL: rank %d exited with code %d\n", rank, WEXITSTATUS(ws));
        return 1;
    }
    return 0;
}

int main(void)
{
    char job[64];
    snprintf(job, sizeof job, "format-%d-%ld", (int)getpid(), (long)time(NULL));
    pid_t r0 = start_rank(0, job), r1 = start_rank(1, job);
    int failed = check(1, r1);
    failed |= check(0, r0);
    if (!failed) printf("ok: both ranks refused the segment of another format\n");
    return failed;
}
