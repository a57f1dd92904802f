/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backend-table entries shared by `threads` and `shm`: communicators over
 * an endpoint, operations as active entries advanced by the progress pass,
 * collectives as src/algos schedules over the engine's point-to-point.
 */
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algos/select.h"
#include "core/backend.h"
#include "base/clock.h"
#include "base/dtype.h"
#include "engine.h"
#include "base/error.h"
#include "base/log.h"
#include "base/op_failure.h"

mlc_status_t eng_async_begin(eng_ep_t *ep);          /* endpoint.c */
void eng_op_cancel(eng_ep_t *ep, eng_op_t *op);      /* p2p.c */
int eng_p2p_progress(eng_ep_t *ep);                  /* p2p.c */

/* Per-request engine state, kept in req->priv (no malloc on the small path). */
typedef struct eng_req {
    eng_coll_t entry;
    eng_op_t *ops[2];
    int nops;
    bool is_direct;
    eng_direct_t direct;
    mlc_sig_t sig; /* collectives: the call, compared with every peer's before data moves */
} eng_req_t;

_Static_assert(sizeof(eng_req_t) <= MLC_REQ_PRIV_BYTES, "engine request state must fit in req->priv");

static eng_req_t *req_state(const mlc_request_t *req)
{
    return (eng_req_t *)(void *)req->priv;
}

/* ---- the executor's transport: the communicator's internal context -------- */
/* tp is the request's engine state: every step carries its call's signature. */

static mlc_status_t t_isend(void *tp, int peer, uint64_t tag, const void *buf, size_t bytes, void **h)
{
    eng_req_t *rs = tp;
    eng_comm_t *ec = rs->entry.ec;
    return eng_isend(ec, ec->ctx + 1, peer, tag, buf, bytes, NULL, &rs->sig, (eng_op_t **)h);
}

static mlc_status_t t_irecv(void *tp, int peer, uint64_t tag, void *buf, size_t bytes, void **h)
{
    eng_req_t *rs = tp;
    eng_comm_t *ec = rs->entry.ec;
    return eng_irecv(ec, ec->ctx + 1, peer, tag, false, buf, bytes, NULL, &rs->sig, (eng_op_t **)h);
}

static int t_test(void *tp, void *h)
{
    eng_comm_t *ec = ((eng_req_t *)tp)->entry.ec;
    eng_op_t *op = h;
    if (!op->done) return 0;
    mlc_status_t st = op->status;
    if (st != MLC_SUCCESS) mlc_error(st, "%s", op->err);
    eng_op_put(ec->ep, op);
    return st == MLC_SUCCESS ? 1 : st;
}

/* The engine's cancel is final: a cancelled op never touches its buffer again
 * (a peer reading it by single copy meanwhile gets EFAULT at worst). */
static bool t_cancel(void *tp, void *h)
{
    eng_comm_t *ec = ((eng_req_t *)tp)->entry.ec;
    eng_op_cancel(ec->ep, h);
    return true;
}

static const mlc_transport_t eng_transport = {t_isend, t_irecv, t_test, t_cancel};

/* ---- active entries --------------------------------------------------------- */

static void entry_add(eng_ep_t *ep, eng_coll_t *e)
{
    e->next = ep->colls;
    ep->colls = e;
    atomic_fetch_add_explicit(&e->ec->in_flight, 1, memory_order_relaxed);
}

static void entry_remove(eng_ep_t *ep, eng_coll_t *e)
{
    for (eng_coll_t **pp = &ep->colls; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            return;
        }
}

/* The end of an entry's work on ec, once its request is complete (which may
 * free the entry: the caller kept ec). */
static void entry_done(eng_comm_t *ec)
{
    atomic_fetch_sub_explicit(&ec->in_flight, 1, memory_order_release);
}

static void report_msg_status(mlc_request_t *req, eng_comm_t *ec, const eng_op_t *op)
{
    mlc_msg_status_t *ms = req->args.msg_status;
    if (!ms) return;
    ms->source = ec->comm_of[op->src_world];
    ms->tag = (int)op->rtag;
    ms->bytes = op->got;
}

/* msg without a leading "rank R: " of this rank (a failure of the
 * communicator it posted), which the call's own prefix says again. */
static const char *without_own_rank(const mlc_request_t *req, const char *msg)
{
    char own[24];
    int n = snprintf(own, sizeof own, "rank %d: ", req->comm->rank);
    return strncmp(msg, own, (size_t)n) == 0 ? msg + n : msg;
}

static void complete(eng_ep_t *ep, mlc_request_t *req, mlc_status_t st, const char *msg)
{
    if (!req->blocking) ep->async_pending--;
    /* Failed with its communicator: its buffers go back to the caller, so
     * peers' reads of them in place must be over (eng_readers_drain). */
    if (st != MLC_SUCCESS && eng_fail_posted(req_state(req)->entry.ec)) eng_readers_drain(ep);
    char what[160];
    if (st != MLC_SUCCESS) mlc_request_describe(req, what, sizeof what);
    if (st == MLC_SUCCESS) {
        mlc_request_complete(req, st, NULL);
    } else if (st == MLC_ERR_MISMATCH && req->coll < MLC_COLL_SEND) {
        /* The message names both calls; every other member fails with it too. */
        eng_fail_comm(req_state(req)->entry.ec, st, msg);
        mlc_request_complete(req, st, "%s", msg);
    } else if (strncmp(msg, what, strlen(what)) == 0) { /* names this call already (mlc_request_comm_failed) */
        mlc_request_complete(req, st, "%s", msg);
    } else if (req->coll >= MLC_COLL_SEND) { /* point-to-point calls have no call number: peer and tag */
        mlc_request_complete(req, st, "rank %d: %s: %s", req->comm->rank, what, without_own_rank(req, msg));
    } else {
        mlc_request_complete(req, st, "rank %d: %s #%llu: %s", req->comm->rank, mlc_coll_name(req->coll),
                             (unsigned long long)req->seq, without_own_rank(req, msg));
    }
    eng_wake(ep, ep->wrank); /* a user thread may sleep on our doorbell waiting for this */
}

static bool runs_user_op(const mlc_request_t *req)
{
    return req->coll < MLC_COLL_SEND && req->args.op >= MLC_OP_BUILTIN_COUNT;
}

/* The status a collective that ended with rc (> 0 done, < 0 failed, msg
 * saying why) returns. One with a user op fails when a member posted a
 * failure: a member whose op failed posted it before anything the op
 * computed left that member (user_op_failed), so this rank's result may
 * hold what the failed op left. */
static mlc_status_t ended_status(const mlc_request_t *req, eng_comm_t *ec, int rc, char *msg, size_t len)
{
    if (rc < 0) return (mlc_status_t)rc;
    if (!runs_user_op(req) || !eng_fail_posted(ec)) return MLC_SUCCESS;
    mlc_status_t st = eng_fail_adopt(ec);
    snprintf(msg, len, "%.380s", ec->comm->fail_msg);
    return st != MLC_SUCCESS ? st : MLC_ERR_INTERNAL;
}

/* Advance one entry; 1 if it moved. Removes it when complete. */
static int entry_step(eng_ep_t *ep, eng_coll_t *e)
{
    mlc_request_t *req = e->req;
    eng_req_t *rs = req_state(req);
    if (rs->is_direct) {
        int moved = 0;
        int rc = eng_direct_progress(req, &rs->direct, &moved);
        if (rc == 0) return moved;
        char msg[384];
        snprintf(msg, sizeof msg, "%s", rc < 0 ? mlc_last_error() : "");
        eng_comm_t *ec = e->ec;
        mlc_status_t st = ended_status(req, ec, rc, msg, sizeof msg);
        if (st == MLC_SUCCESS) mlc_sig_copy(&ec->done_sig, &rs->sig);
        entry_remove(ep, e);
        complete(ep, req, st, msg);
        entry_done(ec);
        return 1;
    }
    if (e->exec) {
        int progressed = 0;
        int rc = mlc_exec_progress(e->exec, &eng_transport, rs, &progressed);
        if (rc == 0) return progressed;
        char msg[384];
        snprintf(msg, sizeof msg, "%s", rc < 0 ? mlc_last_error() : "");
        mlc_exec_destroy(e->exec, &eng_transport, rs);
        e->exec = NULL;
        eng_comm_t *ec = e->ec;
        mlc_status_t st = ended_status(req, ec, rc, msg, sizeof msg);
        if (st == MLC_SUCCESS) mlc_sig_copy(&ec->done_sig, &rs->sig);
        entry_remove(ep, e);
        complete(ep, req, st, msg);
        entry_done(ec);
        return 1;
    }
    for (int i = 0; i < rs->nops; i++)
        if (!rs->ops[i]->done) return 0;
    mlc_status_t st = MLC_SUCCESS;
    char msg[sizeof rs->ops[0]->err] = "";
    for (int i = 0; i < rs->nops; i++) {
        eng_op_t *op = rs->ops[i];
        if (!op->is_send) report_msg_status(req, e->ec, op);
        if (op->status != MLC_SUCCESS && st == MLC_SUCCESS) {
            st = op->status;
            snprintf(msg, sizeof msg, "%s", op->err);
        }
        eng_op_put(ep, op);
    }
    rs->nops = 0;
    eng_comm_t *ec = e->ec;
    entry_remove(ep, e);
    complete(ep, req, st, msg);
    entry_done(ec);
    return 1;
}

/* A user op of req failed on this rank, inside the op (op_failure.h): post
 * it to the other members now, before anything the op computed leaves this
 * rank; a member that reads it later sees the failure first (ended_status). */
static void user_op_failed(void *arg, const char *why)
{
    mlc_request_t *req = arg;
    char msg[384], note[384];
    snprintf(msg, sizeof msg, "rank %d: its user op failed: %.300s", req->comm->rank, why);
    snprintf(note, sizeof note, "rank %d's user op failed in %s #%llu: %.300s", req->comm->rank,
             mlc_coll_name(req->coll), (unsigned long long)req->seq, why);
    eng_fail_comm_note(req->comm->impl, MLC_ERR_USER_OP, msg, note);
}

static int entry_progress(eng_ep_t *ep, eng_coll_t *e)
{
    if (!runs_user_op(e->req)) return entry_step(ep, e);
    mlc_op_scope_t scope = {.fail = user_op_failed, .arg = e->req};
    mlc_op_scope_enter(&scope);
    int moved = entry_step(ep, e);
    mlc_op_scope_leave(&scope);
    return moved;
}

int eng_progress_locked(eng_ep_t *ep)
{
    int moved = eng_p2p_progress(ep);
    eng_coll_t *e = ep->colls;
    while (e) {
        eng_coll_t *next = e->next; /* e may be removed */
        moved |= entry_progress(ep, e);
        e = next;
    }
    return moved;
}

/* Register a started request and give it a first push. Lock held. */
static mlc_status_t activate(eng_ep_t *ep, mlc_request_t *req)
{
    eng_req_t *rs = req_state(req);
    /* A peer's message of this call under another signature, or a late one of
     * a call this rank completed without it, arrived before this call began. */
    char msg[384];
    if (req->coll < MLC_COLL_SEND) eng_p2p_progress(ep); /* such a message shows up here at the latest */
    if (ep->ux_head && req->coll < MLC_COLL_SEND && eng_ux_mismatch(rs->entry.ec, &rs->sig, msg, sizeof msg)) {
        eng_fail_comm(rs->entry.ec, MLC_ERR_MISMATCH, msg);
        return mlc_error(MLC_ERR_MISMATCH, "%s", msg);
    }
    if (!req->blocking) {
        mlc_status_t st = eng_async_begin(ep);
        if (st != MLC_SUCCESS) return st;
    }
    entry_add(ep, &rs->entry);
    entry_progress(ep, &rs->entry);
    return MLC_SUCCESS;
}

/* ---- start slots -------------------------------------------------------------- */

static mlc_status_t start_coll_as(mlc_request_t *req);

/* A forced algorithm that cannot take this call (size, op, missing single
 * copy) gives way to the selector's choice; the profiler records what ran. */
mlc_status_t eng_start_coll(mlc_request_t *req)
{
    mlc_status_t st = start_coll_as(req);
    if (st != MLC_ERR_UNSUPPORTED || req->comm->algo_forced[req->coll] == NULL) return st;
    const char *fallback = mlc_request_default_algo(req);
    if (!fallback || (req->algo && strcmp(fallback, req->algo) == 0)) return st;
    MLC_DEBUG("rank %d: %s #%llu: forced algorithm '%s' cannot run it (%s); using '%s'", req->comm->rank,
              mlc_coll_name(req->coll), (unsigned long long)req->seq, req->algo, mlc_last_error(), fallback);
    mlc_error_clear();
    req->algo = fallback;
    return start_coll_as(req);
}

/* The engine state of a collective: its entry and its signature. */
static void coll_state_init(eng_req_t *rs, mlc_request_t *req, eng_comm_t *ec)
{
    memset(rs, 0, offsetof(eng_req_t, sig));
    rs->entry.req = req;
    rs->entry.ec = ec;
    mlc_sig_of(req->comm, req->coll, &req->args, req->seq, &rs->sig);
}

/* A blocking quick-path op (payload of a cache line or four) on a
 * communicator with nothing else in flight first tries once without the
 * endpoint's lock: a broadcast root, or a rank whose peers announced the op
 * already, completes at once. Nothing else touches this communicator's
 * direct state meanwhile: its calls come from one thread at a time, and
 * with nothing of it in flight the progress thread has none of it. The lock's
 * atomic instructions were the costliest part of such an op (each waits
 * until the op's announcement has left the core: 2 ranks, 8-byte broadcast
 * 0.18 -> 0.17 us). Anything else (a wait, a failure) takes the locked
 * path from where this left off.
 *
 * Only while nothing has come in that the locked path would look at first:
 * activate searches the messages that arrived for one of an earlier call
 * under another signature, which is how calls that both ran as schedules
 * and disagreed are caught (both ranks scatterv's root: each only sent). */
static bool quick_without_lock(mlc_request_t *req, eng_req_t *rs)
{
    eng_comm_t *ec = req->comm->impl;
    if (!req->blocking || !rs->direct.quick || runs_user_op(req) ||
        atomic_load_explicit(&ec->in_flight, memory_order_acquire) != 0 ||
        !eng_p2p_quiet(ec->ep))
        return false;
    int moved = 0;
    if (eng_direct_progress(req, &rs->direct, &moved) <= 0) return false;
    mlc_sig_copy(&ec->done_sig, &rs->sig);
    mlc_request_complete(req, MLC_SUCCESS, NULL);
    return true;
}

static mlc_status_t start_coll_as(mlc_request_t *req)
{
    eng_comm_t *ec = req->comm->impl;
    eng_ep_t *ep = ec->ep;
    eng_req_t *rs = req_state(req);
    /* A failure another member posted: this call must not start (its peers may be gone from it). */
    if (eng_fail_posted(ec)) return eng_fail_adopt(ec) != MLC_SUCCESS ? mlc_request_comm_failed(req) : MLC_ERR_INTERNAL;
    coll_state_init(rs, req, ec);
    uint64_t hash = mlc_sig_hash(&rs->sig);
    if (ec->slots) eng_board_post(ec, &rs->sig, hash);
    if (req->algo == eng_direct_name || (req->algo && strcmp(req->algo, eng_direct_name) == 0)) {
        rs->is_direct = true;
        mlc_status_t st = eng_direct_start(req, &rs->sig, hash, &rs->direct);
        if (st != MLC_SUCCESS) return st;
        if (quick_without_lock(req, rs)) return MLC_SUCCESS;
        pthread_mutex_lock(&ep->lock);
        st = activate(ep, req);
        pthread_mutex_unlock(&ep->lock);
        if (st != MLC_SUCCESS) eng_direct_cancel(req->comm->impl, &rs->direct);
        return st;
    }
    const mlc_algo_t *algo = mlc_algo_find(req->coll, req->algo);
    if (!algo)
        return mlc_error(MLC_ERR_INTERNAL, "%s: no algorithm '%s' in src/algos", mlc_coll_name(req->coll),
                         req->algo ? req->algo : "(none)");
    mlc_coll_desc_t d;
    mlc_request_desc(req, &d);
    mlc_sched_t s;
    mlc_sched_init(&s);
    mlc_status_t st = algo->build(&d, &s);
    if (st != MLC_SUCCESS) {
        mlc_sched_free(&s);
        if (st == MLC_ERR_UNSUPPORTED)
            return mlc_error(st, "%s: algorithm '%s' cannot run this call (%s)", mlc_coll_name(req->coll),
                             algo->name, mlc_last_error());
        return st;
    }
    const mlc_args_t *a = &req->args;
    size_t avg_count = 0;
    if (a->op == MLC_AVG && a->recvbuf &&
        (req->coll == MLC_COLL_ALLREDUCE || req->coll == MLC_COLL_REDUCE || req->coll == MLC_COLL_REDUCE_SCATTER))
        avg_count = a->count;
    /* Tags carry the call number, which (unlike the sequence number) init
     * and the settings check never restart: no two calls share a tag. */
    st = mlc_exec_create(&s, a->sendbuf, a->recvbuf, a->dtype, a->op, avg_count, req->comm->size, rs->sig.call,
                         &req->comm->host_scratch, &rs->entry.exec);
    if (st != MLC_SUCCESS) return st;
    pthread_mutex_lock(&ep->lock);
    st = activate(ep, req);
    pthread_mutex_unlock(&ep->lock);
    if (st != MLC_SUCCESS) mlc_exec_destroy(rs->entry.exec, &eng_transport, rs);
    return st;
}

static mlc_status_t start_p2p(mlc_request_t *req, bool send, bool recv)
{
    eng_comm_t *ec = req->comm->impl;
    eng_ep_t *ep = ec->ep;
    eng_req_t *rs = req_state(req);
    const mlc_args_t *a = &req->args;
    memset(rs, 0, sizeof *rs);
    rs->entry.req = req;
    rs->entry.ec = ec;
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&ep->lock);
    if (recv) {
        int src = send ? a->peer2 : a->root;
        int tag = send ? a->tag2 : a->tag;
        size_t cap = (send ? a->count2 : a->count) * a->esize;
        st = eng_irecv(ec, ec->ctx, src == MLC_ANY_SOURCE ? ENG_ANY : src, (uint64_t)(tag < 0 ? 0 : tag),
                       tag == MLC_ANY_TAG, a->recvbuf, cap, req, NULL, &rs->ops[rs->nops]);
        if (st == MLC_SUCCESS) rs->nops++;
    }
    if (send && st == MLC_SUCCESS) {
        st = eng_isend(ec, ec->ctx, a->root, (uint64_t)a->tag, a->sendbuf, a->count * a->esize, req, NULL,
                       &rs->ops[rs->nops]);
        if (st == MLC_SUCCESS) rs->nops++;
    }
    if (st == MLC_SUCCESS) st = activate(ep, req);
    if (st != MLC_SUCCESS) {
        for (int i = 0; i < rs->nops; i++) eng_op_cancel(ep, rs->ops[i]);
        rs->nops = 0;
    }
    pthread_mutex_unlock(&ep->lock);
    return st;
}

mlc_status_t eng_start_send(mlc_request_t *req) { return start_p2p(req, true, false); }
mlc_status_t eng_start_recv(mlc_request_t *req) { return start_p2p(req, false, true); }
mlc_status_t eng_start_sendrecv(mlc_request_t *req) { return start_p2p(req, true, true); }

/* ---- communicators -------------------------------------------------------------- */

mlc_status_t eng_comm_create(mlc_comm_t *comm, eng_ep_t *ep, uint32_t ctx, uint32_t area, const int *world_of)
{
    eng_comm_t *ec = calloc(1, sizeof *ec);
    if (!ec) return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory");
    ec->world_of = malloc(sizeof(int) * (size_t)comm->size);
    ec->comm_of = malloc(sizeof(int) * (size_t)ep->wsize);
    ec->member_slot = malloc(sizeof(eng_slot_t *) * (size_t)comm->size);
    if (!ec->world_of || !ec->comm_of || !ec->member_slot) {
        free(ec->world_of);
        free(ec->comm_of);
        free(ec->member_slot);
        free(ec);
        return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory");
    }
    for (int w = 0; w < ep->wsize; w++) ec->comm_of[w] = -1;
    for (int r = 0; r < comm->size; r++) {
        ec->world_of[r] = world_of ? world_of[r] : r;
        ec->comm_of[ec->world_of[r]] = r;
    }
    ec->ep = ep;
    ec->comm = comm;
    ec->ctx = ctx;
    ec->fail_word = eng_fail_word(ep, ep->wrank, ctx / 2);
    if (area < ep->seg->slot_areas) {
        ec->slots = eng_area_slots(ep, area);
        atomic_store_explicit(&ec->slots[ep->wrank].used, 1, memory_order_release);
    }
    for (int r = 0; r < comm->size; r++) ec->member_slot[r] = ec->slots ? &ec->slots[ec->world_of[r]] : NULL;
    if (area < ep->seg->stage_areas) {
        ec->stage_bytes = ep->seg->stage_bytes;
        ec->stages = ep->base + ep->seg->stage_off + (size_t)area * (size_t)ep->wsize * ec->stage_bytes;
    }
    /* Every member computes the same answer from the shared probe matrix. */
    ec->cma_all = true;
    for (int i = 0; i < comm->size && !ep->threads; i++)
        for (int j = 0; j < comm->size; j++)
            if (i != j && !ep->cma_ok[(size_t)ec->world_of[i] * (size_t)ep->wsize + (size_t)ec->world_of[j]])
                ec->cma_all = false;
    pthread_mutex_lock(&ep->lock);
    ep->refs++;
    pthread_mutex_unlock(&ep->lock);
    comm->impl = ec;
    return MLC_SUCCESS;
}

/* Drop an active entry without completing its request: its operations are
 * cancelled, so its buffers are no longer touched. Lock held. */
static void entry_cancel(eng_ep_t *ep, eng_coll_t *e)
{
    eng_comm_t *ec = e->ec;
    eng_req_t *rs = req_state(e->req);
    if (e->exec) mlc_exec_destroy(e->exec, &eng_transport, rs);
    e->exec = NULL;
    if (rs->is_direct) eng_direct_cancel(ec, &rs->direct);
    for (int i = 0; i < rs->nops; i++) eng_op_cancel(ep, rs->ops[i]);
    rs->nops = 0;
    if (!e->req->blocking) ep->async_pending--;
    entry_remove(ep, e);
    entry_done(ec);
}

/* Core ended req without the engine (its communicator failed: an abort, a
 * timeout, a lost peer): the caller may free its buffers and reuse the
 * request once this returns, so its entry goes now. */
void eng_be_forget(mlc_request_t *req)
{
    eng_comm_t *ec = req->comm->impl;
    if (!ec) return;
    eng_ep_t *ep = ec->ep;
    pthread_mutex_lock(&ep->lock);
    for (eng_coll_t *e = ep->colls; e; e = e->next)
        if (e->req == req) {
            entry_cancel(ep, e);
            break;
        }
    pthread_mutex_unlock(&ep->lock);
    /* Peers may be reading its buffers in place: once they know (the
     * failure is posted for every member), wait for reads under way. */
    if (!eng_fail_posted(ec)) {
        int failed = atomic_load(&req->comm->failed);
        char msg[sizeof req->comm->fail_msg];
        if (failed)
            snprintf(msg, sizeof msg, "%s", req->comm->fail_msg);
        else
            snprintf(msg, sizeof msg, "rank %d: an operation ended with an error", req->comm->rank);
        eng_fail_comm(ec, failed ? (mlc_status_t)failed : MLC_ERR_ABORTED, msg);
    }
    eng_readers_drain(ep);
}

void eng_be_destroy(mlc_comm_t *comm)
{
    eng_comm_t *ec = comm->impl;
    if (!ec) return;
    eng_ep_t *ep = ec->ep;
    pthread_mutex_lock(&ep->lock);
    /* An operation the engine already finished (a send all written into the
     * ring) completes as what it was, not as cancelled: its peer gets it. */
    for (eng_coll_t *e = ep->colls, *next; e; e = next) {
        next = e->next; /* e may be removed */
        if (e->ec == ec) entry_progress(ep, e);
    }
    /* Cancel this communicator's pending operations: their buffers are no longer touched. */
    eng_coll_t *e = ep->colls;
    while (e) {
        eng_coll_t *next = e->next;
        if (e->ec == ec) entry_cancel(ep, e);
        e = next;
    }
    /* Unexpected messages of its contexts can never be received now. */
    eng_unexp_t *prev = NULL, *u = ep->ux_head;
    while (u) {
        eng_unexp_t *next = u->next;
        if ((u->ctx == ec->ctx || u->ctx == ec->ctx + 1) && u->complete) {
            if (prev)
                prev->next = next;
            else
                ep->ux_head = next;
            if (ep->ux_tail == u) ep->ux_tail = prev;
            atomic_fetch_sub_explicit(&ep->ux_count, 1, memory_order_relaxed);
            free(u->data);
            free(u);
        } else {
            prev = u;
        }
        u = next;
    }
    pthread_mutex_unlock(&ep->lock);
    eng_member_leave(ec);
    /* Peers may be reading a cancelled send's buffer in place: a read that
     * began before they could see this rank leave ends first, a later one
     * fails (p2p.c). Communicators without a slot area have no `left`. */
    if (ec->slots) eng_readers_drain(ep);
    free(ec->world_of);
    free(ec->comm_of);
    free(ec->member_slot);
    free(ec);
    comm->impl = NULL;
    eng_ep_unref(ep);
}

void eng_be_abort(mlc_comm_t *comm)
{
    char msg[96];
    snprintf(msg, sizeof msg, "rank %d called mlc_comm_abort", comm->rank);
    eng_fail_comm(comm->impl, MLC_ERR_ABORTED, msg);
}

mlc_status_t eng_be_progress(mlc_comm_t *comm, int *progressed)
{
    eng_comm_t *ec = comm->impl;
    eng_ep_t *ep = ec->ep;
    pthread_mutex_lock(&ep->lock);
    *progressed = eng_progress_locked(ep);
    pthread_mutex_unlock(&ep->lock);
    /* More ranks than cores: let the rank we wait for run. */
    if (!*progressed && ep->oversubscribed) eng_yield(ep);
    return MLC_SUCCESS;
}

bool eng_be_polling_futile(mlc_comm_t *comm)
{
    const eng_ep_t *ep = ((eng_comm_t *)comm->impl)->ep;
    return ep->oversubscribed && eng_yield_futile(&ep->yield_gauge, mlc_now());
}

const char *eng_be_choose_algo(const mlc_request_t *req) { return eng_direct_choose(req); }

void eng_be_idle(mlc_comm_t *comm, double max_s)
{
    eng_comm_t *ec = comm->impl;
    eng_sleep(ec->ep, max_s, ec);
}

/* Collectives of ec still waiting: did a peer start the same call number
 * with other arguments (it may wait for other messages, or none)? */
static mlc_status_t board_check(eng_comm_t *ec)
{
    if (!ec->slots) return MLC_SUCCESS;
    char msg[384];
    bool bad = false;
    pthread_mutex_lock(&ec->ep->lock);
    for (eng_coll_t *e = ec->ep->colls; e && !bad; e = e->next) {
        if (e->ec != ec || e->req->coll >= MLC_COLL_SEND) continue;
        bad = eng_board_mismatch(ec, &req_state(e->req)->sig, msg, sizeof msg);
    }
    pthread_mutex_unlock(&ec->ep->lock);
    return bad ? eng_fail_comm(ec, MLC_ERR_MISMATCH, msg) : MLC_SUCCESS;
}

/* The signature of the active collective of communicator context coll_ctx
 * (its collective traffic) with call number `call`, or NULL. Lock held. */
const mlc_sig_t *eng_active_sig(eng_ep_t *ep, uint32_t coll_ctx, uint64_t call, eng_comm_t **ec)
{
    for (eng_coll_t *e = ep->colls; e; e = e->next) {
        if (e->ec->ctx + 1 != coll_ctx || e->req->coll >= MLC_COLL_SEND) continue;
        const eng_req_t *rs = req_state(e->req);
        if (rs->sig.call != call) continue;
        *ec = e->ec;
        return &rs->sig;
    }
    return NULL;
}

const mlc_sig_t *eng_latest_sig(eng_ep_t *ep, uint32_t coll_ctx, eng_comm_t **ec)
{
    const mlc_sig_t *latest = NULL;
    for (eng_coll_t *e = ep->colls; e; e = e->next) {
        if (e->ec->ctx + 1 != coll_ctx || e->req->coll >= MLC_COLL_SEND) continue;
        const mlc_sig_t *s = &req_state(e->req)->sig;
        if (!latest || s->call > latest->call) {
            latest = s;
            *ec = e->ec;
        }
    }
    return latest;
}

mlc_status_t eng_be_posted_failure(mlc_comm_t *comm)
{
    int failed = atomic_load(&comm->failed);
    if (failed) return (mlc_status_t)failed;
    return eng_fail_check(comm->impl);
}

mlc_status_t eng_be_health(mlc_comm_t *comm)
{
    eng_comm_t *ec = comm->impl;
    mlc_status_t fst = eng_be_posted_failure(comm);
    if (fst != MLC_SUCCESS) return fst;
    fst = board_check(ec);
    if (fst != MLC_SUCCESS) return fst;
    return eng_health_peers(comm);
}

void eng_be_pending_peers(const mlc_request_t *req, char *buf, size_t len)
{
    eng_name_silent(req, &req_state(req)->entry, buf, len);
}

int eng_entry_waits_for(const eng_coll_t *e, int r)
{
    const eng_req_t *rs = req_state(e->req);
    if (rs->is_direct) return eng_direct_waits_for(e->req, &rs->direct, r);
    if (e->exec) return mlc_exec_waits_for(e->exec, r);
    int w = e->ec->world_of[r], any = 0;
    for (int i = 0; i < rs->nops; i++) {
        const eng_op_t *op = rs->ops[i];
        if (op->done) continue;
        if (op->peer == w) return 1;
        if (op->peer == ENG_ANY && w != e->ec->ep->wrank) any = 2;
    }
    return any;
}

mlc_status_t eng_be_iprobe(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st)
{
    eng_comm_t *ec = comm->impl;
    eng_ep_t *ep = ec->ep;
    char why[160];
    /* A failure another member posted (abort, mismatch, a lost peer) ends a probe loop too. */
    mlc_status_t fst0 = eng_fail_check(ec);
    if (fst0 != MLC_SUCCESS) return mlc_error(fst0, "%s", comm->fail_msg);
    eng_beat(ep); /* a probing rank is heard from */
    pthread_mutex_lock(&ep->lock);
    int gone = eng_probe_gone(ec, source, why, sizeof why); /* before draining what it sent */
    eng_progress_locked(ep);
    *flag = eng_probe(ec, source, tag, st);
    pthread_mutex_unlock(&ep->lock);
    if (*flag || gone < 0) return MLC_SUCCESS;
    char msg[320], note[224];
    snprintf(note, sizeof note, "peer rank %d %s", gone, why);
    if (source == gone || source == MLC_ANY_SOURCE)
        snprintf(msg, sizeof msg, "rank %d: probe (source %s, tag %s): %s", comm->rank, mlc_any_or(source).s,
                 mlc_any_or(tag).s, note);
    else /* another member died: the probed one is not at fault */
        snprintf(msg, sizeof msg, "rank %d: probe (tag %s): %s", comm->rank, mlc_any_or(tag).s, note);
    mlc_status_t fst = eng_fail_comm_note(ec, MLC_ERR_PEER_LOST, msg, note);
    return mlc_error(fst, "%s", comm->fail_msg);
}

/* Names of every src/algos algorithm per collective, built once from mlc_algos[]. */
#define ENG_MAX_ALGOS 24
static const char *algo_table[MLC_COLL_COUNT][ENG_MAX_ALGOS + 1];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static void algo_table_build(void)
{
    int n[MLC_COLL_COUNT] = {0};
    static const mlc_coll_t direct_colls[] = {MLC_COLL_BARRIER, MLC_COLL_REDUCE, MLC_COLL_ALLREDUCE,
                                              MLC_COLL_BROADCAST, MLC_COLL_ALLGATHER, MLC_COLL_REDUCE_SCATTER};
    for (size_t i = 0; i < sizeof direct_colls / sizeof direct_colls[0]; i++)
        algo_table[direct_colls[i]][n[direct_colls[i]]++] = eng_direct_name;
    for (const mlc_algo_t *a = mlc_algos; a->name; a++)
        if (a->coll >= 0 && a->coll < MLC_COLL_COUNT && n[a->coll] < ENG_MAX_ALGOS)
            algo_table[a->coll][n[a->coll]++] = a->name;
}

const char *const *eng_be_algos(mlc_coll_t coll)
{
    pthread_once(&algo_once, algo_table_build);
    return coll >= 0 && coll < MLC_COLL_COUNT ? algo_table[coll] : NULL;
}
