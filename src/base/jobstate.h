/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job state shared by mlcomm-run and its ranks: one memfd created by the
 * launcher, inherited by every rank, named by MLC_JOB_FD. Nothing of it lives
 * in /dev/shm, so nothing can be left there.
 *
 * The launcher writes dead[r] when rank r ends abnormally (exit != 0 or a
 * signal) and bumps `epoch`; ranks read it in their slow path (at most every
 * ~100 ms while waiting) and fail with MLC_ERR_PEER_LOST naming the rank.
 */
#ifndef MLC_BASE_JOBSTATE_H
#define MLC_BASE_JOBSTATE_H
#include <stdatomic.h>
#include <stdint.h>

#define MLC_JOBSTATE_MAGIC 0x4d4c434bu /* "MLCK" (the layout with swept_id) */
#define MLC_JOBSTATE_MAX_RANKS 4096

/* dead[r] encoding: 0 alive (or exited 0); 0x100 | code = exited with code; 0x200 | sig = killed by sig */
#define MLC_JOB_DEAD_EXIT 0x100u
#define MLC_JOB_DEAD_SIGNAL 0x200u

typedef struct mlc_jobstate {
    uint32_t magic;
    uint32_t nranks;
    atomic_uint epoch;    /* bumped on every change */
    atomic_uint ndead;
    char swept_id[32]; /* the job id whose /dev/shm names the launcher removes when the job ends */
    atomic_int pid[MLC_JOBSTATE_MAX_RANKS];
    atomic_uint dead[MLC_JOBSTATE_MAX_RANKS];
} mlc_jobstate_t;

/* Shared-memory segments of a job are named "/mlc-<job id>-..." so the
 * launcher can sweep any left by ranks killed before they unlinked them. */
#define MLC_SHM_PREFIX "/mlc-"

/* Library side: map the job state named by MLC_JOB_FD (NULL when absent). */
const mlc_jobstate_t *mlc_jobstate_get(void);
/* A value naming the launcher's job state (its memfd's device and inode), the
 * same in every rank of one mlcomm-run job and different in any other job
 * alive at the same time; 0 when there is none. */
uint64_t mlc_jobstate_tag(void);
/* Whether a launcher will remove this job id's names from /dev/shm when the
 * job ends (its job state names that id: a caller may give its own). */
int mlc_jobstate_sweeps(const char *job_id);
/* Start time of process pid (clock ticks since boot, /proc/<pid>/stat field
 * 22); 0 if it cannot be read. With the pid it names one process for good. */
uint64_t mlc_proc_start_time(int pid);
#endif
