/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A simulated transport for the executor: all p ranks live in one thread,
 * messages wait in an in-memory mailbox keyed by (source, destination, tag),
 * and sim_run progresses every rank's executor round robin until all are
 * done. Protocol errors (two outstanding messages with the same key, a size
 * mismatch, a message to oneself, anything left over at the end) are
 * counted and described.
 */
#ifndef MLC_ALGOS_SIM_H
#define MLC_ALGOS_SIM_H
#include <stdbool.h>
#include "algos/exec.h"

typedef struct sim_opts {
    /* Sends complete only when a matching receive took the data, which is
     * read from the send buffer at that moment (single-copy); otherwise
     * isend copies the data and completes at once (eager). */
    bool rendezvous;
    unsigned seed;     /* test() sometimes reports "pending" for a completable op */
    long fail_send_at; /* 1-based: this isend fails with PEER_LOST; 0 = never */
    long fail_test_at; /* 1-based: this test of a pending op fails with TIMEOUT; 0 = never */
} sim_opts_t;

typedef struct sim_world sim_world_t;

extern const mlc_transport_t sim_transport;
sim_world_t *sim_create(int p, sim_opts_t opts);
/* The transport context of one rank. */
void *sim_tp(sim_world_t *w, int rank);
/*
 * Progress x[0..p-1] until all complete. Returns 0, the first negative
 * status an executor reports (done[] says which finished), or
 * MLC_ERR_INTERNAL on deadlock (nothing moved in a whole pass; msg then
 * names every rank's pending peers).
 */
int sim_run(sim_world_t *w, mlc_exec_t **x, bool *done, char *msg, size_t len);
/* Protocol errors so far (a leftover message counts once sim_finish ran). */
int sim_errors(const sim_world_t *w);
const char *sim_last_problem(const sim_world_t *w);
/* Count messages and receives still outstanding as errors. */
void sim_finish(sim_world_t *w);
long sim_isend_count(const sim_world_t *w);
void sim_destroy(sim_world_t *w);
#endif
