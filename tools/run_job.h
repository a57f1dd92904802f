/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-run's side of the job state (src/base/jobstate.h): the memfd the
 * ranks inherit, the peer-death flags, and the sweep of /dev/shm entries a
 * job left behind.
 */
#ifndef MLC_TOOLS_RUN_JOB_H
#define MLC_TOOLS_RUN_JOB_H
#include <stddef.h>
#include "base/jobstate.h"

typedef struct mlc_run_job {
    int fd;                /* memfd, close-on-exec in the launcher */
    mlc_jobstate_t *state; /* shared mapping of fd */
    char id[17];           /* 16 random hex digits */
} mlc_run_job_t;

/* Create the job state for nranks ranks and a fresh random id.
 * Returns 0, or -1 with a message in err. */
int mlc_run_job_create(int nranks, mlc_run_job_t *job, char *err, size_t errlen);
void mlc_run_job_destroy(mlc_run_job_t *job);

/* Flag rank r dead for its peers from its wait status (exit != 0 or a
 * signal); a clean exit (status 0) flags nothing. */
void mlc_run_job_mark_dead(mlc_run_job_t *job, int rank, int wait_status);

/* Unlink every /dev/shm entry named mlc-<id>-* (and sem.mlc-<id>-*, left by
 * named semaphores). Returns how many were removed, or -1 if /dev/shm could
 * not be read. */
int mlc_run_job_sweep_shm(const mlc_run_job_t *job);
#endif
