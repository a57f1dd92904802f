/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Control messages on the hidden communicator, {kind, rank, value, uid} as
 * four int64: every rank keeps one receive posted for them (any source, tag
 * ctrl_tag), serviced whenever mlcomm runs on the communicator (progress,
 * health, idle, the start of every operation, and the MPI_Waitany of a
 * blocked wait). A message with another uid was sent to an earlier
 * communicator whose context MPI has reused: it is dropped.
 *  - ABORT: mlc_comm_abort on a peer; fails the communicator here.
 *  - FAILED: the communicator failed on a peer (its wait timed out); fails it
 *    here with that status. Else a late rank's next collective would be
 *    matched by MPI with the one the failed rank left in flight.
 *  - QUERY/REPLY: at a timeout, which ranks have not started the collective
 *    (MPI does not say): the timed-out rank asks, the others answer with the
 *    number of collectives they have started. A rank busy outside mlcomm,
 *    or inside it in one long step (a large local copy, a long MPI call),
 *    cannot answer and is reported as such.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/wait.h"
#include "mpi_impl.h"

#define QUERY_WAIT_S 0.2 /* how long a timed-out rank waits for answers */

static int post_ctrl(mlc_mpi_comm_t *c)
{
    return MPI_Irecv(c->ctrl_msg, MLC_MPI_CTRL_WORDS, MPI_INT64_T, MPI_ANY_SOURCE, c->ctrl_tag, c->hidden,
                     &c->ctrl);
}

mlc_status_t mlc_mpi_ctrl_start(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    for (int i = 0; i < MLC_MPI_REPLIES; i++) c->reply_req[i] = MPI_REQUEST_NULL;
    int rc = post_ctrl(c);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Irecv (control messages)", comm->rank);
    return MLC_SUCCESS;
}

/* A send nobody may ever receive: complete it, cancel it, or leave it to MPI. */
static void finish_send(MPI_Request *r) { mlc_mpi_drop_request(r); }

void mlc_mpi_ctrl_stop(mlc_mpi_comm_t *c)
{
    if (c->ctrl != MPI_REQUEST_NULL) {
        MPI_Cancel(&c->ctrl);
        MPI_Wait(&c->ctrl, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < c->nnotices; i++) finish_send(&c->notices[i]);
    for (int i = 0; i < MLC_MPI_REPLIES; i++) finish_send(&c->reply_req[i]);
}

void mlc_mpi_flush_abort(mlc_mpi_comm_t *c)
{
    /* pending -> sent, once: a communicator is aborted (and its peers told) once. */
    int pending = MLC_MPI_ABORT_PENDING;
    if (!atomic_compare_exchange_strong(&c->abort_pending, &pending, MLC_MPI_ABORT_SENT)) return;
    int p = 0, me = 0;
    MPI_Comm_size(c->hidden, &p);
    MPI_Comm_rank(c->hidden, &me);
    if (c->abort_msg[0] != MLC_MPI_CTRL_FAILED) { /* else mlc_mpi_post_failure filled it */
        c->abort_msg[0] = MLC_MPI_CTRL_ABORT;
        c->abort_msg[2] = 0;
    }
    c->abort_msg[1] = me;
    c->abort_msg[3] = c->uid;
    c->notices = malloc(sizeof *c->notices * (size_t)p);
    if (!c->notices) {
        MLC_WARN("rank %d: out of memory: the peers are not told of mlc_comm_abort", me);
        return;
    }
    /* Everyone, ourselves included: our own notice wakes a wait blocked in MPI. */
    for (int r = 0; r < p; r++)
        if (MPI_Isend(c->abort_msg, MLC_MPI_CTRL_WORDS, MPI_INT64_T, r, c->ctrl_tag, c->hidden,
                      &c->notices[c->nnotices]) == MPI_SUCCESS)
            c->nnotices++;
}

void mlc_mpi_post_failure(mlc_comm_t *comm, mlc_status_t st, const char *note)
{
    (void)note; /* three words travel: the peers name this rank and the status */
    mlc_mpi_comm_t *c = comm->impl;
    int none = MLC_MPI_ABORT_NONE;
    if (!atomic_compare_exchange_strong(&c->abort_pending, &none, MLC_MPI_ABORT_PENDING)) return;
    c->abort_msg[0] = MLC_MPI_CTRL_FAILED;
    c->abort_msg[2] = (int64_t)st;
    /* Called by the thread whose wait failed, which may call MPI. */
    mlc_mpi_flush_abort(c);
}

/* Answer a peer's query with the number of collectives started here. */
static void reply(mlc_comm_t *comm, int to)
{
    mlc_mpi_comm_t *c = comm->impl;
    for (int i = 0; i < MLC_MPI_REPLIES; i++) {
        int done = 1;
        if (c->reply_req[i] != MPI_REQUEST_NULL) MPI_Test(&c->reply_req[i], &done, MPI_STATUS_IGNORE);
        if (!done) continue;
        c->reply_msg[i][0] = MLC_MPI_CTRL_REPLY;
        c->reply_msg[i][1] = comm->rank;
        c->reply_msg[i][2] = (int64_t)c->started;
        c->reply_msg[i][3] = c->uid;
        MPI_Isend(c->reply_msg[i], MLC_MPI_CTRL_WORDS, MPI_INT64_T, to, c->ctrl_tag - 1, c->hidden,
                  &c->reply_req[i]);
        return;
    }
    /* every reply request busy: the asker reports this rank as not answering */
}

mlc_status_t mlc_mpi_ctrl_arrived(mlc_comm_t *comm, int rc)
{
    mlc_mpi_comm_t *c = comm->impl;
    c->ctrl = MPI_REQUEST_NULL;
    if (rc != MPI_SUCCESS) {
        MLC_WARN("rank %d: the control receive failed; remote aborts will not be seen", comm->rank);
    } else if (c->ctrl_msg[3] != c->uid) {
        MLC_DEBUG("rank %d: dropped a control message (kind %lld from rank %lld) sent to an earlier communicator",
                  comm->rank, (long long)c->ctrl_msg[0], (long long)c->ctrl_msg[1]);
        if (post_ctrl(c) != MPI_SUCCESS) c->ctrl = MPI_REQUEST_NULL;
    } else if (c->ctrl_msg[0] == MLC_MPI_CTRL_ABORT) {
        /* not reposted: the communicator is failed for good */
        mlc_core->comm_fail(comm, MLC_ERR_ABORTED, "rank %lld aborted the communicator (mlc_comm_abort)",
                      (long long)c->ctrl_msg[1]);
    } else if (c->ctrl_msg[0] == MLC_MPI_CTRL_FAILED) {
        mlc_status_t st = (mlc_status_t)c->ctrl_msg[2];
        if (st >= 0) st = MLC_ERR_BACKEND; /* a failure, whatever came */
        mlc_core->comm_fail(comm, st, "the communicator failed on rank %lld (%s%s; that rank's message names the "
                            "call and the ranks it waited for): calls in flight here can no longer be matched",
                            (long long)c->ctrl_msg[1], mlc_core->status_name(st),
                            st == MLC_ERR_TIMEOUT ? ": a wait there made no progress for its MLC_TIMEOUT" : "");
    } else {
        if (c->ctrl_msg[0] == MLC_MPI_CTRL_QUERY) reply(comm, (int)c->ctrl_msg[1]);
        if (post_ctrl(c) != MPI_SUCCESS) c->ctrl = MPI_REQUEST_NULL;
    }
    return (mlc_status_t)atomic_load(&comm->failed);
}

mlc_status_t mlc_mpi_check_ctrl(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    /* One thread at a time on the control request (MPI forbids two threads
     * using one request at once): while another holds c (a wait blocked in
     * MPI_Waitany on it, among others), that one services it. */
    if (atomic_flag_test_and_set_explicit(&c->busy, memory_order_acquire))
        return (mlc_status_t)atomic_load(&comm->failed);
    while (c->ctrl != MPI_REQUEST_NULL) {
        int flag = 0;
        int rc = MPI_Test(&c->ctrl, &flag, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !flag) break;
        if (mlc_mpi_ctrl_arrived(comm, rc) != MLC_SUCCESS) break;
    }
    mlc_mpi_unlock(c);
    return (mlc_status_t)atomic_load(&comm->failed);
}

/* Waiting for the answers to a query (base/wait.h). */
typedef struct query_wait {
    mlc_comm_t *comm;
    MPI_Request *rr;
    int all;
} query_wait_t;

static int query_step(void *p)
{
    query_wait_t *w = p;
    mlc_mpi_check_ctrl(w->comm);
    w->all = 1;
    for (int r = 0; r < w->comm->size; r++) {
        int done = 1;
        if (w->rr[r] != MPI_REQUEST_NULL) MPI_Test(&w->rr[r], &done, MPI_STATUS_IGNORE);
        w->all &= done;
    }
    /* An answer is not progress: the query has QUERY_WAIT_S in all. */
    return MLC_WAIT_NOTHING;
}

static int query_done(void *p) { return ((query_wait_t *)p)->all; }

void mlc_mpi_query_peers(const mlc_request_t *req, char *buf, size_t len)
{
    mlc_comm_t *comm = req->comm;
    mlc_mpi_comm_t *c = comm->impl;
    int p = comm->size, me = comm->rank;
    buf[0] = '\0';
    int64_t(*ans)[MLC_MPI_CTRL_WORDS] = calloc((size_t)p, sizeof *ans);
    MPI_Request *rr = malloc(sizeof *rr * 2 * (size_t)p);
    if (!ans || !rr) {
        snprintf(buf, len, "not known (out of memory to ask)");
        goto out;
    }
    MPI_Request *qs = rr + p;
    int64_t q[MLC_MPI_CTRL_WORDS] = {MLC_MPI_CTRL_QUERY, me, (int64_t)req->seq, c->uid};
    for (int r = 0; r < p; r++) {
        rr[r] = qs[r] = MPI_REQUEST_NULL;
        if (r == me) continue;
        MPI_Irecv(ans[r], MLC_MPI_CTRL_WORDS, MPI_INT64_T, r, c->ctrl_tag - 1, c->hidden, &rr[r]);
        MPI_Isend(q, MLC_MPI_CTRL_WORDS, MPI_INT64_T, r, c->ctrl_tag, c->hidden, &qs[r]);
    }
    /* Answer the others' queries while waiting for ours (they may be asking too). */
    query_wait_t qw = {.comm = comm, .rr = rr};
    mlc_wait_t w = {.step = query_step, .done = query_done, .ctx = &qw, .timeout_s = QUERY_WAIT_S,
                    .what = "peer query", .spin_s = -1, .yield_s = -1, .sleep_min_s = 1e-3, .sleep_max_s = 1e-3};
    mlc_wait_run(&w);
    size_t used = 0;
    for (int r = 0; r < p && used + 1 < len; r++) {
        if (r == me) continue;
        bool answered = rr[r] == MPI_REQUEST_NULL && ans[r][3] == c->uid; /* else an earlier communicator's */
        if (!answered) {
            MPI_Cancel(&rr[r]);
            MPI_Wait(&rr[r], MPI_STATUS_IGNORE);
        }
        finish_send(&qs[r]);
        if (answered && ans[r][2] > (int64_t)req->seq) continue; /* it has started this one */
        int n;
        if (!answered)
            n = snprintf(buf + used, len - used,
                         "%s%d (no answer within %g s: outside mlcomm, or inside it in one long step, such as "
                         "a large copy)", used ? ", " : "", r, QUERY_WAIT_S);
        else if (ans[r][2] == 0)
            n = snprintf(buf + used, len - used, "%s%d (no collective started yet)", used ? ", " : "", r);
        else
            n = snprintf(buf + used, len - used, "%s%d (last started collective #%lld)", used ? ", " : "", r,
                         (long long)ans[r][2] - 1);
        if (n > 0) used += (size_t)n < len - used ? (size_t)n : len - used - 1;
    }
    if (!used) snprintf(buf, len, "none (every rank has started it: the wait is inside MPI)");
out:
    free(ans);
    free(rr);
}
