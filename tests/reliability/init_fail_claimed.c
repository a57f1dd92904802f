/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two ranks' shm init fails at about the same time; the one that claims the
 * failure in the rendezvous record stops before it has published it (a
 * SIGSTOP, or a descheduling, between the claim and the report). The other
 * must still fail its init with an error of its own, never return success
 * without a communicator (it used to: its init went on into the first
 * collective on a communicator the backend never made, and crashed).
 *
 * Three ranks started by hand (no launcher), rank 2 never: rank 0 (MLC_TIMEOUT
 * 1 s) times out first, claims the failure and stops there
 * (MLC_FAULT_INIT=0:failure-claimed:stop); rank 1 (MLC_TIMEOUT 3 s) times
 * out later and must report a failure. Then rank 0 is killed.
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

static pid_t start_rank(int rank, const char *timeout, const char *job)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0); /* a stopped rank must not get the SIGHUP of an orphaned group */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    hand_rank_env(rank, 3, job, timeout, "0:failure-claimed:stop");
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st == MLC_SUCCESS) {
        fprintf(stderr, "rank %d: mlc_comm_init succeeded, though rank 2 never started\n", rank);
        _exit(2);
    }
    fprintf(stderr, "rank %d: mlc_comm_init failed as it should: %s: %s\n", rank, mlc_status_name(st),
            mlc_last_error());
    _exit(0);
}

int main(void)
{
    char job[64];
    snprintf(job, sizeof job, "claimed-%d-%ld", (int)getpid(), (long)time(NULL));
    pid_t r0 = start_rank(0, "1", job), r1 = start_rank(1, "3", job);
    int ws = reap_within(r1, 30);
    int failed = 0;
    if (ws == -1) {
        fprintf(stderr, "FAIL: rank 1 did not end within 30 s\n");
        kill(r1, SIGKILL);
        waitpid(r1, NULL, 0);
        failed = 1;
    } else if (WIFSIGNALED(ws)) {
        fprintf(stderr, "FAIL: rank 1 ended by signal %d (%s)\n", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
        failed = 1;
    } else if (WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "FAIL: rank 1 exited with code %d\n", WEXITSTATUS(ws));
        failed = 1;
    }
    /* Rank 0 is stopped at its claim (or, had it not claimed, failed on its own). */
    kill(r0, SIGKILL);
    waitpid(r0, NULL, 0);
    if (!failed) printf("ok: rank 1 failed its init with an error\n");
    return failed;
}
