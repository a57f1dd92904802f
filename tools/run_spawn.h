/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting one rank of a job: fork, set the rank's environment, exec. */
#ifndef MLC_TOOLS_RUN_SPAWN_H
#define MLC_TOOLS_RUN_SPAWN_H
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>

typedef struct mlc_run_rank_env {
    int rank, nranks;
    const char *job_id;
    int job_fd; /* inherited by the rank (close-on-exec cleared in the child only) */
    atomic_int *pid_slot; /* the job state's pid[rank]: the child fills it before exec */
    int out_fd, err_fd;   /* the rank's stdout / stderr, -1: the launcher's own */
    int master_port;      /* torch's MASTER_PORT for env:// (a free port on this host), 0: none */
} mlc_run_rank_env_t;

/*
 * Start argv[0] (searched in PATH) as one rank. The child gets its own
 * session (so the launcher can signal the rank's whole process group and a
 * terminal's Ctrl-C reaches only the launcher, which forwards it), dies with
 * the launcher (PR_SET_PDEATHSIG), and runs with `child_mask` as its signal
 * mask. Returns 0 and *pid; -1 if fork failed (errno set); or -2 if the
 * program could not be executed (*exec_errno set, the child already reaped).
 */
int mlc_run_spawn(const mlc_run_rank_env_t *env, char *const argv[], const sigset_t *child_mask,
                  pid_t *pid, int *exec_errno);
#endif
