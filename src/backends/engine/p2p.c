/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Point-to-point over the rings: framing, matching (posted and unexpected
 * queues), eager streaming, rendezvous and ACKs. Every function here runs
 * with the endpoint lock held.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/uio.h>
#include "engine.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"

/* ---- rings ---------------------------------------------------------------- */

static inline eng_ring_hdr_t *ring_hdr(eng_ep_t *ep, int src, int dst)
{
    return (eng_ring_hdr_t *)(ep->base + ep->seg->ring_hdr_off) + (size_t)src * (size_t)ep->wsize + (size_t)dst;
}

static inline char *ring_data(eng_ep_t *ep, int src, int dst)
{
    return ep->base + ep->seg->ring_data_off +
           ((size_t)src * (size_t)ep->wsize + (size_t)dst) * ep->seg->ring_bytes;
}

/* Copy len bytes into the ring at stream position pos (wrapping). */
static void ring_put(char *data, size_t r, uint64_t pos, const void *src, size_t len)
{
    size_t at = (size_t)(pos & (r - 1)), first = r - at < len ? r - at : len;
    if (src) {
        memcpy(data + at, src, first);
        memcpy(data, (const char *)src + first, len - first);
    } else { /* a cancelled send: its remainder is sent as zeros */
        memset(data + at, 0, first);
        memset(data, 0, len - first);
    }
}

static void ring_get(const char *data, size_t r, uint64_t pos, void *dst, size_t len)
{
    size_t at = (size_t)(pos & (r - 1)), first = r - at < len ? r - at : len;
    memcpy(dst, data + at, first);
    memcpy((char *)dst + first, data, len - first);
}

/* ---- ops ---------------------------------------------------------------- */

eng_op_t *eng_op_get(eng_ep_t *ep)
{
    eng_op_t *op = ep->free_ops;
    if (op)
        ep->free_ops = op->next;
    else if (!(op = malloc(sizeof *op)))
        return NULL;
    memset(op, 0, sizeof *op);
    return op;
}

void eng_op_put(eng_ep_t *ep, eng_op_t *op)
{
    op->next = ep->free_ops;
    ep->free_ops = op;
}

static void op_done(eng_op_t *op, mlc_status_t st)
{
    op->status = st;
    op->done = true;
}

static void op_fail(eng_op_t *op, mlc_status_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void op_fail(eng_op_t *op, mlc_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->err, sizeof op->err, fmt, ap);
    va_end(ap);
    op_done(op, st);
}

static void recv_finish(eng_ep_t *ep, eng_op_t *op, int src, uint64_t tag, uint64_t bytes)
{
    op->src_world = src;
    op->rtag = tag;
    op->got = bytes;
    if (op->cancelled) {
        eng_op_put(ep, op);
        return;
    }
    if (bytes > op->bytes)
        op_fail(op, MLC_ERR_TRUNCATE,
                "message of %llu bytes from rank %d (tag %llu) is longer than the receive buffer of %zu bytes",
                (unsigned long long)bytes, op->comm ? op->comm->comm_of[src] : src, (unsigned long long)tag,
                op->bytes);
    else
        op_done(op, MLC_SUCCESS);
}

static const char *rank_name(const eng_comm_t *ec, int w, char *buf, size_t len);
static mlc_status_t read_refused(eng_comm_t *ec, int src, size_t bytes, const char *before);

/* Rank src cancelled the eager message of `bytes` for op half way (its
 * remainder came as zeros): the receive fails, with the communicator's
 * posted failure if there is one. */
static void recv_cut(eng_ep_t *ep, eng_op_t *op, int src, uint64_t bytes)
{
    if (op->cancelled) {
        eng_op_put(ep, op);
        return;
    }
    mlc_status_t st = read_refused(op->comm, src, (size_t)bytes, "all sent");
    if (st == MLC_SUCCESS) {
        char who[32];
        st = mlc_error(MLC_ERR_PEER_LOST, "%s cancelled its send of %llu bytes before it was all sent",
                       op->comm ? rank_name(op->comm, src, who, sizeof who) : "the sender", (unsigned long long)bytes);
    }
    op_fail(op, st, "%s", mlc_last_error());
}

/* ---- call signatures ------------------------------------------------------- */

/* A collective step takes only a message of the same call, of the exact size
 * it expects: anything else comes from a call with other arguments, and is
 * refused before a byte of it reaches the receive buffer. */
static bool step_accepts(eng_op_t *op, int src, uint64_t tag, const mlc_sig_t *theirs, uint64_t bytes)
{
    if (!op->sig || op->cancelled) return true;
    bool same = mlc_sig_same(op->sig, theirs);
    if (same && bytes == op->bytes) return true;
    const eng_comm_t *ec = op->comm;
    int me = ec->comm->rank, peer = ec->comm_of[src];
    if (!same) {
        mlc_sig_mismatch(op->sig, me, theirs, peer, op->err, sizeof op->err);
    } else {
        char a[128];
        mlc_sig_describe(op->sig, a, sizeof a);
        snprintf(op->err, sizeof op->err, "rank %d: %s, call #%llu: rank %d sent a block of %llu bytes where "
                 "rank %d expects %zu (their counts differ, or they run different algorithms: "
                 "mlc_comm_set_algo and MLC_ALGO_* must agree)", me, a, (unsigned long long)op->sig->seq, peer,
                 (unsigned long long)bytes, me, op->bytes);
    }
    op->src_world = src;
    op->rtag = tag;
    op->got = 0;
    op_done(op, MLC_ERR_MISMATCH);
    return false;
}

/* A collective message that matched no posted step (it is on the unexpected
 * queue now): if this rank is in the same call with another signature (a
 * peer's other arguments made it choose another algorithm), or already in a
 * later call (it completed that one without the message), the communicator
 * fails on every member. */
static void arrival_check(eng_ep_t *ep, int src, const eng_hdr_t *h)
{
    if (!(h->ctx & 1u) || !ep->colls) return;
    eng_comm_t *ec = NULL;
    char msg[384];
    const mlc_sig_t *mine = eng_active_sig(ep, h->ctx, h->sig.call, &ec);
    if (mine) {
        if (mlc_sig_same(mine, &h->sig)) return;
        mlc_sig_mismatch(mine, ec->comm->rank, &h->sig, ec->comm_of[src], msg, sizeof msg);
    } else {
        const mlc_sig_t *latest = eng_latest_sig(ep, h->ctx, &ec);
        if (!latest || latest->call < h->sig.call || !eng_ux_mismatch(ec, latest, msg, sizeof msg)) return;
    }
    eng_fail_comm(ec, MLC_ERR_MISMATCH, msg);
}

bool eng_ux_mismatch(eng_comm_t *ec, const mlc_sig_t *sig, char *msg, size_t len)
{
    for (eng_unexp_t *u = ec->ep->ux_head; u; u = u->next) {
        if (u->ctx != ec->ctx + 1 || u->sig.call > sig->call) continue;
        int peer = ec->comm_of[u->src], me = ec->comm->rank;
        if (u->sig.call == sig->call) {
            if (mlc_sig_same(&u->sig, sig)) continue;
            mlc_sig_mismatch(sig, me, &u->sig, peer, msg, len);
            return true;
        }
        eng_comm_t *active;
        if (eng_active_sig(ec->ep, u->ctx, u->sig.call, &active)) continue; /* still running here */
        if (ec->done_sig.call == u->sig.call) {
            mlc_sig_mismatch(&ec->done_sig, me, &u->sig, peer, msg, len);
        } else {
            char theirs[128];
            mlc_sig_describe(&u->sig, theirs, sizeof theirs);
            snprintf(msg, len, "rank %d: rank %d sent data for its %s, call #%llu, which rank %d completed "
                     "without expecting it", me, peer, theirs, (unsigned long long)u->sig.seq, me);
        }
        return true;
    }
    return false;
}

/* ---- ACKs ----------------------------------------------------------------- */

static bool push_ack(eng_ep_t *ep, int dst, uint64_t cookie)
{
    eng_ring_hdr_t *h = ring_hdr(ep, ep->wrank, dst);
    size_t r = ep->seg->ring_bytes;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    if (r - (head - tail) < sizeof(eng_hdr_t)) return false;
    eng_hdr_t hdr = {.kind = ENG_ACK, .cookie = cookie};
    ring_put(ring_data(ep, ep->wrank, dst), r, head, &hdr, sizeof hdr);
    atomic_store_explicit(&h->head, head + sizeof hdr, memory_order_release);
    eng_wake(ep, dst);
    return true;
}

/* An ACK may enter the ring only between records, never inside an eager
 * payload that is still streaming to dst. Their mutual order does not matter. */
static bool between_records(const eng_ep_t *ep, int dst)
{
    return !ep->sendq_head[dst] || !ep->sendq_head[dst]->hdr_written;
}

static void send_ack(eng_ep_t *ep, int dst, uint64_t cookie)
{
    if (between_records(ep, dst) && push_ack(ep, dst, cookie)) return;
    eng_ack_t *a = malloc(sizeof *a);
    if (!a) {
        MLC_WARN("engine: out of memory queueing an acknowledgement to rank %d", dst);
        return;
    }
    a->dst = dst;
    a->cookie = cookie;
    a->next = ep->acks;
    ep->acks = a;
}

static int flush_acks(eng_ep_t *ep)
{
    int moved = 0;
    eng_ack_t **pp = &ep->acks;
    while (*pp) {
        eng_ack_t *a = *pp;
        if (between_records(ep, a->dst) && push_ack(ep, a->dst, a->cookie)) {
            *pp = a->next;
            free(a);
            moved = 1;
        } else {
            pp = &a->next;
        }
    }
    return moved;
}

/* ---- rendezvous copy ------------------------------------------------------ */

/* World rank w as the caller knows it: "rank N" in ec where it is a member, else "world rank N". */
static const char *rank_name(const eng_comm_t *ec, int w, char *buf, size_t len)
{
    int r = ec ? ec->comm_of[w] : -1;
    if (r >= 0)
        snprintf(buf, len, "rank %d", r);
    else
        snprintf(buf, len, "world rank %d", w);
    return buf;
}

/* A single-copy read failed, as `detail` says: fail ec on every member (as
 * any wait that finds a peer gone does: the peers may wait for this rank, and
 * the failure stays), telling them `note`, and return the communicator's
 * failure (with the world ranks of a split's). */
static mlc_status_t read_failed(eng_comm_t *ec, mlc_status_t st, const char *detail, const char *note)
{
    if (!ec) return mlc_error(st, "%s", detail);
    char msg[400];
    snprintf(msg, sizeof msg, "rank %d: %s", ec->comm->rank, detail);
    mlc_status_t sticky = eng_fail_comm_note(ec, st, msg, note);
    return mlc_error(sticky, "%s", ec->comm->fail_msg);
}

static mlc_status_t rndv_copy(eng_ep_t *ep, eng_comm_t *ec, int src, uint64_t addr, void *dst, size_t bytes);

/* Why a read of rank src's message of `bytes` must not happen (or count)
 * now: a member posted ec's failure, or src freed ec before the message was
 * `before` ("read", "all sent"; its pending operations were cancelled and
 * their buffers went back to its caller: eng_be_destroy). MLC_SUCCESS when
 * it may. */
static mlc_status_t read_refused(eng_comm_t *ec, int src, size_t bytes, const char *before)
{
    if (!ec) return MLC_SUCCESS;
    if (eng_fail_posted(ec)) {
        mlc_status_t fst = eng_fail_adopt(ec);
        return mlc_error(fst ? fst : MLC_ERR_ABORTED, "%.300s", ec->comm->fail_msg);
    }
    if (ec->slots && atomic_load(&ec->slots[src].left)) {
        char who[32];
        return mlc_error(MLC_ERR_PEER_LOST, "%s freed the communicator before its message of %zu bytes was "
                         "%s (its send was cancelled)", rank_name(ec, src, who, sizeof who), bytes, before);
    }
    return MLC_SUCCESS;
}

/* A single-copy read of rank src's memory, counted in its `readers` while it
 * lasts: src may drop the operation (its communicator failed) and give the
 * buffer back to its caller, who may unmap or reuse it at once. The count
 * goes up before this rank looks for a posted failure and src posts its
 * failure before it waits for the count (eng_readers_drain), both sequentially
 * consistent: either this read sees the failure and reads nothing, or src
 * waits for it to end. */
mlc_status_t eng_rndv_copy(eng_ep_t *ep, eng_comm_t *ec, int src, uint64_t addr, void *dst, size_t bytes)
{
    if (bytes == 0) return MLC_SUCCESS;
    if (src == ep->wrank) {
        memcpy(dst, (const void *)(uintptr_t)addr, bytes);
        return MLC_SUCCESS;
    }
    atomic_uint *readers = &eng_ctl(ep, src)->readers;
    atomic_fetch_add(readers, 1);
    atomic_thread_fence(memory_order_seq_cst);
    mlc_status_t st = read_refused(ec, src, bytes, "read");
    if (st == MLC_SUCCESS) st = rndv_copy(ep, ec, src, addr, dst, bytes);
    atomic_fetch_sub(readers, 1);
    return st;
}

/* A copy out of src's shared block mapped here is not counted: the mapping
 * stays valid whatever src does with its block, and a peer stopped mid-copy
 * must not hold src's failure up. It is checked before and after instead:
 * src posts its failure (or leaves) and fences (eng_readers_drain) before
 * the buffer goes back to its caller, so a copy that read anything written
 * after that finds the failure when it looks again, and fails. */
mlc_status_t eng_mapped_copy(eng_ep_t *ep, eng_comm_t *ec, int src, const char *mapped, void *dst, size_t bytes,
                             void (*copy)(void *dst, const void *src, size_t n))
{
    if (bytes == 0) return MLC_SUCCESS;
    mlc_status_t st = src == ep->wrank ? MLC_SUCCESS : read_refused(ec, src, bytes, "read");
    if (st != MLC_SUCCESS) return st;
    if (copy)
        copy(dst, mapped, bytes);
    else
        memcpy(dst, mapped, bytes);
    return eng_mapped_read_check(ep, ec, src, bytes);
}

mlc_status_t eng_mapped_read_check(eng_ep_t *ep, eng_comm_t *ec, int src, size_t bytes)
{
    if (src == ep->wrank) return MLC_SUCCESS;
    atomic_thread_fence(memory_order_acquire);
    return read_refused(ec, src, bytes, "read");
}

/* A read takes one copy's time; a count still up after this long belongs to
 * a stopped peer. */
#define DRAIN_LIMIT_S 10.0

/* Has a rank of the job died? Its count may stay up for ever: it died
 * mid-read (the job is failing; its launcher stops the rest soon). */
static bool a_peer_died(eng_ep_t *ep)
{
    char why[160];
    for (int w = 0; w < ep->wsize; w++)
        if (w != ep->wrank && eng_peer_gone(ep, w, why, sizeof why) == ENG_DIED) return true;
    return false;
}

void eng_readers_drain(eng_ep_t *ep)
{
    atomic_thread_fence(memory_order_seq_cst);
    atomic_uint *readers = &eng_ctl(ep, ep->wrank)->readers;
    if (atomic_load(readers) == 0) return;
    double until = mlc_now() + DRAIN_LIMIT_S;
    for (unsigned spins = 0; atomic_load(readers) != 0; spins++) {
        if (spins % 64 == 63 && a_peer_died(ep)) return;
        if (mlc_now() > until) {
            MLC_WARN("rank %d: peers' single-copy reads of this rank's memory did not end within %g s (a "
                     "peer stopped or died mid-read?): the buffers go back to the caller anyway",
                     ep->wrank, DRAIN_LIMIT_S);
            return;
        }
        sched_yield();
    }
}

static mlc_status_t rndv_copy(eng_ep_t *ep, eng_comm_t *ec, int src, uint64_t addr, void *dst, size_t bytes)
{
    if (ep->threads) {
        memcpy(dst, (const void *)(uintptr_t)addr, bytes);
        return MLC_SUCCESS;
    }
    size_t done = 0;
    while (done < bytes) {
        struct iovec l = {(char *)dst + done, bytes - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), bytes - done};
        ssize_t n = process_vm_readv(ep->pids[src], &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            int err = n < 0 ? errno : 0;
            /* A member that failed first (and left since, so the read failed) posted why: report that. */
            if (ec && eng_fail_posted(ec)) {
                mlc_status_t fst = eng_fail_adopt(ec);
                if (fst != MLC_SUCCESS) return mlc_error(fst, "%.300s", ec->comm->fail_msg);
            }
            /* A peer's memory goes away when the job is failing: it died, or it
             * left this collective because another rank died. Report the death. */
            char why[160], from[32], who[32], note[sizeof why + 64], detail[sizeof note + 128];
            rank_name(ec, src, from, sizeof from);
            /* Name one that died (the source first) before one that ended
             * normally since: a peer that failed because of the death and
             * left is not the cause. */
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < ep->wsize; i++) {
                    int w = (src + i) % ep->wsize, gone;
                    if (w == ep->wrank || (ec && ec->comm_of[w] < 0) || /* members only */
                        (gone = eng_peer_gone_within(ep, w, 0, why, sizeof why)) == ENG_ALIVE ||
                        (pass == 0 && gone != ENG_DIED))
                        continue;
                    snprintf(note, sizeof note, "peer %s %s", rank_name(ec, w, who, sizeof who), why);
                    snprintf(detail, sizeof detail, "single-copy read of %zu bytes from %s failed (%s): %s",
                             bytes - done, from, err ? strerror(err) : "no progress", note);
                    return read_failed(ec, MLC_ERR_PEER_LOST, detail, note);
                }
            snprintf(detail, sizeof detail, "single-copy read of %zu bytes from %s (pid %d) failed: %s", bytes - done,
                     from, (int)ep->pids[src], err ? strerror(err) : "no progress");
            snprintf(note, sizeof note, "single-copy read of %zu bytes by %s from %s (pid %d) failed: %s",
                     bytes - done, ec ? rank_name(ec, ep->wrank, who, sizeof who) : "this rank", from,
                     (int)ep->pids[src], err ? strerror(err) : "no progress");
            return read_failed(ec, err == ESRCH ? MLC_ERR_PEER_LOST : MLC_ERR_SYSTEM, detail, note);
        }
        done += (size_t)n;
    }
    return MLC_SUCCESS;
}

/* Read n bytes of a rendezvous message of `bytes` at addr in src: from the
 * sender's shared block mapped here when it has one and it maps, else by
 * single copy (a sender names its block only where this rank may read it
 * by single copy too: eng_isend). */
static mlc_status_t rndv_read(eng_ep_t *ep, eng_comm_t *ec, int src, const mlc_shmem_ref_t *block,
                              uint64_t addr, uint64_t bytes, void *dst, size_t n)
{
    if (n == 0) return MLC_SUCCESS;
    if (block->size && !ep->threads && src != ep->wrank) {
        char why[200];
        const char *p = eng_peer_view(ep, src, block, addr, (size_t)bytes, 0, why, sizeof why);
        if (p) return eng_mapped_copy(ep, ec, src, p, dst, n, NULL);
    }
    return eng_rndv_copy(ep, ec, src, addr, dst, n);
}

/* Deliver a rendezvous message to a matched receive. */
static void rndv_deliver(eng_ep_t *ep, eng_op_t *op, int src, uint64_t tag, uint64_t bytes, uint64_t addr,
                         const mlc_shmem_ref_t *block, uint64_t cookie)
{
    size_t n = bytes < op->bytes ? (size_t)bytes : op->bytes;
    /* Once a member failed the communicator, a sender may have returned and
     * released the buffer this message names: never read it then. */
    if (!op->cancelled && op->comm && eng_fail_posted(op->comm)) {
        send_ack(ep, src, cookie);
        op->src_world = src;
        op->rtag = tag;
        mlc_status_t fst = eng_fail_adopt(op->comm);
        op_fail(op, fst != MLC_SUCCESS ? fst : MLC_ERR_ABORTED, "%.300s", op->comm->comm->fail_msg);
        return;
    }
    mlc_status_t st = op->cancelled ? MLC_SUCCESS : rndv_read(ep, op->comm, src, block, addr, bytes, op->rbuf, n);
    send_ack(ep, src, cookie);
    if (st != MLC_SUCCESS) {
        op->src_world = src;
        op->rtag = tag;
        op_fail(op, st, "%s", mlc_last_error());
        return;
    }
    recv_finish(ep, op, src, tag, bytes);
}

/* ---- matching --------------------------------------------------------------- */

static bool matches(const eng_op_t *op, uint32_t ctx, int src, uint64_t tag)
{
    return op->ctx == ctx && (op->peer == ENG_ANY || op->peer == src) && (op->any_tag || op->tag == tag);
}

static eng_op_t *take_posted(eng_ep_t *ep, uint32_t ctx, int src, uint64_t tag)
{
    eng_op_t *prev = NULL;
    for (eng_op_t *op = ep->posted_head; op; prev = op, op = op->next) {
        if (!matches(op, ctx, src, tag)) continue;
        if (prev)
            prev->next = op->next;
        else
            ep->posted_head = op->next;
        if (ep->posted_tail == op) ep->posted_tail = prev;
        op->next = NULL;
        return op;
    }
    return NULL;
}

static void ux_append(eng_ep_t *ep, eng_unexp_t *u)
{
    atomic_fetch_add_explicit(&ep->ux_count, 1, memory_order_relaxed);
    u->next = NULL;
    if (ep->ux_tail)
        ep->ux_tail->next = u;
    else
        ep->ux_head = u;
    ep->ux_tail = u;
}

static void ux_remove(eng_ep_t *ep, eng_unexp_t *u, eng_unexp_t *prev)
{
    atomic_fetch_sub_explicit(&ep->ux_count, 1, memory_order_relaxed);
    if (prev)
        prev->next = u->next;
    else
        ep->ux_head = u->next;
    if (ep->ux_tail == u) ep->ux_tail = prev;
}

/* ---- inbound ---------------------------------------------------------------- */

static void start_eager(eng_ep_t *ep, int src, const eng_hdr_t *h)
{
    eng_inbound_t *in = &ep->in[src];
    in->hdr = *h;
    in->remaining = h->bytes;
    eng_op_t *op = take_posted(ep, h->ctx, src, h->tag);
    bool refused = op && !step_accepts(op, src, h->tag, &h->sig, h->bytes);
    in->op = refused ? NULL : op;
    in->ux = NULL;
    if (in->op) {
        in->dst = in->op->cancelled ? NULL : in->op->rbuf;
        in->dst_room = h->bytes < in->op->bytes ? h->bytes : in->op->bytes;
    } else if (refused) { /* its payload is consumed and dropped */
        in->dst = NULL;
        in->dst_room = 0;
    } else {
        eng_unexp_t *u = calloc(1, sizeof *u);
        if (u && h->bytes) u->data = malloc(h->bytes);
        if (!u || (h->bytes && !u->data)) {
            /* Nothing can hold it: drop it and fail loudly rather than corrupt the stream. */
            MLC_WARN("engine: out of memory buffering a %llu-byte message from rank %d; it is dropped",
                     (unsigned long long)h->bytes, src);
            if (u) free(u);
            in->dst = NULL;
            in->dst_room = 0;
        } else {
            u->ctx = h->ctx;
            u->src = src;
            u->tag = h->tag;
            u->bytes = h->bytes;
            u->sig = h->sig;
            ux_append(ep, u);
            arrival_check(ep, src, h);
            in->ux = u;
            in->dst = u->data;
            in->dst_room = h->bytes;
        }
    }
    in->in_msg = true;
}

/* The eager message from src ends at stream position `end` (0: no payload,
 * never cut). */
static void finish_eager(eng_ep_t *ep, int src, uint64_t end)
{
    eng_inbound_t *in = &ep->in[src];
    in->in_msg = false;
    /* Read after the head that brought its last byte (acquire): a cut is marked before that. */
    bool cut = end && atomic_load_explicit(&ring_hdr(ep, src, ep->wrank)->cut_end, memory_order_relaxed) == end;
    if (in->op && cut)
        recv_cut(ep, in->op, src, in->hdr.bytes);
    else if (in->op)
        recv_finish(ep, in->op, src, in->hdr.tag, in->hdr.bytes);
    if (in->ux) {
        in->ux->cut = cut;
        in->ux->complete = true;
    }
    in->op = NULL;
    in->ux = NULL;
}

static void on_rndv(eng_ep_t *ep, int src, const eng_hdr_t *h, const mlc_shmem_ref_t *block)
{
    eng_op_t *op = take_posted(ep, h->ctx, src, h->tag);
    if (op) {
        if (step_accepts(op, src, h->tag, &h->sig, h->bytes))
            rndv_deliver(ep, op, src, h->tag, h->bytes, h->addr, block, h->cookie);
        else
            send_ack(ep, src, h->cookie); /* nothing is read from the sender's buffer */
        return;
    }
    eng_unexp_t *u = calloc(1, sizeof *u);
    if (!u) {
        MLC_WARN("engine: out of memory queueing a message from rank %d", src);
        return;
    }
    *u = (eng_unexp_t){.ctx = h->ctx, .src = src, .tag = h->tag, .bytes = h->bytes, .rndv = true,
                       .complete = true, .addr = h->addr, .cookie = h->cookie, .sig = h->sig, .block = *block};
    ux_append(ep, u);
    arrival_check(ep, src, h);
}

static void on_ack(eng_ep_t *ep, uint64_t cookie)
{
    eng_op_t *op = (eng_op_t *)(uintptr_t)cookie;
    (void)ep;
    op->got = op->bytes;
    op_done(op, MLC_SUCCESS); /* a cancelled one stays on ep->orphans */
}

bool eng_p2p_quiet(eng_ep_t *ep)
{
    if (atomic_load_explicit(&ep->ux_count, memory_order_acquire) != 0) return false;
    for (int src = 0; src < ep->wsize; src++) {
        if (src == ep->wrank) continue;
        eng_ring_hdr_t *h = ring_hdr(ep, src, ep->wrank);
        if (atomic_load_explicit(&h->head, memory_order_acquire) != atomic_load_explicit(&h->tail, memory_order_relaxed))
            return false;
    }
    return true;
}

/* Consume what rank src has written to us. Returns 1 if anything moved. */
static int poll_inbound(eng_ep_t *ep, int src)
{
    eng_ring_hdr_t *h = ring_hdr(ep, src, ep->wrank);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (head == tail) return 0;
    const char *data = ring_data(ep, src, ep->wrank);
    size_t r = ep->seg->ring_bytes;
    eng_inbound_t *in = &ep->in[src];
    while (head != tail) {
        if (!in->in_msg) {
            if (head - tail < sizeof(eng_hdr_t)) break;
            eng_hdr_t hdr;
            ring_get(data, r, tail, &hdr, sizeof hdr);
            tail += sizeof hdr;
            if (hdr.kind == ENG_ACK) {
                on_ack(ep, hdr.cookie);
            } else if (hdr.kind == ENG_RNDV) {
                static const mlc_shmem_ref_t none;
                on_rndv(ep, src, &hdr, &none);
            } else if (hdr.kind == ENG_RNDV_SHARED) { /* written with its block: both are here */
                mlc_shmem_ref_t block;
                ring_get(data, r, tail, &block, sizeof block);
                tail += sizeof block;
                on_rndv(ep, src, &hdr, &block);
            } else {
                start_eager(ep, src, &hdr);
                if (hdr.bytes == 0) finish_eager(ep, src, 0);
            }
            continue;
        }
        uint64_t n = head - tail < in->remaining ? head - tail : in->remaining;
        if (in->dst && in->dst_room) {
            uint64_t c = n < in->dst_room ? n : in->dst_room;
            ring_get(data, r, tail, in->dst, (size_t)c);
            in->dst += c;
            in->dst_room -= c;
        }
        if (in->ux) in->ux->received += n;
        tail += n;
        in->remaining -= n;
        if (in->remaining == 0) finish_eager(ep, src, tail);
        /* Hand space back at once so a streaming sender keeps going. */
        atomic_store_explicit(&h->tail, tail, memory_order_release);
    }
    atomic_store_explicit(&h->tail, tail, memory_order_release);
    eng_wake(ep, src);
    return 1;
}

/* ---- outbound --------------------------------------------------------------- */

static void sendq_pop(eng_ep_t *ep, int dst)
{
    eng_op_t *op = ep->sendq_head[dst];
    ep->sendq_head[dst] = op->next;
    if (!ep->sendq_head[dst]) ep->sendq_tail[dst] = NULL;
    op->next = NULL;
}

/* Push queued sends to dst as far as ring space allows. Returns 1 if anything moved. */
static int push_sends(eng_ep_t *ep, int dst)
{
    eng_ring_hdr_t *h = ring_hdr(ep, ep->wrank, dst);
    char *data = ring_data(ep, ep->wrank, dst);
    size_t r = ep->seg->ring_bytes;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    int moved = 0;
    eng_op_t *op;
    while ((op = ep->sendq_head[dst])) {
        uint64_t space = r - (head - tail);
        if (!op->hdr_written) {
            bool shared = op->rndv && op->block.size;
            size_t rec = sizeof(eng_hdr_t) + (shared ? sizeof op->block : 0);
            if (space < rec) break;
            eng_hdr_t hdr = {.kind = shared ? ENG_RNDV_SHARED : op->rndv ? ENG_RNDV : ENG_EAGER, .ctx = op->ctx,
                             .tag = op->tag, .bytes = op->bytes, .addr = (uint64_t)(uintptr_t)op->sbuf,
                             .cookie = (uint64_t)(uintptr_t)op};
            if (op->sig) hdr.sig = *op->sig;
            ring_put(data, r, head, &hdr, sizeof hdr);
            if (shared) ring_put(data, r, head + sizeof hdr, &op->block, sizeof op->block);
            head += rec;
            space -= rec;
            op->hdr_written = true;
            moved = 1;
            if (op->rndv) { /* completes on the receiver's ACK */
                sendq_pop(ep, dst);
                continue;
            }
        }
        uint64_t n = op->bytes - op->got < space ? op->bytes - op->got : space;
        if (op->cancelled && n && op->got + n == op->bytes) {
            /* Its last byte goes out now: mark the cut first, once the
             * receiver is past the previous one (it read that mark). */
            if (tail < atomic_load_explicit(&h->cut_end, memory_order_relaxed))
                n--;
            else
                atomic_store_explicit(&h->cut_end, head + n, memory_order_relaxed);
        }
        if (n) {
            ring_put(data, r, head, op->cancelled ? NULL : (const char *)op->sbuf + op->got, (size_t)n);
            head += n;
            op->got += n;
            moved = 1;
            atomic_store_explicit(&h->head, head, memory_order_release);
        }
        if (op->got < op->bytes) break;
        sendq_pop(ep, dst);
        op_done(op, MLC_SUCCESS); /* a cancelled one stays on ep->orphans */
    }
    if (moved) {
        atomic_store_explicit(&h->head, head, memory_order_release);
        eng_wake(ep, dst);
    }
    return moved;
}

mlc_status_t eng_isend(eng_comm_t *ec, uint32_t ctx, int peer, uint64_t tag, const void *buf, size_t bytes,
                       mlc_request_t *req, const mlc_sig_t *sig, eng_op_t **out)
{
    eng_ep_t *ep = ec->ep;
    int w = ec->world_of[peer];
    eng_op_t *op = eng_op_get(ep);
    if (!op) return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory for a send");
    *op = (eng_op_t){.is_send = true, .ctx = ctx, .peer = w, .tag = tag, .sbuf = buf, .bytes = bytes,
                     .req = req, .sig = sig, .comm = ec};
    *out = op;
    if (w == ep->wrank) {
        /* To self: hand it to a posted receive, or keep a copy (the send completes at once). */
        eng_op_t *r = take_posted(ep, ctx, w, tag);
        if (r) {
            if (!sig || step_accepts(r, w, tag, sig, bytes)) {
                if (!r->cancelled && bytes) memcpy(r->rbuf, buf, bytes < r->bytes ? bytes : r->bytes);
                recv_finish(ep, r, w, tag, bytes);
            }
        } else {
            eng_unexp_t *u = calloc(1, sizeof *u);
            if (!u || (bytes && !(u->data = malloc(bytes)))) {
                free(u);
                eng_op_put(ep, op);
                return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory buffering a %zu-byte send to self",
                                 bytes);
            }
            if (bytes) memcpy(u->data, buf, bytes);
            u->ctx = ctx;
            u->src = w;
            u->tag = tag;
            u->bytes = u->received = bytes;
            u->complete = true;
            if (sig) u->sig = *sig;
            ux_append(ep, u);
        }
        op->got = bytes;
        op_done(op, MLC_SUCCESS);
        return MLC_SUCCESS;
    }
    /* Rendezvous where the receiver can read the buffer: in this process, or
     * by single copy, and then mapped instead where the buffer lies in a
     * shared block (a block it cannot map it still reads by single copy);
     * else eager through the ring. (Without single copy a shared block is
     * streamed too: a receiver that could not map it would have no other
     * way, and the sender would not know.) */
    op->rndv = bytes > ep->eager_max &&
               (ep->threads || (ep->cma && ep->cma_ok[(size_t)w * (size_t)ep->wsize + (size_t)ep->wrank]));
    if (op->rndv && !ep->threads) mlc_shmem_find(buf, bytes, &op->block);
    if (ep->sendq_tail[w])
        ep->sendq_tail[w]->next = op;
    else
        ep->sendq_head[w] = op;
    ep->sendq_tail[w] = op;
    push_sends(ep, w);
    return MLC_SUCCESS;
}

mlc_status_t eng_irecv(eng_comm_t *ec, uint32_t ctx, int peer, uint64_t tag, bool any_tag, void *buf, size_t cap,
                       mlc_request_t *req, const mlc_sig_t *sig, eng_op_t **out)
{
    eng_ep_t *ep = ec->ep;
    eng_op_t *op = eng_op_get(ep);
    if (!op) return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory for a receive");
    *op = (eng_op_t){.ctx = ctx, .peer = peer == ENG_ANY ? ENG_ANY : ec->world_of[peer], .tag = tag,
                     .any_tag = any_tag, .rbuf = buf, .bytes = cap, .req = req, .sig = sig, .comm = ec};
    *out = op;
    eng_unexp_t *prev = NULL;
    for (eng_unexp_t *u = ep->ux_head; u; prev = u, u = u->next) {
        if (!matches(op, u->ctx, u->src, u->tag)) continue;
        ux_remove(ep, u, prev);
        if (!step_accepts(op, u->src, u->tag, &u->sig, u->bytes)) {
            if (u->rndv) send_ack(ep, u->src, u->cookie);
            if (!u->complete) { /* still streaming in: the rest is dropped */
                eng_inbound_t *in = &ep->in[u->src];
                in->ux = NULL;
                in->dst = NULL;
                in->dst_room = 0;
            }
        } else if (u->rndv) {
            rndv_deliver(ep, op, u->src, u->tag, u->bytes, u->addr, &u->block, u->cookie);
        } else if (u->cut) {
            recv_cut(ep, op, u->src, u->bytes);
        } else if (u->complete) {
            size_t n = u->bytes < cap ? (size_t)u->bytes : cap;
            if (n) memcpy(buf, u->data, n);
            recv_finish(ep, op, u->src, u->tag, u->bytes);
        } else {
            /* Still streaming in: take over the stream. */
            eng_inbound_t *in = &ep->in[u->src];
            size_t have = u->received < cap ? (size_t)u->received : cap;
            if (have) memcpy(buf, u->data, have);
            in->op = op;
            in->ux = NULL;
            in->dst = (char *)buf + have;
            in->dst_room = (u->bytes < cap ? u->bytes : cap) - have;
        }
        free(u->data);
        free(u);
        return MLC_SUCCESS;
    }
    if (ep->posted_tail)
        ep->posted_tail->next = op;
    else
        ep->posted_head = op;
    ep->posted_tail = op;
    return MLC_SUCCESS;
}

bool eng_probe(eng_comm_t *ec, int peer, int tag, mlc_msg_status_t *st)
{
    eng_ep_t *ep = ec->ep;
    int w = peer == MLC_ANY_SOURCE ? ENG_ANY : ec->world_of[peer];
    for (eng_unexp_t *u = ep->ux_head; u; u = u->next) {
        if (u->ctx != ec->ctx || (w != ENG_ANY && u->src != w) || (tag != MLC_ANY_TAG && u->tag != (uint64_t)tag))
            continue;
        st->source = ec->comm_of[u->src];
        st->tag = (int)u->tag;
        st->bytes = (size_t)u->bytes;
        return true;
    }
    return false;
}

/* Forget op wherever it is queued; ops the peer may still touch are only marked. */
void eng_op_cancel(eng_ep_t *ep, eng_op_t *op)
{
    if (op->done) {
        eng_op_put(ep, op);
        return;
    }
    op->cancelled = true;
    op->req = NULL;
    op->sig = NULL; /* its request's memory is gone */
    if (op->is_send) {
        eng_op_t **pp = &ep->sendq_head[op->peer], *prev = NULL;
        while (*pp && *pp != op) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp && !op->hdr_written) { /* nothing of it sent yet */
            *pp = op->next;
            if (ep->sendq_tail[op->peer] == op) ep->sendq_tail[op->peer] = prev;
            eng_op_put(ep, op);
            return; /* not an orphan too: it is free, and reused */
        }
        /* Streaming (finishes with zeros) or awaiting an ACK that may never come
         * (dead peer): it lives until the endpoint goes. */
        op->orphan_next = ep->orphans;
        ep->orphans = op;
        return;
    }
    eng_op_t *prev = NULL;
    for (eng_op_t *p = ep->posted_head; p; prev = p, p = p->next)
        if (p == op) {
            if (prev)
                prev->next = op->next;
            else
                ep->posted_head = op->next;
            if (ep->posted_tail == op) ep->posted_tail = prev;
            eng_op_put(ep, op);
            return;
        }
    for (int s = 0; s < ep->wsize; s++)
        if (ep->in[s].op == op) { /* matched and streaming: discard the rest */
            ep->in[s].op = NULL;
            ep->in[s].dst = NULL;
            ep->in[s].dst_room = 0;
            eng_op_put(ep, op);
            return;
        }
}

int eng_p2p_progress(eng_ep_t *ep)
{
    int moved = 0;
    for (int s = 0; s < ep->wsize; s++)
        if (s != ep->wrank) moved |= poll_inbound(ep, s);
    for (int d = 0; d < ep->wsize; d++)
        if (ep->sendq_head[d]) moved |= push_sends(ep, d);
    if (ep->acks) moved |= flush_acks(ep);
    return moved;
}
