/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm rendezvous (docs/ENGINE.md "Segment"): how the ranks of one job
 * find each other's segment without a launcher, and how they learn of each
 * other's failures and deaths during init.
 *
 * Rank 0 creates a small rendezvous object under a predictable name
 * (/mlc-<job id>-<n>, else /mlc-<job id>-<n>.<k> for k = 1..15) holding the
 * job's tag, its own pid and start time, a random nonce and one pid entry per
 * rank. The segment itself is /mlc-<job id>-<n>-<nonce>: nobody can predict
 * it. Other ranks open the rendezvous, check owner, size and tag, claim their
 * entry, wait for the segment and read its name from the nonce.
 */
#ifndef MLC_SHM_RENDEZVOUS_H
#define MLC_SHM_RENDEZVOUS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "mlcomm.h"

typedef struct shm_rdv_rec shm_rdv_rec_t;

typedef struct shm_rdv_proc {
    int32_t pid;
    uint32_t pad;
    uint64_t start;
} shm_rdv_proc_t;

typedef struct shm_rdv {
    char name[160];     /* the rendezvous object */
    char seg_name[224]; /* the segment (carries the nonce) */
    const char *job_id;
    int rank, n;
    shm_rdv_rec_t *rec; /* mapped once created or joined */
    size_t rec_bytes;
    dev_t dev;
    ino_t ino;
    bool use_jobstate; /* mlcomm-run's job state tells of deaths too */
    uint64_t tag;      /* the launch's tag, or 0: its process lineage tells */
    uint32_t chain_len;
    shm_rdv_proc_t chain[16]; /* this process and its ancestors */
    double next_pid_check;
    mlc_status_t wait_st; /* a failure seen while waiting (shm_rdv_wait_ready) */
} shm_rdv_t;

/* Rank 0: create the rendezvous (choosing a free name); others: find it and
 * claim their entry. The tag names the launch (mlcomm-run's job state, a
 * unique id); 0: the launch is told by process lineage (docs/ENGINE.md). */
mlc_status_t shm_rdv_open(shm_rdv_t *v, const char *job_id, unsigned counter, int rank, int n, uint64_t tag,
                          bool use_jobstate, double timeout_s);
/* Rank 0: the segment is formatted; others may open v->seg_name. */
void shm_rdv_publish(shm_rdv_t *v);
/* Ranks > 0: wait until rank 0 published the segment (or init failed).
 * timeout_s: MLC_TIMEOUT for this step (each init step is progress). */
mlc_status_t shm_rdv_wait_ready(shm_rdv_t *v, double timeout_s);
/* A failure published by another rank, or a rank of the job gone. */
mlc_status_t shm_rdv_check(shm_rdv_t *v);
/* This rank's init failed with st (mlc_last_error() says why): publish it to
 * every rank, leave, and remove the names when the last rank leaves. Returns
 * the failure to report: the first one published (the cause), else st. */
mlc_status_t shm_rdv_fail(shm_rdv_t *v, mlc_status_t st);
/* Every rank attached: rank 0 removes both names. */
void shm_rdv_unlink(shm_rdv_t *v);
/* End of init, either way. */
void shm_rdv_close(shm_rdv_t *v);

/* 1 and a reason when process pid no longer runs (gone or a zombie). */
int shm_pid_gone(pid_t pid, char *why, size_t len);
/* mlcomm-run's dead[] code as text. */
int shm_describe_dead(unsigned code, char *why, size_t len);
/* MLC_FAULT_INIT=R:POINT (testing only): rank R SIGKILLs itself at POINT;
 * R:POINT:stop, SIGSTOPs itself there. (0:format: see shm.c.) */
void shm_fault_point(int rank, const char *point);
/* Whether MLC_FAULT_INIT names rank `rank` and `point` (a fault that is not a signal). */
bool shm_fault_named(int rank, const char *point);
#endif
