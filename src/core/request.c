/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests: a per-communicator pool (no malloc on the small-message path once
 * warm), completion, and the wait every backend shares (the loop itself is
 * base/wait.c). The wait owns the reliability rules: timeout without
 * progress, remote abort and peer death checks at least every ~100 ms,
 * sticky failure; mlc_request_test applies the same ones (stalled()).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "base/clock.h"
#include "base/wait.h"
#include "base/error.h"
#include "base/log.h"
#include "profile.h"

#define MLC_REQ_CHUNK 32
#define MLC_SPIN_SECONDS 0.002     /* spin (yielding when oversubscribed) this long before sleeping */
#define MLC_INLINE_SPINS 64        /* progress calls inline before the shared wait loop */

typedef struct mlc_req_chunk {
    struct mlc_req_chunk *next;
    mlc_request_t reqs[MLC_REQ_CHUNK];
} mlc_req_chunk_t;

mlc_request_t *mlc_request_alloc(mlc_comm_t *comm)
{
    if (!comm->free_reqs) {
        mlc_req_chunk_t *c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->next = comm->req_chunks;
        comm->req_chunks = c;
        for (int i = MLC_REQ_CHUNK - 1; i >= 0; i--) {
            c->reqs[i].next_free = comm->free_reqs;
            comm->free_reqs = &c->reqs[i];
        }
    }
    mlc_request_t *r = comm->free_reqs;
    comm->free_reqs = r->next_free;
    /* Reset only the header; priv is the backend's to initialise, args the caller's to set. */
    r->comm = comm;
    r->coll = 0;
    r->seq = 0;
    r->inside_call = 0;
    r->algo = NULL;
    r->bytes = 0;
    atomic_store_explicit(&r->done, 0, memory_order_relaxed);
    r->status = MLC_SUCCESS;
    r->errmsg[0] = '\0';
    r->t_start = r->t_end = 0;
    r->idle_since = 0;
    r->next_free = NULL;
    r->in_use = true;
    r->priv_ext = NULL;
    r->decor = NULL;
    r->grouped = false;
    r->group_open = false;
    comm->outstanding++;
    return r;
}

void mlc_request_release(mlc_request_t *req)
{
    mlc_comm_t *comm = req->comm;
    if (req->decor) comm->be->release(req);
    req->in_use = false;
    req->next_free = comm->free_reqs;
    comm->free_reqs = req;
    comm->outstanding--;
    /* The communicator was freed while this handle was outstanding: it was the last. */
    if (comm->freed && comm->outstanding == 0) mlc_comm_release(comm);
}

void mlc_comm_free_requests(mlc_comm_t *comm)
{
    mlc_req_chunk_t *c = comm->req_chunks;
    while (c) {
        mlc_req_chunk_t *n = c->next;
        free(c);
        c = n;
    }
    comm->req_chunks = NULL;
    comm->free_reqs = NULL;
}

void mlc_request_complete(mlc_request_t *req, mlc_status_t st, const char *fmt, ...)
{
    req->status = st;
    if (st != MLC_SUCCESS && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(req->errmsg, sizeof req->errmsg, fmt, ap);
        va_end(ap);
    }
    if (req->comm->prof && !req->internal) {
        req->t_end = mlc_now();
        mlc_prof_record(req);
    }
    atomic_store_explicit(&req->done, 1, memory_order_release);
}

/* The failure of req's communicator as req's error, "<req>: <why>": the call
 * that found it names itself. MLC_SUCCESS while the communicator is healthy. */
mlc_status_t mlc_request_comm_failed(const mlc_request_t *req)
{
    int failed = atomic_load(&req->comm->failed);
    if (!failed) return MLC_SUCCESS;
    char what[160];
    mlc_request_describe(req, what, sizeof what);
    return mlc_error((mlc_status_t)failed, "%s: %s", what, req->comm->fail_msg);
}

void mlc_request_describe(const mlc_request_t *req, char *buf, size_t len)
{
    if (req->coll >= MLC_COLL_SEND) {
        char peer[24] = "any source", tag[24] = "any tag";
        if (req->args.root != MLC_ANY_SOURCE) snprintf(peer, sizeof peer, "peer %d", req->args.root);
        if (req->args.tag != MLC_ANY_TAG) snprintf(tag, sizeof tag, "tag %d", req->args.tag);
        snprintf(buf, len, "%s (%s, %s, %zu bytes)", mlc_coll_name(req->coll), peer, tag, req->bytes);
    } else
        snprintf(buf, len, "%s #%llu (%zu bytes%s%s)%s%s", mlc_coll_name(req->coll),
                 (unsigned long long)req->seq, req->bytes, req->algo ? ", algorithm " : "",
                 req->algo ? req->algo : "", req->inside_call ? " inside " : "",
                 req->inside_call ? mlc_comm_call_name(req->inside_call) : "");
}

bool mlc_request_orphan_all(mlc_comm_t *comm)
{
    for (mlc_req_chunk_t *c = comm->req_chunks; c; c = c->next)
        for (int i = 0; i < MLC_REQ_CHUNK; i++) {
            mlc_request_t *r = &c->reqs[i];
            if (!r->in_use || atomic_load_explicit(&r->done, memory_order_acquire)) continue;
            char what[160];
            mlc_request_describe(r, what, sizeof what);
            snprintf(r->errmsg, sizeof r->errmsg, "rank %d: %s was still pending when mlc_comm_free "
                     "freed its communicator; it never completed", comm->rank, what);
            r->status = MLC_ERR_ABORTED;
            atomic_store_explicit(&r->done, 1, memory_order_release);
        }
    comm->freed = true;
    return comm->outstanding == 0;
}

/* Hand the request's outcome to the waiting thread. */
mlc_status_t mlc_request_finish(mlc_request_t *req)
{
    if (req->status == MLC_SUCCESS) return MLC_SUCCESS;
    if (req->errmsg[0]) {
        mlc_error_set_text(req->errmsg);
    } else {
        char what[160];
        mlc_request_describe(req, what, sizeof what);
        mlc_error(req->status, "%s failed: %s", what, mlc_status_string(req->status));
    }
    return req->status;
}

/* The comm failed while req was pending: report the comm's failure on req. */
mlc_status_t mlc_request_fail_pending(mlc_request_t *req, mlc_status_t st)
{
    if (req->comm->be->forget) req->comm->be->forget(req); /* before its buffers go back to the caller */
    char what[160];
    mlc_request_describe(req, what, sizeof what);
    snprintf(req->errmsg, sizeof req->errmsg, "%.150s: %.220s", what, req->comm->fail_msg);
    req->status = st;
    atomic_store_explicit(&req->done, 1, memory_order_release);
    return mlc_request_finish(req);
}

/* What a wait step that moved nothing reports (base/wait.h): poll again,
 * or block now where the backend says polling is futile. */
int mlc_request_idle_step(mlc_comm_t *comm)
{
    return comm->be->polling_futile && comm->be->polling_futile(comm) ? MLC_WAIT_BLOCK_NOW : MLC_WAIT_NOTHING;
}

/* One progress step of the backend. */
mlc_status_t mlc_request_progress(mlc_comm_t *comm, int *progressed)
{
    mlc_status_t st = comm->be->progress(comm, progressed);
    if (*progressed) comm->progress_epoch++;
    return st;
}

static int is_done(const mlc_request_t *req)
{
    return atomic_load_explicit(&req->done, memory_order_acquire);
}

/* MPI with no deadline (MLC_TIMEOUT=0): MPI's own blocking wait, as raw MPI
 * would. Any timeout, the default included, makes the wait a polled one. */
static bool waits_natively(const mlc_request_t *req)
{
    const mlc_comm_t *comm = req->comm;
    return comm->be->wait_native && comm->cfg.timeout_s <= 0 &&
           !(comm->be->keeps_polling && comm->be->keeps_polling(req));
}

/* req's communicator has failed (st). Peers may have finished this call and
 * failed a later one: a call that can still complete does, else it fails. */
static void end_failed(mlc_request_t *req, mlc_status_t st)
{
    int progressed = 0;
    mlc_request_progress(req->comm, &progressed);
    if (!is_done(req)) mlc_request_fail_pending(req, st);
}

/* The communicator's health (remote abort, peer death): when it failed,
 * req is over (a call that can still complete does, else it fails). */
bool mlc_request_sick(mlc_request_t *req)
{
    mlc_comm_t *comm = req->comm;
    int failed = atomic_load(&comm->failed);
    mlc_status_t st = failed ? (mlc_status_t)failed : comm->be->health(comm);
    if (st == MLC_SUCCESS) return false;
    end_failed(req, st);
    return true;
}

/* Nothing moved on req's communicator for `timeout` seconds (MLC_TIMEOUT):
 * fail the communicator (sticky), tell the other members (post_failure),
 * and fail req. */
void mlc_request_time_out(mlc_request_t *req, double timeout)
{
    mlc_comm_t *comm = req->comm;
    const mlc_backend_t *be = comm->be;
    char what[160], peers[160] = "";
    mlc_request_describe(req, what, sizeof what);
    if (be->pending_peers) be->pending_peers(req, peers, sizeof peers);
    char note[512];
    snprintf(note, sizeof note, "%.160s on rank %d made no progress for %g s (MLC_TIMEOUT); ranks not "
             "heard from: %.160s", what, comm->rank, timeout, peers[0] ? peers : "unknown");
    mlc_comm_fail(comm, MLC_ERR_TIMEOUT, "rank %d: %s made no progress for %g s (MLC_TIMEOUT); ranks not "
                  "heard from: %s", comm->rank, what, timeout, peers[0] ? peers : "unknown");
    if (be->post_failure) be->post_failure(comm, MLC_ERR_TIMEOUT, note);
    mlc_request_fail_pending(req, MLC_ERR_TIMEOUT);
}

/*
 * The checks of a test that found nothing to do: the communicator's health,
 * then the deadline: MLC_TIMEOUT seconds in which no progress call on the
 * communicator moved anything. *idle_since (0: not idle yet) and *idle_epoch
 * are the request's idle clock across mlc_request_test calls. Returns true
 * when req is over (its status set: finish() reports it), false to go on.
 */
static bool stalled(mlc_request_t *req, double now, double *idle_since, uint64_t *idle_epoch)
{
    mlc_comm_t *comm = req->comm;
    if (*idle_since == 0 || *idle_epoch != comm->progress_epoch) {
        *idle_since = now;
        *idle_epoch = comm->progress_epoch;
    }
    if (mlc_request_sick(req)) return true;
    if (is_done(req)) return true;
    double timeout = waits_natively(req) ? 0 : comm->cfg.timeout_s;
    if (timeout > 0 && now - *idle_since > timeout) {
        mlc_request_time_out(req, timeout);
        return true;
    }
    return false;
}

/* A blocking wait on one request, as the shared wait loop sees it (base/wait.h). */
typedef struct req_wait {
    mlc_request_t *req;
    mlc_status_t st;     /* a progress call's failure */
    uint64_t epoch;      /* the communicator's progress epoch last seen */
} req_wait_t;

static int req_step(void *p)
{
    req_wait_t *w = p;
    mlc_comm_t *comm = w->req->comm;
    int progressed = 0;
    mlc_status_t st = mlc_request_progress(comm, &progressed);
    if (st != MLC_SUCCESS) {
        w->st = st;
        return MLC_WAIT_STOP;
    }
    if (progressed) {
        w->epoch = comm->progress_epoch;
        return MLC_WAIT_MOVED;
    }
    /* Another thread's progress on this communicator counts too. */
    if (comm->progress_epoch != w->epoch) {
        w->epoch = comm->progress_epoch;
        return MLC_WAIT_MOVED_ELSEWHERE;
    }
    return mlc_request_idle_step(comm);
}

static int req_done(void *p) { return is_done(((req_wait_t *)p)->req); }

static int req_check(void *p) { return mlc_request_sick(((req_wait_t *)p)->req); }

static int req_block(void *p, double max_s)
{
    req_wait_t *w = p;
    mlc_comm_t *comm = w->req->comm;
    if (!comm->be->idle) return 0;
    comm->be->idle(comm, max_s); /* e.g. the engine's doorbell futex */
    return 1;
}

mlc_status_t mlc_request_wait_internal(mlc_request_t *req)
{
    mlc_comm_t *comm = req->comm;
    const mlc_backend_t *be = comm->be;
    if (is_done(req)) return mlc_request_finish(req);
    int failed = atomic_load(&comm->failed);
    if (failed) {
        end_failed(req, failed);
        return mlc_request_finish(req);
    }

    if (waits_natively(req)) {
        mlc_status_t st = be->wait_native(req);
        if (st != MLC_SUCCESS && !is_done(req)) return st;
        return mlc_request_finish(req);
    }

    /* The first progress calls inline: a small operation's peers usually
     * arrive within them, and the 8-byte path pays no indirect calls. */
    for (int i = 0; i < MLC_INLINE_SPINS; i++) {
        int progressed = 0;
        mlc_status_t st = mlc_request_progress(comm, &progressed);
        if (is_done(req)) return mlc_request_finish(req);
        if (st != MLC_SUCCESS) {
            failed = atomic_load(&comm->failed);
            return mlc_request_fail_pending(req, failed ? failed : st);
        }
        if (!progressed && mlc_request_idle_step(comm) == MLC_WAIT_BLOCK_NOW) break;
    }
    /* Then the shared loop: spin a couple of milliseconds, then sleep in
     * the backend's idle (waking a sleeper costs a scheduler round trip,
     * which on a loaded or oversubscribed host is milliseconds), with the
     * health checks and the no-progress deadline before every sleep. */
    req_wait_t rw = {.req = req, .st = MLC_SUCCESS, .epoch = comm->progress_epoch};
    mlc_wait_t w = {.step = req_step, .done = req_done, .check = req_check, .block = req_block, .ctx = &rw,
                    .timeout_s = comm->cfg.timeout_s, .what = "request",
                    .spin_s = MLC_SPIN_SECONDS, .yield_s = -1, .sleep_min_s = 20e-6, .sleep_max_s = 2e-4};
    switch (mlc_wait_run(&w)) {
    case MLC_WAIT_DONE: break;
    case MLC_WAIT_STOPPED:
        if (!is_done(req)) {
            failed = atomic_load(&comm->failed);
            return mlc_request_fail_pending(req, failed ? failed : rw.st);
        }
        break;
    case MLC_WAIT_TIMEOUT: mlc_request_time_out(req, comm->cfg.timeout_s); break;
    }
    return mlc_request_finish(req);
}

/* A grouped operation starts for good at mlc_group_end (on nccl it is not
 * even enqueued before): waiting for it earlier could never end. */
static mlc_status_t group_still_open(const char *fn, const mlc_request_t *req)
{
    char what[160];
    mlc_request_describe(req, what, sizeof what);
    return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s belongs to a group that is still open: call "
                     "mlc_group_end first (grouped operations complete only after it)", fn, what);
}

mlc_status_t mlc_request_wait(mlc_request_t **preq)
{
    mlc_error_clear();
    if (!preq) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_request_wait: req is NULL");
    mlc_request_t *req = *preq;
    if (!req) return MLC_SUCCESS;
    if (!req->in_use) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_request_wait: request was already released");
    if (req->group_open) return group_still_open("mlc_request_wait", req);
    mlc_status_t st = mlc_request_wait_internal(req);
    mlc_request_release(req);
    *preq = NULL;
    return st;
}

mlc_status_t mlc_request_test(mlc_request_t **preq, int *done)
{
    mlc_error_clear();
    if (!preq || !done) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_request_test: %s is NULL", preq ? "done" : "req");
    mlc_request_t *req = *preq;
    if (!req) {
        *done = 1;
        return MLC_SUCCESS;
    }
    if (!req->in_use) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_request_test: request was already released");
    if (req->group_open) return group_still_open("mlc_request_test", req);
    mlc_comm_t *comm = req->comm;
    if (!is_done(req)) {
        int progressed = 0;
        mlc_status_t st = mlc_request_progress(comm, &progressed);
        int failed = atomic_load(&comm->failed);
        if (is_done(req)) {
            /* completed: report it below */
        } else if (st != MLC_SUCCESS || failed) {
            mlc_request_fail_pending(req, failed ? failed : st);
        } else if (progressed) {
            req->idle_since = 0;
            *done = 0;
            return MLC_SUCCESS;
        } else if (!stalled(req, mlc_now(), &req->idle_since, &req->idle_epoch)) {
            /* Nothing moved: the same checks and deadline as a blocking wait,
             * the idle clock kept in req across calls. */
            *done = 0;
            return MLC_SUCCESS;
        }
    }
    mlc_status_t st = mlc_request_finish(req);
    mlc_request_release(req);
    *preq = NULL;
    *done = 1;
    return st;
}

mlc_status_t mlc_request_wait_all(size_t n, mlc_request_t **reqs, mlc_status_t *statuses)
{
    mlc_error_clear();
    if (n > 0 && !reqs) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_request_wait_all: reqs is NULL with n = %zu", n);
    mlc_status_t first = MLC_SUCCESS;
    char first_msg[512] = "";
    for (size_t i = 0; i < n; i++) {
        mlc_status_t st = mlc_request_wait(&reqs[i]);
        if (statuses) statuses[i] = st;
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            first = st;
            snprintf(first_msg, sizeof first_msg, "request %zu of %zu: %s", i, n, mlc_last_error());
        }
    }
    if (first != MLC_SUCCESS) mlc_error_set_text(first_msg);
    return first;
}
