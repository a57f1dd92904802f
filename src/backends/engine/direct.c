/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Direct collectives of the shared-memory engine, registered in the selector
 * as "direct". Two shapes:
 *
 *  small (payload fits a slot): every rank copies its data into its slot and
 *  raises `pub`; each rank then reduces / copies from the slots itself, in
 *  rank order, so every rank computes bitwise-identical results; `done2`
 *  releases the slot for the next direct collective. One copy in, p reads.
 *
 *  large (single copy between every pair: threads, or CMA probed ok): ranks
 *  publish their buffer addresses; allreduce = each rank reduces its slice
 *  reading peers' send buffers (process_vm_readv / memcpy) through two
 *  cache-sized bounce buffers, then copies every other slice from its owner's
 *  receive buffer. A large local result (MLC_STREAM_MIN) is written with
 *  streaming stores. No ring, no intermediate copies through shared memory;
 *  but a large in-place broadcast between processes streams through the
 *  root's stage (staged broadcast, below): there two copies that run at
 *  once beat one process_vm_readv, which pins every page it reads. So does
 *  an allreduce between processes from 16 MiB (staged allreduce, below),
 *  which needs no single copy at all; and where single copy is slow or
 *  missing, every large allreduce and allgather (stages_eager; where it is
 *  slow, allgathers from 1 MiB).
 *
 * Each rank publishes its call's signature with `pub`; a rank compares the
 * signature of every peer it is about to read before it reads, so calls with
 * different arguments fail with MLC_ERR_MISMATCH instead of reading past a
 * buffer. A rank that reads nothing (broadcast root, reduce non-root) waits
 * for its readers' `done2`, so a mismatch fails its call too (on the quick
 * path it does not wait: a mismatch fails its next call that compares).
 *
 *  quick (payload of at most ENG_QUICK_DATA bytes; barrier): each rank puts
 *  its payload, the digest of its calls and v in its own announcement line and
 *  reads the peers' it needs (a broadcast reader: the root's). Per rank and
 *  peer one cache line moves, written by
 *  one rank only: no flag line is shared, and nothing waits for the
 *  previous op's readers (see quick_progress).
 *
 * Every op announces its v and the digest of the rank's direct calls so far
 * (quick[v % ENG_QUICK_DEPTH]), whatever its path, so a rank on the quick
 * path sees a peer that took another path for another call, or that
 * called something else in an op nobody compared (every rank a broadcast
 * root: none reads), and fails it as a mismatch; a rank on the slot or
 * large path sees a peer on the quick path the same way (published()).
 *
 * Everything waits on flags without blocking: the state machine returns 0
 * while a flag is not there, and the engine's progress loop (with its
 * timeout, abort and peer-death rules) calls it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/backend.h"
#include "base/dtype.h"
#include "base/clock.h"
#include "base/stream_copy.h"
#include "engine.h"
#include "base/error.h"

#define CHUNK_BYTES (128u << 10) /* bounce buffers stay in L2 */
/* The scratch of a large reduction: two bounce chunks, the chunk a streamed
 * result is reduced into (stream_copy.h), then the accumulator when in place. */
#define SCRATCH_CHUNKS 3

/* CHUNK_BYTES in whole elements of esize bytes. */
static size_t reduce_chunk(size_t esize)
{
    return CHUNK_BYTES / esize * esize;
}

/* Whether this rank writes a result of `bytes` that no peer reads (an
 * allgather's whole result, a reduce_scatter's block) with streaming
 * stores. An allgather counts its whole result, not a block: every block
 * of it is this rank's to write. Where the ranks' buffers fit the shared
 * cache, plain stores win, as the caller reads the result from there next;
 * where they do not, streaming ones do (the default of 16 MiB and what it
 * was measured against: docs/ENGINE.md, "Collectives", MLC_STREAM_MIN).
 * Not a slice peers read next (allreduce): they find it in the caches
 * otherwise (2 ranks, 8 MiB allreduce: 1.13 ms with plain stores, 1.5
 * streamed). */
static bool streams(const eng_comm_t *ec, size_t bytes)
{
    return ec->ep->stream_min && bytes >= ec->ep->stream_min;
}

/* The same for an allgather, staged or by single copy: its whole result. */
static bool allgather_streams(const mlc_request_t *req)
{
    return streams(req->comm->impl, req->args.count * req->args.esize * (size_t)req->comm->size);
}

/* Copy with streaming stores or plain ones. A staged operation decides once
 * for the whole result (streams()) and copies it chunk by chunk. */
static void copy_streamed_if(bool stream, void *dst, const void *src, size_t n)
{
    if (stream)
        mlc_copy_stream(dst, src, n);
    else
        memcpy(dst, src, n);
}

/* Copy a result no peer reads: streamed past the caches when it is large. */
static void copy_result(const eng_comm_t *ec, void *dst, const void *src, size_t n)
{
    copy_streamed_if(streams(ec, n), dst, src, n);
}

enum { F_PUB, F_DONE1, F_READY, F_DONE2 };

static inline eng_slot_t *slot_of(const eng_comm_t *ec, int r)
{
    return ec->member_slot[r];
}

static inline atomic_uint_fast64_t *flag(eng_slot_t *s, int f)
{
    switch (f) {
    case F_PUB: return &s->pub;
    case F_DONE1: return &s->done1;
    case F_READY: return &s->ready;
    default: return &s->done2;
    }
}

static void raise_flag(eng_comm_t *ec, int f, uint64_t v)
{
    atomic_store_explicit(flag(slot_of(ec, ec->comm->rank), f), v, memory_order_release);
    eng_wake_members(ec->ep, ec->world_of, ec->comm->size, ec->comm->rank);
}

static bool flag_at_least(const eng_comm_t *ec, int r, int f, uint64_t v)
{
    return atomic_load_explicit(flag(slot_of(ec, r), f), memory_order_acquire) >= v;
}

static bool all_at_least(const eng_comm_t *ec, int f, uint64_t v)
{
    for (int r = 0; r < ec->comm->size; r++)
        if (!flag_at_least(ec, r, f, v)) return false;
    return true;
}

/* A count a rank raises during op v (chunks staged, reduced): v's low 24
 * bits above a 40-bit count, so that a peer still holding op v - 1's word
 * reads a count of 0 for op v. (A peer reads the word only during ops v - 1
 * and v: the writer starts op v + 1 once every rank finished op v.) */
#define PROGRESS_COUNT_BITS 40

static uint64_t progress_word(uint64_t v, uint64_t count)
{
    return (v & 0xffffffu) << PROGRESS_COUNT_BITS | count;
}

static uint64_t progress_of(const atomic_uint_fast64_t *word, uint64_t v)
{
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    return w >> PROGRESS_COUNT_BITS == (v & 0xffffffu) ? w & (((uint64_t)1 << PROGRESS_COUNT_BITS) - 1) : 0;
}

static inline unsigned line_of(uint64_t v)
{
    return (unsigned)(v % ENG_QUICK_DEPTH);
}

/* Announce op v in this rank's line quick[line_of(v)]: the payload (n bytes,
 * at most ENG_QUICK_DATA), the digest of its calls, then v (release). The
 * line was last written for op v - ENG_QUICK_DEPTH; the caller knows every
 * peer is done with that op. */
static void announce(eng_comm_t *ec, const eng_direct_t *d, const void *payload, size_t n)
{
    eng_slot_t *s = slot_of(ec, ec->comm->rank);
    eng_quick_t *q = &s->quick[line_of(d->v)];
    if (n) memcpy(q->data, payload, n);
    q->digest = d->digest;
    mlc_sig_copy(&s->quick_sig[line_of(d->v)], d->sig);
    atomic_store_explicit(&q->v, d->v, memory_order_release);
}

/* Peer r's announcement of op v, or NULL while it has not made it. (Its line
 * for v cannot hold v + ENG_QUICK_DEPTH yet: that needs this rank at v + 1.) */
static const eng_quick_t *announced(const eng_comm_t *ec, int r, uint64_t v)
{
    const eng_quick_t *q = &slot_of(ec, r)->quick[line_of(v)];
    return atomic_load_explicit(&q->v, memory_order_acquire) >= v ? q : NULL;
}

/* The op every peer must have announced before this rank announces op v
 * (quick path): they are then done with op v - ENG_QUICK_DEPTH, whose line
 * v overwrites. 0 (always announced) for the first ops. */
static uint64_t line_free_after(uint64_t v)
{
    return v >= ENG_QUICK_DEPTH ? v - ENG_QUICK_DEPTH + 1 : 0;
}

/* Whether the slot path may start op v: its slot, flags and announcement
 * line are free once every rank finished op v - 1 (done2). After a quick op
 * (which reads no slot) it is enough that this rank finished it and every
 * peer announced it: the peers are then done with every earlier op. */
static bool prev_done(const eng_comm_t *ec, const eng_direct_t *d)
{
    if (!d->after_quick) return all_at_least(ec, F_DONE2, d->v - 1);
    if (!flag_at_least(ec, ec->comm->rank, F_DONE2, d->v - 1)) return false;
    for (int r = 0; r < ec->comm->size; r++)
        if (r != ec->comm->rank && !announced(ec, r, d->v - 1)) return false;
    return true;
}

/* Publish this rank's call in its slot (raising pub releases it), and announce it. */
static void publish_sig(eng_comm_t *ec, const eng_direct_t *d)
{
    eng_slot_t *s = slot_of(ec, ec->comm->rank);
    s->sig_hash = d->sig_hash;
    mlc_sig_copy(&s->sig, d->sig);
    announce(ec, d, NULL, 0);
}

/* Peer r has published op v (pub seen): its signature is stable until every
 * rank is done with op v. MLC_SUCCESS if it is this rank's call. */
static int quick_mismatch(const eng_comm_t *ec, const eng_direct_t *d, int r);

static mlc_status_t check_peer(const eng_comm_t *ec, const eng_direct_t *d, int r)
{
    const eng_slot_t *s = slot_of(ec, r);
    /* Its announcement of op v (made before pub) carries the digest of every
     * direct call before it: one nobody compared (every rank a broadcast
     * root on the quick path) shows here too. */
    if (s->quick[line_of(d->v)].digest != d->digest) return quick_mismatch(ec, d, r);
    if (s->sig_hash == d->sig_hash) return MLC_SUCCESS; /* the full signature is a cache line further */
    const mlc_sig_t *theirs = &s->sig;
    if (mlc_sig_same(d->sig, theirs)) return MLC_SUCCESS;
    char msg[384];
    mlc_sig_mismatch(d->sig, ec->comm->rank, theirs, r, msg, sizeof msg);
    return mlc_error(MLC_ERR_MISMATCH, "%s", msg);
}

static mlc_status_t check_all(const eng_comm_t *ec, const eng_direct_t *d)
{
    for (int r = 0; r < ec->comm->size; r++)
        if (r != ec->comm->rank && check_peer(ec, d, r) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
    return MLC_SUCCESS;
}

/* Whether peer r published op v on the slot or large path (1), not yet (0),
 * or announced op v with another digest (MLC_ERR_MISMATCH): it made another
 * call, on a path that raises no pub (the quick path), and it may run ahead
 * of this rank (a broadcast root does), so waiting for its pub would be
 * waiting for ever. */
static int published(const eng_comm_t *ec, const eng_direct_t *d, int r)
{
    if (flag_at_least(ec, r, F_PUB, d->v)) return 1;
    const eng_quick_t *q = announced(ec, r, d->v);
    if (q && q->digest != d->digest) return quick_mismatch(ec, d, r);
    return 0;
}

static int all_published(const eng_comm_t *ec, const eng_direct_t *d)
{
    for (int r = 0; r < ec->comm->size; r++) {
        if (r == ec->comm->rank) continue;
        int k = published(ec, d, r);
        if (k != 1) return k;
    }
    return 1;
}

static uint64_t started_word(uint64_t call, uint64_t hash)
{
    return (call & 0xffffu) << 48 | (hash & 0xffffffffffffull);
}

void eng_board_post(eng_comm_t *ec, const mlc_sig_t *sig, uint64_t hash)
{
    eng_slot_t *mine = slot_of(ec, ec->comm->rank);
    atomic_store_explicit(&mine->started[sig->call & 1], started_word(sig->call, hash), memory_order_release);
    struct eng_board *b = &mine->board[sig->call % ENG_BOARD];
    atomic_store_explicit(&b->v, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    mlc_sig_copy(&b->sig, sig);
    atomic_store_explicit(&b->v, sig->call + 1, memory_order_release);
}

bool eng_board_mismatch(eng_comm_t *ec, const mlc_sig_t *sig, char *msg, size_t len)
{
    for (int r = 0; r < ec->comm->size; r++) {
        if (r == ec->comm->rank) continue;
        struct eng_board *b = &slot_of(ec, r)->board[sig->call % ENG_BOARD];
        uint64_t v1 = atomic_load_explicit(&b->v, memory_order_acquire);
        if (v1 != sig->call + 1) continue; /* not there yet, or moved on */
        mlc_sig_t theirs = b->sig;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&b->v, memory_order_relaxed) != v1) continue;
        if (mlc_sig_same(&theirs, sig)) continue;
        mlc_sig_mismatch(sig, ec->comm->rank, &theirs, r, msg, len);
        return true;
    }
    return false;
}

/* Elements of slice r when count is split over p ranks. */
static void slice(size_t count, int p, int r, size_t *lo, size_t *len)
{
    size_t base = count / (size_t)p, rem = count % (size_t)p;
    *lo = (size_t)r * base + ((size_t)r < rem ? (size_t)r : rem);
    *len = base + ((size_t)r < rem ? 1 : 0);
}

static size_t payload_bytes(const mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    size_t n = a->count * a->esize;
    if (req->coll == MLC_COLL_REDUCE_SCATTER) n *= (size_t)req->comm->size;
    return n;
}

/* A peer's buffer of this call, read in place or by single copy. */
enum { PEER_SEND, PEER_RECV };

/* Its address in the peer's process. */
static uint64_t peer_buf(const eng_slot_t *s, int which)
{
    return which == PEER_RECV ? s->raddr : s->saddr;
}

/* A block its owner published that is no longer open in its process
 * (ENOENT) is most often a dying owner's: its files close before the
 * backend can tell it is gone. Asked again for this long then. */
#define OWNER_GRACE_S 0.05

/* Byte `at` of comm rank r's send or receive buffer of this call, in place:
 * its shared block (mlc_mem_alloc) mapped here. NULL when r published no
 * block for that buffer or it cannot be mapped; then the caller reads by
 * single copy, or, where there is none, the call fails on every member
 * with the reason. Peers read only after comparing the calls: r's buffer
 * has the length this rank's has. */
static const char *peer_in_place(const mlc_request_t *req, int r, int which, size_t at, mlc_status_t *st)
{
    eng_comm_t *ec = req->comm->impl;
    const eng_slot_t *s = slot_of(ec, r);
    const mlc_shmem_ref_t *ref = which == PEER_RECV ? &s->rref : &s->sref;
    *st = MLC_SUCCESS;
    if (!ref->size) return NULL;
    uint64_t buf = peer_buf(s, which);
    size_t len = which == PEER_RECV ? req->args.count * req->args.esize : payload_bytes(req);
    char why[200];
    const char *p = eng_peer_view(ec->ep, ec->world_of[r], ref, buf, len, at, why, sizeof why);
    int err = p ? 0 : errno;
    if (!p && !ec->cma_all && eng_fail_posted(ec)) {
        /* A peer failed first (and may have freed its blocks since): its reason. */
        *st = eng_fail_adopt(ec) != MLC_SUCCESS ? mlc_request_comm_failed(req) : MLC_ERR_INTERNAL;
    } else if (!p && !ec->cma_all) {
        /* The peers wait for this rank's reads: fail them too, with the reason. */
        char msg[320], note[224], gone[160];
        double grace = err == ENOENT || err == ESRCH ? OWNER_GRACE_S : 0;
        if (eng_peer_gone_within(ec->ep, ec->world_of[r], grace, gone, sizeof gone) != ENG_ALIVE) {
            snprintf(note, sizeof note, "peer rank %d %s", r, gone);
            snprintf(msg, sizeof msg, "rank %d: %s", req->comm->rank, note);
            *st = eng_fail_comm_note(ec, MLC_ERR_PEER_LOST, msg, note);
        } else {
            snprintf(msg, sizeof msg, "%s: cannot map rank %d's shared buffer (mlc_mem_alloc): %s; and single-copy "
                     "reads are not available here (MLC_CMA)", mlc_coll_name(req->coll), r, why);
            *st = eng_fail_comm(ec, MLC_ERR_SYSTEM, msg);
        }
        mlc_error(*st, "%s", msg);
    }
    return p;
}

/* Copy n bytes at byte `at` of comm rank r's send or receive buffer to dst by single copy. */
static mlc_status_t single_copy(const mlc_request_t *req, int r, int which, size_t at, void *dst, size_t n)
{
    eng_comm_t *ec = req->comm->impl;
    const eng_slot_t *s = slot_of(ec, r);
    return eng_rndv_copy(ec->ep, ec, ec->world_of[r], peer_buf(s, which) + at, dst, n);
}

/* The same from its mapped block when it has one, else by single copy. */
static mlc_status_t peer_read(const mlc_request_t *req, int r, int which, size_t at, void *dst, size_t n, bool stream)
{
    if (n == 0) return MLC_SUCCESS;
    mlc_status_t st;
    const char *src = peer_in_place(req, r, which, at, &st);
    if (st != MLC_SUCCESS) return st;
    if (!src) return single_copy(req, r, which, at, dst, n);
    /* Checked before and after (eng_mapped_copy): r may drop the call and reuse its block meanwhile. */
    eng_comm_t *ec = req->comm->impl;
    return eng_mapped_copy(ec->ep, ec, ec->world_of[r], src, dst, n, stream ? mlc_copy_stream : NULL);
}

/* Bytes [at, at + n) of comm rank r's send buffer: in place, else copied
 * into bounce; NULL (and *st) on failure. */
static const char *peer_send_bytes(const mlc_request_t *req, int r, size_t at, size_t n, char *bounce, mlc_status_t *st)
{
    const char *p = peer_in_place(req, r, PEER_SEND, at, st);
    if (p || *st != MLC_SUCCESS) return p;
    *st = single_copy(req, r, PEER_SEND, at, bounce, n);
    return *st == MLC_SUCCESS ? bounce : NULL;
}

/* After a reduction read n bytes of comm rank r's send buffer in place:
 * whether r dropped the call meanwhile and gave that memory back to its
 * caller (eng_mapped_read_check). */
static mlc_status_t in_place_read_done(const mlc_request_t *req, int r, size_t n)
{
    eng_comm_t *ec = req->comm->impl;
    return eng_mapped_read_check(ec->ep, ec, ec->world_of[r], n);
}

/* Whether a call takes the quick path (its payload fits an announcement line). */
static bool quick_fits(const mlc_request_t *req)
{
    switch (req->coll) {
    case MLC_COLL_BARRIER: return true;
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_REDUCE:
    case MLC_COLL_BROADCAST:
    case MLC_COLL_ALLGATHER:
    case MLC_COLL_REDUCE_SCATTER: return payload_bytes(req) <= ENG_QUICK_DATA;
    default: return false;
    }
}

static bool stages_allreduce(const mlc_request_t *req);
static bool stages_allgather(const mlc_request_t *req);

const char eng_direct_name[] = "direct";

/* The scratch of a single-copy allreduce or reduce-scatter: SCRATCH_CHUNKS
 * chunks, plus the accumulator when in place. */
static mlc_status_t take_scratch(mlc_request_t *req, eng_direct_t *d)
{
    if (d->tmp) return MLC_SUCCESS;
    size_t lo, len = req->args.count;
    if (req->coll == MLC_COLL_ALLREDUCE) slice(req->args.count, req->comm->size, req->comm->rank, &lo, &len);
    size_t acc = len * req->args.esize;
    size_t chunk = reduce_chunk(req->args.esize);
    /* From the communicator's cache (base/scratch.h): a fresh block of this
     * size would fault in every page (an in-place 128 MiB all-reduce took
     * 3.5x as long). */
    d->tmp = mlc_scratch_take(&req->comm->host_scratch, (req->args.inplace ? acc : 0) + SCRATCH_CHUNKS * chunk);
    if (!d->tmp) return mlc_error(MLC_ERR_NO_MEMORY, "%s: out of memory for %zu bytes of scratch",
                                  mlc_coll_name(req->coll), acc + SCRATCH_CHUNKS * chunk);
    return MLC_SUCCESS;
}

/* Publish the shared blocks (mlc_mem_alloc) of this call's buffers that
 * peers read (size 0: none). Threads read each other's memory anyway. */
static void publish_blocks(const mlc_request_t *req, eng_slot_t *mine)
{
    const mlc_args_t *a = &req->args;
    size_t n = payload_bytes(req);
    bool threads = ((const eng_comm_t *)req->comm->impl)->ep->threads;
    if (threads || !mlc_shmem_find(a->sendbuf, n, &mine->sref)) mine->sref.size = 0;
    if (threads || req->coll != MLC_COLL_ALLREDUCE || !mlc_shmem_find(a->recvbuf, n, &mine->rref))
        mine->rref.size = 0;
}

/* Whether every buffer this call reads of a peer lies in a shared block
 * (the root's, of a broadcast): then ranks read them in place on the
 * single-copy path, and staging would only add copies. Every rank reads the
 * same published blocks after pub, so all decide alike. */
static bool shared_buffers(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    if (req->coll == MLC_COLL_BROADCAST) return slot_of(ec, req->args.root)->sref.size != 0;
    for (int r = 0; r < req->comm->size; r++) {
        const eng_slot_t *s = slot_of(ec, r);
        if (!s->sref.size || (req->coll == MLC_COLL_ALLREDUCE && !s->rref.size)) return false;
    }
    return true;
}

const char *eng_direct_choose(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    if (!ec || !ec->slots) return NULL;
    size_t n = payload_bytes(req);
    bool small = n <= ENG_SLOT_DATA;
    switch (req->coll) {
    case MLC_COLL_BARRIER: return eng_direct_name;
    case MLC_COLL_REDUCE: return small ? eng_direct_name : NULL;
    case MLC_COLL_ALLREDUCE: /* staged, it needs no single copy */
        return small || ec->cma_all || stages_allreduce(req) ? eng_direct_name : NULL;
    case MLC_COLL_ALLGATHER: return small || ec->cma_all || stages_allgather(req) ? eng_direct_name : NULL;
    case MLC_COLL_BROADCAST:
    case MLC_COLL_REDUCE_SCATTER: return small || ec->cma_all ? eng_direct_name : NULL;
    default: return NULL;
    }
}

mlc_status_t eng_direct_start(mlc_request_t *req, const mlc_sig_t *sig, uint64_t hash, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    if (!ec->slots)
        return mlc_error(MLC_ERR_UNSUPPORTED, "%s: algorithm 'direct' needs a slot area and this communicator has "
                         "none (this segment has %u slot areas, one per communicator, and all are taken)",
                         mlc_coll_name(req->coll), ec->ep->seg->slot_areas);
    size_t n = payload_bytes(req);
    bool small = n <= ENG_SLOT_DATA;
    bool ok = req->coll == MLC_COLL_BARRIER || small || (ec->cma_all && req->coll != MLC_COLL_REDUCE) ||
              (req->coll == MLC_COLL_ALLREDUCE && stages_allreduce(req)) ||
              (req->coll == MLC_COLL_ALLGATHER && stages_allgather(req));
    if (!ok || (req->coll != MLC_COLL_BARRIER && req->coll != MLC_COLL_REDUCE &&
                req->coll != MLC_COLL_ALLREDUCE && req->coll != MLC_COLL_BROADCAST &&
                req->coll != MLC_COLL_ALLGATHER && req->coll != MLC_COLL_REDUCE_SCATTER))
        return mlc_error(MLC_ERR_UNSUPPORTED, "%s of %zu bytes: algorithm 'direct' needs single-copy access "
                         "between every pair of ranks (see MLC_CMA) or a payload of at most %d bytes (or, "
                         "an allreduce or allgather, a communicator with stages: see MLC_STAGES)",
                         mlc_coll_name(req->coll), n, ENG_SLOT_DATA);
    memset(d, 0, sizeof *d);
    d->sig = sig;
    d->sig_hash = hash;
    d->v = ++ec->direct_seq;
    /* Every direct call enters the digest, in order: a peer whose digest
     * differs called something else now or in an op nobody compared. */
    ec->digest = (ec->digest ^ hash) * 0x9e3779b97f4a7c15ull;
    ec->digest ^= ec->digest >> 29;
    d->digest = ec->digest;
    d->quick = quick_fits(req);
    d->after_quick = ec->quick_seq == d->v - 1;
    if (d->quick) ec->quick_seq = d->v;
    /* A staged allreduce needs none, unless its buffers turn out shared (large_progress). */
    if (!small && ((req->coll == MLC_COLL_ALLREDUCE && !stages_allreduce(req)) || req->coll == MLC_COLL_REDUCE_SCATTER))
        return take_scratch(req, d);
    return MLC_SUCCESS;
}

void eng_direct_cancel(eng_comm_t *ec, eng_direct_t *d)
{
    mlc_scratch_give(&ec->comm->host_scratch, d->tmp);
    d->tmp = NULL;
}

/* Reduce element block [off, off+len) (bytes) of every rank's send buffer, in
 * rank order, into acc. Remote blocks are read in place where their owner's
 * send buffer is a shared block, else into the bounce buffers. With
 * stream, each chunk is reduced into the third scratch chunk, which stays in
 * the cache, and streamed out to acc from there. */
static mlc_status_t reduce_block(mlc_request_t *req, size_t off, size_t len, char *acc, char *bounce, bool stream)
{
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    size_t chunk = reduce_chunk(a->esize);
    char *b0 = bounce, *b1 = bounce + chunk;
    for (size_t c = 0; c < len; c += chunk) {
        size_t n = len - c < chunk ? len - c : chunk;
        char *out = stream ? bounce + 2 * chunk : acc + c;
        const char *src[2] = {NULL, NULL};
        bool in_place[2] = {false, false}; /* read from the peer's mapped block, not a bounce copy */
        mlc_status_t st;
        for (int r = 0; r < 2 && r < p; r++) {
            if (r == me) {
                src[r] = (const char *)a->sendbuf + off + c;
            } else {
                char *b = r == 0 ? b0 : b1;
                src[r] = peer_send_bytes(req, r, off + c, n, b, &st);
                if (!src[r]) return st;
                in_place[r] = src[r] != b;
            }
        }
        if (p == 1) {
            memmove(acc + c, src[0], n);
            continue;
        }
        mlc_reduce_apply3(src[0], src[1], out, n / a->esize, a->dtype, a->op);
        for (int r = 0; r < 2; r++)
            if (in_place[r] && (st = in_place_read_done(req, r, n)) != MLC_SUCCESS) return st;
        for (int r = 2; r < p; r++) {
            const char *b = (const char *)a->sendbuf + off + c;
            if (r != me && !(b = peer_send_bytes(req, r, off + c, n, b1, &st))) return st;
            mlc_reduce_apply3(out, b, out, n / a->esize, a->dtype, a->op);
            if (r != me && b != b1 && (st = in_place_read_done(req, r, n)) != MLC_SUCCESS) return st;
        }
        if (a->op == MLC_AVG) mlc_reduce_divide(out, n / a->esize, a->dtype, p);
        if (stream) mlc_copy_stream(acc + c, out, n);
    }
    return MLC_SUCCESS;
}

/* Reduce the slots' [off, off+len) in rank order into out. */
static void reduce_slots(mlc_request_t *req, size_t off, size_t len, char *out)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size;
    size_t cnt = len / a->esize;
    if (len == 0) return; /* count 0: buffers may be NULL */
    if (p == 1)
        memcpy(out, slot_of(ec, 0)->data + off, len);
    else
        mlc_reduce_apply3(slot_of(ec, 0)->data + off, slot_of(ec, 1)->data + off, out, cnt, a->dtype, a->op);
    for (int r = 2; r < p; r++) mlc_reduce_apply3(out, slot_of(ec, r)->data + off, out, cnt, a->dtype, a->op);
    if (a->op == MLC_AVG) mlc_reduce_divide(out, cnt, a->dtype, p);
}

/* Reduce element bytes [off, off+len) of every rank's announcement of op v, in rank order, into out. */
static void reduce_lines(mlc_request_t *req, uint64_t v, size_t off, size_t len, char *out)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size;
    size_t cnt = len / a->esize;
    if (len == 0) return; /* count 0: buffers may be NULL */
    const unsigned char *d0 = slot_of(ec, 0)->quick[line_of(v)].data + off;
    if (p == 1)
        memcpy(out, d0, len);
    else
        mlc_reduce_apply3(d0, slot_of(ec, 1)->quick[line_of(v)].data + off, out, cnt, a->dtype, a->op);
    for (int r = 2; r < p; r++) mlc_reduce_apply3(out, slot_of(ec, r)->quick[line_of(v)].data + off, out, cnt, a->dtype, a->op);
    if (a->op == MLC_AVG) mlc_reduce_divide(out, cnt, a->dtype, p);
}

/* Peer r announced op v with another digest: word it from both signatures
 * of op v or, when those agree, of the latest earlier op that differs among
 * those both lines still hold (a call nobody compared: see reads_nothing).
 * The peer may be rewriting an earlier line meanwhile (it can be ahead): at
 * worst the words are off, the verdict is not. */
static int quick_mismatch(const eng_comm_t *ec, const eng_direct_t *d, int r)
{
    const eng_slot_t *mine = slot_of(ec, ec->comm->rank), *theirs = slot_of(ec, r);
    char msg[384];
    uint64_t v = d->v;
    const mlc_sig_t *a = d->sig, *b = &theirs->quick_sig[line_of(v)];
    for (uint64_t u = v - 1; mlc_sig_same(a, b) && u >= 1 && u + ENG_QUICK_DEPTH > v; u--) {
        if (atomic_load_explicit(&theirs->quick[line_of(u)].v, memory_order_acquire) != u) break;
        a = &mine->quick_sig[line_of(u)];
        b = &theirs->quick_sig[line_of(u)];
    }
    if (mlc_sig_same(a, b))
        snprintf(msg, sizeof msg, "rank %d vs rank %d: they called different collectives earlier on this "
                 "communicator (before call #%llu)", ec->comm->rank, r, (unsigned long long)d->sig->call);
    else
        mlc_sig_mismatch(a, ec->comm->rank, b, r, msg, sizeof msg);
    mlc_error(MLC_ERR_MISMATCH, "%s", msg);
    return MLC_ERR_MISMATCH;
}

/* A rank that reads no peer's data: a broadcast root, a reduce non-root. */
static bool reads_nothing(const mlc_request_t *req)
{
    return (req->coll == MLC_COLL_BROADCAST && req->comm->rank == req->args.root) ||
           (req->coll == MLC_COLL_REDUCE && req->comm->rank != req->args.root);
}

/* On the quick path, whether this rank waits for peer r's line in stage 1.
 * A broadcast reader waits for the root's only (it compares every line that
 * is there by then, see quick_progress): readers do not wait for one
 * another, which is what lets ranks sharing a core run a batch of
 * broadcasts per time slice instead of switching at every op. */
static bool quick_reads(const mlc_request_t *req, int r)
{
    if (r == req->comm->rank) return false;
    return req->coll != MLC_COLL_BROADCAST || r == req->args.root;
}

/* Whether every peer has announced line_free_after(v), so op v may overwrite
 * its line; records how far that is known to hold (ec->lines_free_to), trying
 * half a ring further first: a peer's announcement never goes back, so the
 * scan over the peers' lines runs about once per ENG_QUICK_DEPTH / 2 ops
 * while they keep up, not at every op. */
static bool lines_free(eng_comm_t *ec, uint64_t v)
{
    int p = ec->comm->size, me = ec->comm->rank;
    uint64_t need = line_free_after(v), hope = v > ENG_QUICK_DEPTH / 2 ? v - ENG_QUICK_DEPTH / 2 : 0;
    for (uint64_t w = hope > need ? hope : need;; w = need) {
        int r = 0;
        while (r < p && (r == me || announced(ec, r, w))) r++;
        if (r == p) {
            ec->lines_free_to = w + ENG_QUICK_DEPTH - 1; /* line_free_after(that op) is w */
            return true;
        }
        if (w == need) return false;
    }
}

/* Start loading the lines of op v that this rank will read. A peer that runs
 * ahead (a broadcast root) has usually announced it already: the line then
 * crosses to this core while this rank returns and makes its next call,
 * instead of after (about 40% of a 2-rank 8-byte broadcast reader's time was
 * that wait). A line not written yet is fetched again once it is. */
static void prefetch_next(const mlc_request_t *req, uint64_t v)
{
    const eng_comm_t *ec = req->comm->impl;
    for (int r = 0; r < req->comm->size; r++)
        if (quick_reads(req, r)) __builtin_prefetch(&slot_of(ec, r)->quick[line_of(v)], 0, 3);
}

/*
 * The quick path. Stage 0: the line this op overwrites, quick[v % depth],
 * was read in op v - depth, and a peer that announced op v - depth + 1 is
 * done with that one, so once every peer has (usually long since) this rank
 * announces v with its payload. Stage 1: once every peer it reads announced
 * v (every peer, but for a broadcast reader: the root), the digest of every
 * peer announced by then is compared before any data is used, and each rank
 * computes its result from the lines in rank order (bitwise the same
 * everywhere). done2 is raised for this rank's next op;
 * peers never wait for it after a quick op (prev_done), so the flags' line
 * is not shared. A rank that reads nothing completes once it has announced
 * (see reads_nothing): its readers compare, and the digest carries its call
 * to the next op anybody compares.
 */
static int quick_progress(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    size_t n = a->count * a->esize;
    uint64_t v = d->v;
    switch (d->stage) {
    case 0: {
        if (!flag_at_least(ec, me, F_DONE2, v - 1)) return 0; /* this rank's previous op first (done2 never goes back) */
        if (v > ec->lines_free_to && !lines_free(ec, v)) return 0;
        const void *payload = a->sendbuf;
        size_t len = n;
        if (req->coll == MLC_COLL_REDUCE_SCATTER) len = n * (size_t)p;
        if ((req->coll == MLC_COLL_BROADCAST && me != a->root) || req->coll == MLC_COLL_BARRIER) len = 0;
        announce(ec, d, payload, len);
        eng_wake_members(ec->ep, ec->world_of, p, me);
        /* Readers of a broadcast do not wait for one another, and each compares
         * the others' lines it finds: of two readers the later must find the
         * earlier's, so its announcement must be visible before it looks (the
         * wake-up's fence may order only the compiler, see endpoint.c). */
        if (req->coll == MLC_COLL_BROADCAST && me != a->root && p > 2) atomic_thread_fence(memory_order_seq_cst);
        d->stage = 1;
        if (reads_nothing(req)) {
            /* Its part is done: its payload is in its line. It does not wait
             * for its readers: they compare, and if every rank read nothing
             * (each a broadcast root) the digests differ at the next op that
             * compares. So a loop of broadcasts pipelines: the root runs up
             * to ENG_QUICK_DEPTH - 1 ops ahead of the slowest reader. */
            if (req->coll == MLC_COLL_BROADCAST && !a->inplace && n) memcpy(a->recvbuf, a->sendbuf, n);
            atomic_store_explicit(&slot_of(ec, me)->done2, v, memory_order_release);
            return 1;
        }
    }
        /* fall through */
    case 1: {
        const uint64_t vv = v;
        for (int r = 0; r < p; r++)
            if (quick_reads(req, r) && !announced(ec, r, vv)) return 0;
        /* Compare with every peer that has announced v by now: the ones this
         * rank reads, and the others that got here first. Of any two ranks
         * the later one compares, so ranks that disagree are caught in this
         * op unless neither reads (see reads_nothing). A peer cannot rewrite
         * its line v before this rank announces v + 1. */
        for (int r = 0; r < p; r++) {
            if (r == me) continue;
            const eng_quick_t *q = announced(ec, r, vv);
            if (q && q->digest != d->digest) return quick_mismatch(ec, d, r);
        }
        switch (req->coll) {
        case MLC_COLL_BROADCAST:
            if (me != a->root) {
                if (n) memcpy(a->recvbuf, slot_of(ec, a->root)->quick[line_of(vv)].data, n);
            } else if (!a->inplace && n) {
                memcpy(a->recvbuf, a->sendbuf, n);
            }
            break;
        case MLC_COLL_REDUCE:
            if (me == a->root) reduce_lines(req, vv, 0, n, a->recvbuf);
            break;
        case MLC_COLL_ALLREDUCE: reduce_lines(req, vv, 0, n, a->recvbuf); break;
        case MLC_COLL_REDUCE_SCATTER: reduce_lines(req, vv, (size_t)me * n, n, a->recvbuf); break;
        case MLC_COLL_ALLGATHER:
            for (int r = 0; r < p; r++)
                if (n && (r != me || !a->inplace))
                    memcpy((char *)a->recvbuf + (size_t)r * n, slot_of(ec, r)->quick[line_of(vv)].data, n);
            break;
        default: break;
        }
        /* For this rank's next op only (peers wait for announcements): no wake-up. */
        atomic_store_explicit(&slot_of(ec, me)->done2, vv, memory_order_release);
        prefetch_next(req, vv + 1);
        return 1;
    }
    }
    return 0;
}

static int small_progress(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    eng_slot_t *mine = slot_of(ec, me);
    size_t n = a->count * a->esize;
    uint64_t v = d->v;
    bool am_root = me == a->root;
    int k;
    switch (d->stage) {
    case 0: /* my slot is free once every rank finished the previous direct op */
        if (!prev_done(ec, d)) return 0;
        switch (req->coll) {
        case MLC_COLL_BROADCAST:
            if (!am_root) break;
            if (n) memcpy(mine->data, a->sendbuf, n);
            if (!a->inplace && n) memcpy(a->recvbuf, a->sendbuf, n);
            break;
        case MLC_COLL_REDUCE_SCATTER: /* every block goes in */
            if (n) memcpy(mine->data, a->sendbuf, n * (size_t)p);
            break;
        case MLC_COLL_ALLREDUCE:
        case MLC_COLL_REDUCE:
        case MLC_COLL_ALLGATHER:
            if (n) memcpy(mine->data, a->sendbuf, n);
            break;
        default: break;
        }
        publish_sig(ec, d);
        raise_flag(ec, F_PUB, v);
        if (reads_nothing(req)) {
            raise_flag(ec, F_DONE2, v); /* nothing to read: done once the readers took the same call */
            d->stage = 4;
            return small_progress(req, d);
        }
        d->stage = 1;
        /* fall through */
    case 1:
        if (req->coll == MLC_COLL_BROADCAST) {
            k = published(ec, d, a->root);
            if (k != 1) return k;
            if (check_peer(ec, d, a->root) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
            if (n) memcpy(a->recvbuf, slot_of(ec, a->root)->data, n);
        } else {
            if ((k = all_published(ec, d)) != 1) return k;
            if (check_all(ec, d) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
            if (req->coll == MLC_COLL_ALLREDUCE || req->coll == MLC_COLL_REDUCE) {
                reduce_slots(req, 0, n, a->recvbuf);
            } else if (req->coll == MLC_COLL_REDUCE_SCATTER) {
                reduce_slots(req, (size_t)me * n, n, a->recvbuf);
            } else if (req->coll == MLC_COLL_ALLGATHER) {
                for (int r = 0; r < p; r++)
                    if (n && (r != me || !a->inplace)) memcpy((char *)a->recvbuf + (size_t)r * n, slot_of(ec, r)->data, n);
            }
        }
        raise_flag(ec, F_DONE2, v);
        return 1;
    case 4: /* read nothing: once every reader is done (a reader that saw another
             * call fails instead), compare the calls the peers posted on
             * their boards (their slots may hold a later call by now) */
        if (!all_at_least(ec, F_DONE2, v)) return 0;
        {
            /* A peer's word for this call's parity is this call's or, once it
             * went on, a later call's (a later one is skipped below: this check
             * only finds a peer that started another call with this number). */
            uint64_t want = started_word(d->sig->call, d->sig_hash);
            for (int r = 0; r < p; r++) {
                if (r == me) continue;
                uint64_t w = atomic_load_explicit(&slot_of(ec, r)->started[d->sig->call & 1], memory_order_acquire);
                if (w == want || w >> 48 != want >> 48) continue;
                char msg[384];
                if (!eng_board_mismatch(ec, d->sig, msg, sizeof msg))
                    snprintf(msg, sizeof msg, "rank %d: call #%llu: rank %d started another call with this number",
                             me, (unsigned long long)d->sig->seq, r);
                mlc_error(MLC_ERR_MISMATCH, "%s", msg);
                return MLC_ERR_MISMATCH;
            }
        }
        return 1;
    }
    return 0;
}

/* ---- staged broadcast (large, in place, between processes) ----------------- */

/*
 * Whether large operations may go through the stages (MLC_STAGES). A staged
 * operation waits for its peers at every chunk; with more ranks than cores
 * a waiting rank yields its core to the rank it waits for, or sleeps on its
 * doorbell while other processes compete for the cores (yield_gauge.c). So
 * staging pays there too: 4 ranks on 2 cores, quiet, a 32 MiB allreduce
 * took 9-21 ms staged against 21-23 by single copy, allgather and
 * broadcast 5.5 and 6.4 against 11.9 and 11.1; 8 ranks 1.4-1.9 times
 * faster. Beside two busy loops allgather and broadcast take 0.7-1.5
 * times single copy's time, the allreduce 1.4-2.6 times (Open
 * MPI's, slower still: docs/ENGINE.md, "When the stages are used"). The
 * same on every rank: MLC_STAGES is agreed at init.
 */
static bool stages_usable(const eng_comm_t *ec)
{
    return ec->comm->cfg.stages != MLC_STAGES_OFF && ec->stages != NULL;
}

/* Whether every allreduce and allgather too large for the slots goes through
 * the stages: MLC_STAGES=on, or single copy is missing or slow on this host
 * (the segment creator's probe, shm/cma_probe.c; figures in docs/ENGINE.md,
 * eager stages: on an AMD EPYC guest where a 1 MiB single copy takes 2-3.5
 * memcpys, a 2 MiB allreduce of two ranks took 264 us staged, by the
 * reduce-scatter steps, against 383 by single copy; on another, with
 * 2 MiB stages, 132 against 219-256). Where a single copy costs about one
 * memcpy, it does less work than staging below ENG_STAGE_ALLREDUCE_MIN
 * (each byte crosses between processes in one copy, not two), and
 * allgathers keep it. The same on every rank. */
static bool stages_eager(const eng_comm_t *ec)
{
    return ec->comm->cfg.stages == MLC_STAGES_ON || !ec->cma_all || ec->ep->cma_slow;
}

/* Whether the root of this large broadcast streams it through its stage: in
 * place, and out of place where single copy is slow or MLC_STAGES=on
 * (stages_eager; a large broadcast takes this path only where single copy
 * works: eng_direct_choose). Out of place the root then
 * copies each chunk twice, into its stage and on into its receive buffer;
 * where single copy costs about one memcpy, a single-copy read of its send
 * buffer beside its own copy to the receive buffer is faster. From
 * ENG_STAGE_MIN; where single copy is slow and the ranks outnumber their
 * cpus, every size past the slots (4 ranks on 2 cpus, 16 KiB / 32 KiB /
 * 512 KiB: 10.8 / 17.9 / 87 us staged against 15.2 / 35.8 / 147; 8 ranks
 * 1.3-1.4x faster), unless other processes compete for the cpus now
 * (yield_gauge.c: beside two busy loops 128 KiB took 281 us staged against
 * 203). Only the root decides (via_stage): its readers follow. */
static bool stages_bcast(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    bool eager = stages_eager(ec);
    if (!stages_usable(ec) || req->comm->size < 2 || !(req->args.inplace || eager)) return false;
    if (req->args.count * req->args.esize >= ENG_STAGE_MIN) return true;
    return eager && ec->ep->outnumbered && !eng_yield_futile(&ec->ep->yield_gauge, mlc_now());
}

/* Chunks of ENG_STAGE_CHUNK bytes in a staged broadcast or allgather block. */
static size_t stage_chunks(const mlc_request_t *req)
{
    size_t n = req->args.count * req->args.esize;
    return (n + ENG_STAGE_CHUNK - 1) / ENG_STAGE_CHUNK;
}

/* Chunks a stage holds (a power of two: segment.c). */
static uint64_t stage_depth(const eng_comm_t *ec) { return ec->stage_bytes / ENG_STAGE_CHUNK; }

static char *stage_line(const eng_comm_t *ec, int r, uint64_t chunk)
{
    return ec->stages + (size_t)ec->world_of[r] * ec->stage_bytes + (size_t)(chunk % stage_depth(ec)) * ENG_STAGE_CHUNK;
}

/* Copy n bytes of this rank's data into its stage (stage_store.c); true
 * when streamed past this core's caches. */
static bool stage_write_as(const eng_comm_t *ec, int mode, void *place, const void *src, size_t n)
{
    return eng_stage_store(&ec->ep->stage_gauge, mode, place, src, n);
}

/* The same with the stores MLC_STAGE_STORES says (a staged allreduce passes
 * the ones it picked, eng_store_choice_pick). */
static bool stage_write(const eng_comm_t *ec, void *place, const void *src, size_t n)
{
    return stage_write_as(ec, ec->comm->cfg.stage_stores, place, src, n);
}

/* Bytes of chunk c of n bytes cut into chunks of `chunk`. */
static size_t chunk_len(size_t n, size_t chunk, uint64_t c)
{
    size_t off = (size_t)c * chunk;
    return n - off < chunk ? n - off : chunk;
}

/* Bytes of chunk c of an n-byte broadcast. */
static size_t stage_len(size_t n, uint64_t c) { return chunk_len(n, ENG_STAGE_CHUNK, c); }

/* Whether reader r has yet to copy out the chunk that chunk `c` reuses (the
 * previous op's readers finished before this op began: prev_done). */
static bool stage_reader_behind(const eng_comm_t *ec, const eng_direct_t *d, uint64_t c, int r)
{
    uint64_t depth = stage_depth(ec);
    return c >= depth && progress_of(&slot_of(ec, r)->unstaged, d->v) < c - depth + 1;
}

/* Whether every reader has copied out the chunk that chunk `c` reuses. */
static bool stage_free(const eng_comm_t *ec, const eng_direct_t *d, uint64_t c, int root)
{
    for (int r = 0; r < ec->comm->size; r++)
        if (r != root && stage_reader_behind(ec, d, c, r)) return false;
    return true;
}

/* Root: copy the chunks in while their places are free; then wait, as on the
 * single-copy path, until every reader is done. */
static int stage_in(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    eng_slot_t *mine = slot_of(ec, a->root);
    size_t n = a->count * a->esize, chunks = stage_chunks(req);
    const char *src = a->inplace ? a->recvbuf : a->sendbuf;
    bool copied = false, stream = streams(ec, n);
    while (d->chunk < chunks && stage_free(ec, d, d->chunk, a->root)) {
        size_t off = d->chunk * ENG_STAGE_CHUNK, len = stage_len(n, d->chunk);
        char *line = stage_line(ec, a->root, d->chunk);
        bool streamed = stage_write(ec, line, src + off, len);
        if (!a->inplace) /* from the stage, which is in this core's cache now unless streamed */
            copy_streamed_if(stream, (char *)a->recvbuf + off, streamed ? src + off : line, len);
        d->chunk++;
        atomic_store_explicit(&mine->staged, progress_word(d->v, d->chunk), memory_order_release);
        copied = true;
    }
    if (copied) eng_wake_members(ec->ep, ec->world_of, ec->comm->size, a->root);
    if (d->chunk < chunks) return 0;
    d->stage = 4;
    raise_flag(ec, F_DONE2, d->v);
    return all_at_least(ec, F_DONE2, d->v) ? 1 : 0;
}

/* Reader: copy out every chunk the root has copied in. */
static int stage_out(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    eng_slot_t *mine = slot_of(ec, req->comm->rank), *root = slot_of(ec, a->root);
    size_t n = a->count * a->esize, chunks = stage_chunks(req);
    uint64_t in = progress_of(&root->staged, d->v);
    bool copied = false;
    while (d->chunk < chunks && in >= d->chunk + 1) {
        memcpy((char *)a->recvbuf + d->chunk * ENG_STAGE_CHUNK, stage_line(ec, a->root, d->chunk),
               stage_len(n, d->chunk));
        d->chunk++;
        atomic_store_explicit(&mine->unstaged, progress_word(d->v, d->chunk), memory_order_release);
        copied = true;
        if (in < d->chunk + 1) in = progress_of(&root->staged, d->v);
    }
    if (copied) eng_wake_members(ec->ep, ec->world_of, ec->comm->size, req->comm->rank);
    if (d->chunk < chunks) return 0;
    raise_flag(ec, F_DONE2, d->v);
    return 1;
}

/* ---- staged allreduce (large, between processes) ------------------------------ */

/* Each rank reduces its slice of the result (slice()), chunk by chunk, in
 * steps k = 0, 1, ...; all through the ranks' stages, AR_DEPTH steps deep:
 *   copy in   every rank copies chunk k of every other rank's slice from its
 *             send buffer into its stage;
 *   reduce    the owner of a slice reduces its chunk k (its own send buffer
 *             and the others' stages, in rank order) into its stage, and
 *             writes it to its receive buffer;
 *   copy out  every rank copies the owners' reduced chunk k into its
 *             receive buffer.
 * Each is counted in the rank's progress words (staged, reduced, unstaged).
 * So every rank reads its send buffer and writes its receive buffer once,
 * as a memcpy does; the chunks stay in the caches. In place is safe: a
 * rank copies chunk k in before it writes it. */
#define AR_DEPTH 2

enum { AR_STAGED, AR_REDUCED, AR_UNSTAGED };

static const atomic_uint_fast64_t *ar_word(const eng_slot_t *s, int which)
{
    return which == AR_STAGED ? &s->staged : which == AR_REDUCED ? &s->reduced : &s->unstaged;
}

/* Whether every other rank's count `which` is at least `want` (want <= 0: true). */
static bool ar_others_reached(const eng_comm_t *ec, int which, uint64_t v, int64_t want)
{
    for (int r = 0; want > 0 && r < ec->comm->size; r++)
        if (r != ec->comm->rank && progress_of(ar_word(slot_of(ec, r), which), v) < (uint64_t)want) return false;
    return true;
}

/* Bytes of a chunk: whole elements, AR_DEPTH steps of p chunks per stage
 * (2 ranks: 512 KiB, 4 ranks: 128 KiB; a record too large for a chunk
 * takes single copy). */
static size_t ar_chunk(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    size_t c = ec->stage_bytes / (AR_DEPTH * (size_t)req->comm->size);
    return c / req->args.esize * req->args.esize;
}

static bool stages_allreduce(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    return stages_usable(ec) && req->comm->size > 1 && ar_chunk(req) > 0 &&
           (req->args.count * req->args.esize >= ENG_STAGE_ALLREDUCE_MIN || stages_eager(ec));
}

/* Rank `owner`'s stage place for step k and slice q (q = owner: its result). */
static char *ar_place(const eng_comm_t *ec, int owner, uint64_t k, int q, size_t chunk)
{
    return ec->stages + (size_t)ec->world_of[owner] * ec->stage_bytes +
           ((size_t)(k % AR_DEPTH) * (size_t)ec->comm->size + (size_t)q) * chunk;
}

/* Chunk k of slice q: its element count (0 past the slice's end), at element *off. */
static size_t ar_piece(const mlc_request_t *req, int q, uint64_t k, size_t chunk, size_t *off)
{
    size_t lo, len, ce = chunk / req->args.esize, from = (size_t)k * ce;
    slice(req->args.count, req->comm->size, q, &lo, &len);
    *off = lo + from;
    return from >= len ? 0 : len - from < ce ? len - from : ce;
}

/* Raise this rank's count `which`, and wake the peers that sleep on it. */
static void ar_publish(eng_comm_t *ec, int which, uint64_t v, uint64_t count)
{
    atomic_store_explicit((atomic_uint_fast64_t *)ar_word(slot_of(ec, ec->comm->rank), which),
                          progress_word(v, count), memory_order_release);
    eng_wake_members(ec->ep, ec->world_of, ec->comm->size, ec->comm->rank);
}

/* Step d->chunk, part d->part (0 copy in, 1 reduce, 2 copy out), on until a
 * peer is behind or the last step is done. */
static int stage_allreduce(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    size_t es = a->esize, chunk = ar_chunk(req), off, n;
    uint64_t v = d->v, steps;
    {
        size_t lo, len;
        slice(a->count, p, 0, &lo, &len); /* slice 0 is the longest */
        steps = (len + chunk / es - 1) / (chunk / es);
    }
    bool stream = streams(ec, a->count * es);
    while (d->chunk < steps) {
        uint64_t k = d->chunk;
        int64_t freed = (int64_t)k + 1 - AR_DEPTH; /* step k reuses step k - AR_DEPTH's places */
        switch (d->part) {
        case 0:
            if (!ar_others_reached(ec, AR_REDUCED, v, freed)) return 0;
            for (int q = 0; q < p; q++)
                if (q != me && (n = ar_piece(req, q, k, chunk, &off)) != 0)
                    stage_write_as(ec, d->store_mode, ar_place(ec, me, k, q, chunk),
                                   (const char *)a->sendbuf + off * es, n * es);
            ar_publish(ec, AR_STAGED, v, k + 1);
            d->part = 1;
            /* fall through */
        case 1:
            if (!ar_others_reached(ec, AR_STAGED, v, (int64_t)k + 1) || !ar_others_reached(ec, AR_UNSTAGED, v, freed))
                return 0;
            if ((n = ar_piece(req, me, k, chunk, &off)) != 0) {
                /* Reduced into the stage. While stores into it stall
                 * (stage_store.c: the readers' caches hold its lines and
                 * the cores run apart), into a private chunk that stays in
                 * this core's cache instead, then streamed into the stage:
                 * 2 ranks, 32 MiB, 5.6 against 10.1 ms then; while they
                 * keep pace the extra copy costs 5-10 %. Without memory
                 * for that chunk, into the stage. */
                char *place = ar_place(ec, me, k, me, chunk), *res = place;
                if (eng_stage_stalls(&ec->ep->stage_gauge, d->store_mode)) {
                    if (!d->tmp) d->tmp = mlc_scratch_take(&req->comm->host_scratch, chunk);
                    if (d->tmp) res = d->tmp;
                }
                const char *own = (const char *)a->sendbuf + off * es;
                mlc_reduce_apply3(me == 0 ? own : ar_place(ec, 0, k, me, chunk),
                                  me == 1 ? own : ar_place(ec, 1, k, me, chunk), res, n, a->dtype, a->op);
                for (int r = 2; r < p; r++)
                    mlc_reduce_apply3(res, r == me ? own : ar_place(ec, r, k, me, chunk), res, n, a->dtype, a->op);
                if (a->op == MLC_AVG) mlc_reduce_divide(res, n, a->dtype, p);
                if (res != place) stage_write_as(ec, d->store_mode, place, res, n * es);
                copy_streamed_if(stream, (char *)a->recvbuf + off * es, res, n * es);
            }
            ar_publish(ec, AR_REDUCED, v, k + 1);
            d->part = 2;
            /* fall through */
        case 2:
            if (!ar_others_reached(ec, AR_REDUCED, v, (int64_t)k + 1)) return 0;
            for (int q = 0; q < p; q++) {
                if (q == me || (n = ar_piece(req, q, k, chunk, &off)) == 0) continue;
                copy_streamed_if(stream, (char *)a->recvbuf + off * es, ar_place(ec, q, k, q, chunk), n * es);
            }
            ar_publish(ec, AR_UNSTAGED, v, k + 1);
            d->chunk = k + 1;
            d->part = 0;
        }
    }
    eng_store_choice_record(&ec->ep->ar_stores, d->store_mode, a->count * es, mlc_now() - d->began);
    raise_flag(ec, F_DONE2, v);
    d->stage = 4;
    return all_at_least(ec, F_DONE2, v) ? 1 : 0;
}

/* Which part of the staged allreduce waits for rank r. */
static bool stage_allreduce_waits_for(const eng_comm_t *ec, const eng_direct_t *d, int r)
{
    const eng_slot_t *s = slot_of(ec, r);
    uint64_t k = d->chunk;
    int64_t freed = (int64_t)k + 1 - AR_DEPTH;
    switch (d->part) {
    case 0: return freed > 0 && progress_of(&s->reduced, d->v) < (uint64_t)freed;
    case 1:
        return progress_of(&s->staged, d->v) < k + 1 || (freed > 0 && progress_of(&s->unstaged, d->v) < (uint64_t)freed);
    default: return progress_of(&s->reduced, d->v) < k + 1;
    }
}

/* ---- staged allgather -------------------------------------------------------- */

/* Every rank is the root of its own block: it copies chunk c of its block
 * into its stage (and, out of place, on into its receive buffer) while the
 * others copy the chunks before it out; as with the broadcast, a stage
 * place is reused once every reader counted past it (staged / unstaged
 * words). Staging runs ahead of copying out by up to a stage of chunks,
 * so a rank does not wait for a slow reader at every chunk. The single-copy
 * path reads each peer's block through the kernel, which pins every page;
 * here the chunks cross between caches, and nothing needs CMA. */
static bool stages_allgather(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    if (!stages_usable(ec) || !stages_eager(ec) || req->comm->size < 2) return false;
    /* Where single copy works but is slow, it still beats staging below
     * ENG_STAGE_MIN in all (2 ranks, 128 and 512 KiB: 1.3-1.4x, 1 MiB
     * level; docs/ENGINE.md); MLC_STAGES=on stages every size. Not where
     * the ranks outnumber their cpus: a single-copy allgather ends when
     * every rank has read every peer's buffer, so each waits until all
     * have had a time slice, while a staged one only waits for the blocks
     * it copies (4 ranks on 2 cpus, 256 / 512 KiB: 58 / 84 us staged
     * against 71 / 152; 8 ranks, 128-512 KiB: 1.9-2.9x faster). */
    return !ec->cma_all || ec->comm->cfg.stages == MLC_STAGES_ON || ec->ep->outnumbered ||
           req->args.count * req->args.esize * (size_t)req->comm->size >= ENG_STAGE_MIN;
}

/* Copy out chunk c of every peer's block, once every peer has staged it. */
static bool gather_out(mlc_request_t *req, eng_direct_t *d, size_t n, uint64_t c, bool stream)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    if (!ar_others_reached(ec, AR_STAGED, d->v, (int64_t)c + 1)) return false;
    size_t len = stage_len(n, c), off = (size_t)c * ENG_STAGE_CHUNK;
    for (int i = 1; i < p; i++) { /* from the next rank on: the ranks do not all read one stage at once */
        int q = (me + i) % p;
        copy_streamed_if(stream, (char *)a->recvbuf + (size_t)q * n + off, stage_line(ec, q, c), len);
    }
    return true;
}

static int stage_allgather(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int me = req->comm->rank;
    size_t n = a->count * a->esize, chunks = stage_chunks(req);
    const char *own = a->inplace ? (const char *)a->recvbuf + (size_t)me * n : a->sendbuf;
    char *own_out = (char *)a->recvbuf + (size_t)me * n;
    bool stream = allgather_streams(req);
    for (;;) {
        bool moved = false;
        while (d->chunk < chunks && stage_free(ec, d, d->chunk, me)) {
            size_t off = (size_t)d->chunk * ENG_STAGE_CHUNK, len = stage_len(n, d->chunk);
            char *line = stage_line(ec, me, d->chunk);
            bool streamed = stage_write(ec, line, own + off, len);
            if (!a->inplace) /* from the stage, which is in this core's cache now unless streamed */
                copy_streamed_if(stream, own_out + off, streamed ? own + off : line, len);
            d->chunk++;
            ar_publish(ec, AR_STAGED, d->v, d->chunk);
            moved = true;
        }
        if (d->out < chunks && gather_out(req, d, n, d->out, stream)) {
            d->out++;
            ar_publish(ec, AR_UNSTAGED, d->v, d->out);
            moved = true;
        }
        if (d->out == chunks && d->chunk == chunks) break;
        if (!moved) return 0;
    }
    /* Peers read only this rank's stage, which the next op reuses once every
     * rank is done with this one (prev_done): nothing to wait for here. */
    raise_flag(ec, F_DONE2, d->v);
    return 1;
}

/* Which part of the staged allgather waits for rank r. */
static bool stage_allgather_waits_for(const mlc_request_t *req, const eng_direct_t *d, int r)
{
    const eng_comm_t *ec = req->comm->impl;
    size_t chunks = stage_chunks(req);
    return (d->chunk < chunks && stage_reader_behind(ec, d, d->chunk, r)) ||
           (d->out < chunks && progress_of(&slot_of(ec, r)->staged, d->v) < d->out + 1);
}

/* ---- allreduce of shared buffers, out of place ------------------------------ */

/* Every rank's send and receive buffers are shared blocks (shared_buffers)
 * and no rank is in place (none_in_place):
 * each rank reduces its slice chunk by chunk, reading its peers' send
 * buffers in place, and counts the chunks in its `reduced` progress word;
 * between its own chunks, and after them, it copies the chunks its peers
 * have counted out of their receive buffers, from the next rank on. So a
 * chunk crosses to its readers soon after it was written, while the caches
 * still hold it, and nobody waits for a whole slice. */
static size_t slice_chunks(const mlc_request_t *req, int r, size_t chunk, size_t *lo, size_t *bytes)
{
    size_t len;
    slice(req->args.count, req->comm->size, r, lo, &len);
    *bytes = len * req->args.esize;
    return (*bytes + chunk - 1) / chunk;
}

/* Whether every rank's call is out of place: an in-place rank must not write
 * its receive (= send) buffer before every peer has read it, so ranks that
 * differ take the two-phase path together. Read after pub: all agree. */
static bool none_in_place(const mlc_request_t *req)
{
    const eng_comm_t *ec = req->comm->impl;
    for (int r = 0; r < req->comm->size; r++)
        if (slot_of(ec, r)->inplace) return false;
    return true;
}

/* The peer whose chunks this rank copies now: d->part counts the peers done. */
static int shared_allreduce_peer(const mlc_request_t *req, const eng_direct_t *d)
{
    return (req->comm->rank + 1 + d->part) % req->comm->size;
}

static int shared_allreduce(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size;
    size_t es = a->esize, chunk = reduce_chunk(es), lo, bytes;
    size_t mine = slice_chunks(req, req->comm->rank, chunk, &lo, &bytes);
    mlc_status_t st;
    for (;;) {
        bool moved = false;
        if (d->chunk < mine) {
            size_t off = lo * es + (size_t)d->chunk * chunk;
            st = reduce_block(req, off, chunk_len(bytes, chunk, d->chunk), (char *)a->recvbuf + off, d->tmp, false);
            if (st != MLC_SUCCESS) return st;
            d->chunk++;
            ar_publish(ec, AR_REDUCED, d->v, d->chunk);
            moved = true;
        }
        while (d->part < p - 1) {
            int r = shared_allreduce_peer(req, d);
            size_t rlo, rbytes, theirs = slice_chunks(req, r, chunk, &rlo, &rbytes);
            uint64_t ready = progress_of(&slot_of(ec, r)->reduced, d->v);
            if (ready > theirs) ready = theirs;
            if (ready > d->out) {
                size_t from = (size_t)d->out * chunk, to = ready == theirs ? rbytes : (size_t)ready * chunk;
                st = peer_read(req, r, PEER_RECV, rlo * es + from, (char *)a->recvbuf + rlo * es + from, to - from,
                               false);
                if (st != MLC_SUCCESS) return st;
                d->out = ready;
                moved = true;
            }
            if (d->out < theirs) break;
            d->part++;
            d->out = 0;
        }
        if (d->chunk == mine && d->part == p - 1) break;
        if (!moved) return 0;
    }
    /* Peers may still read this rank's buffers: wait for their done2. */
    raise_flag(ec, F_DONE2, d->v);
    d->stage = 4;
    return all_at_least(ec, F_DONE2, d->v) ? 1 : 0;
}

/* Which part of it waits for rank r: its next chunk, once this rank's own are done. */
static bool shared_allreduce_waits_for(const mlc_request_t *req, const eng_direct_t *d, int r)
{
    const eng_comm_t *ec = req->comm->impl;
    size_t lo, bytes, chunk = reduce_chunk(req->args.esize);
    if (d->part >= req->comm->size - 1 || r != shared_allreduce_peer(req, d)) return false;
    size_t theirs = slice_chunks(req, r, chunk, &lo, &bytes);
    return progress_of(&slot_of(ec, r)->reduced, d->v) < (d->out + 1 < theirs ? d->out + 1 : theirs);
}

static int large_progress(mlc_request_t *req, eng_direct_t *d)
{
    eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    int p = req->comm->size, me = req->comm->rank;
    eng_slot_t *mine = slot_of(ec, me);
    size_t es = a->esize, n = a->count * es;
    uint64_t v = d->v;
    size_t chunk = reduce_chunk(es);
    mlc_status_t st;
    int k;
    switch (d->stage) {
    case 0:
        if (!prev_done(ec, d)) return 0;
        mine->saddr = (uint64_t)(uintptr_t)a->sendbuf;
        mine->raddr = (uint64_t)(uintptr_t)a->recvbuf;
        publish_blocks(req, mine);
        mine->inplace = a->inplace;
        mine->via_stage = req->coll == MLC_COLL_BROADCAST && me == a->root && stages_bcast(req) && !mine->sref.size;
        /* A progress word tells ops apart by 24 bits of v only: one left from
         * op v - k * 2^24 (no staged op between) would read as op v's. Peers
         * read these words only after this op's pub. */
        atomic_store_explicit(&mine->staged, progress_word(v, 0), memory_order_relaxed);
        atomic_store_explicit(&mine->unstaged, progress_word(v, 0), memory_order_relaxed);
        atomic_store_explicit(&mine->reduced, progress_word(v, 0), memory_order_relaxed);
        publish_sig(ec, d);
        raise_flag(ec, F_PUB, v);
        d->stage = 1;
        /* fall through */
    case 1:
        if (req->coll == MLC_COLL_BROADCAST) {
            if (me == a->root) {
                if ((k = all_published(ec, d)) != 1) return k;
                if (check_all(ec, d) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
                if (mine->via_stage) {
                    d->stage = 5;
                    return stage_in(req, d);
                }
                if (!a->inplace && n) copy_result(ec, a->recvbuf, a->sendbuf, n);
                d->stage = 4; /* wait until every rank has read our buffer */
                raise_flag(ec, F_DONE2, v);
                return all_at_least(ec, F_DONE2, v) ? 1 : 0;
            }
            /* Every rank compares every call before anyone reads a user buffer:
             * all reach the same verdict, so no reader reads the buffer of a
             * root that failed and returned. */
            if ((k = all_published(ec, d)) != 1) return k;
            if (check_all(ec, d) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
            if (slot_of(ec, a->root)->via_stage) {
                d->stage = 6;
                return stage_out(req, d);
            }
            st = peer_read(req, a->root, PEER_SEND, 0, a->recvbuf, n, streams(ec, n));
            if (st != MLC_SUCCESS) return st;
            raise_flag(ec, F_DONE2, v);
            return 1;
        }
        if ((k = all_published(ec, d)) != 1) return k;
        if (check_all(ec, d) != MLC_SUCCESS) return MLC_ERR_MISMATCH;
        bool shared = shared_buffers(req);
        if (req->coll == MLC_COLL_ALLGATHER && stages_allgather(req) && !shared) {
            d->stage = 8;
            return stage_allgather(req, d);
        }
        if (req->coll == MLC_COLL_ALLGATHER) {
            bool stream = allgather_streams(req);
            for (int r = 0; r < p; r++) {
                char *dst = (char *)a->recvbuf + (size_t)r * n;
                if (r == me) {
                    if (!a->inplace) copy_streamed_if(stream, dst, a->sendbuf, n);
                    continue;
                }
                st = peer_read(req, r, PEER_SEND, 0, dst, n, stream);
                if (st != MLC_SUCCESS) return st;
            }
            raise_flag(ec, F_DONE2, v);
            d->stage = 4;
            return all_at_least(ec, F_DONE2, v) ? 1 : 0;
        }
        if (req->coll == MLC_COLL_REDUCE_SCATTER) {
            char *acc = a->inplace ? (char *)d->tmp + SCRATCH_CHUNKS * chunk : a->recvbuf;
            st = reduce_block(req, (size_t)me * n, n, acc, d->tmp, !a->inplace && streams(ec, n));
            if (st != MLC_SUCCESS) return st;
            /* In place, our block is read only by us: safe to write now. */
            if (a->inplace) copy_result(ec, a->recvbuf, acc, n);
            raise_flag(ec, F_DONE2, v);
            d->stage = 4;
            return all_at_least(ec, F_DONE2, v) ? 1 : 0;
        }
        if (stages_allreduce(req) && !shared) {
            d->stage = 7;
            d->store_mode = eng_store_choice_pick(&ec->ep->ar_stores, ec->comm->cfg.stage_stores, a->count * a->esize);
            d->began = mlc_now();
            return stage_allreduce(req, d);
        }
        if ((st = take_scratch(req, d)) != MLC_SUCCESS) return st;
        if (shared && none_in_place(req)) {
            d->stage = 9;
            return shared_allreduce(req, d);
        }
        { /* allreduce phase 1: my slice of the result */
            size_t lo, len;
            slice(a->count, p, me, &lo, &len);
            char *acc = a->inplace ? (char *)d->tmp + SCRATCH_CHUNKS * chunk : (char *)a->recvbuf + lo * es;
            st = reduce_block(req, lo * es, len * es, acc, d->tmp, false);
            if (st != MLC_SUCCESS) return st;
            raise_flag(ec, F_DONE1, v);
            if (!a->inplace) raise_flag(ec, F_READY, v);
            d->stage = 2;
        }
        /* fall through */
    case 2:
        if (a->inplace) { /* peers may still read our send (= receive) buffer */
            if (!all_at_least(ec, F_DONE1, v)) return 0;
            size_t lo, len;
            slice(a->count, p, me, &lo, &len);
            memcpy((char *)a->recvbuf + lo * es, (char *)d->tmp + SCRATCH_CHUNKS * chunk, len * es);
            raise_flag(ec, F_READY, v);
        }
        d->stage = 3;
        d->peer = 0;
        /* fall through */
    case 3: /* phase 2: every other slice from its owner */
        for (; d->peer < p; d->peer++) {
            int r = d->peer;
            if (r == me) continue;
            if (!flag_at_least(ec, r, F_READY, v)) return 0;
            size_t lo, len;
            slice(a->count, p, r, &lo, &len);
            st = peer_read(req, r, PEER_RECV, lo * es, (char *)a->recvbuf + lo * es, len * es, false);
            if (st != MLC_SUCCESS) return st;
        }
        raise_flag(ec, F_DONE2, v);
        d->stage = 4;
        /* fall through */
    case 4: /* nobody reads our buffers any more once every rank is done */
        return all_at_least(ec, F_DONE2, v) ? 1 : 0;
    case 5: return stage_in(req, d);
    case 6: return stage_out(req, d);
    case 7: return stage_allreduce(req, d);
    case 8: return stage_allgather(req, d);
    case 9: return shared_allreduce(req, d);
    }
    return 0;
}

int eng_direct_progress(mlc_request_t *req, eng_direct_t *d, int *moved)
{
    int stage = d->stage;
    if (d->quick) { /* every barrier, and payloads of at most ENG_QUICK_DATA bytes: no scratch */
        int rc = quick_progress(req, d);
        if (rc != 0 || d->stage != stage) *moved = 1;
        return rc;
    }
    /* Staged operations move chunk by chunk, part by part, within one stage. */
    uint64_t chunk = d->chunk, out = d->out;
    int part = d->part;
    bool small = payload_bytes(req) <= ENG_SLOT_DATA && req->coll != MLC_COLL_BARRIER;
    int rc = small ? small_progress(req, d) : large_progress(req, d);
    if (rc != 0 || d->stage != stage || d->chunk != chunk || d->out != out || d->part != part) *moved = 1;
    if (rc != 0) eng_direct_cancel(req->comm->impl, d);
    return rc;
}

bool eng_direct_waits_for(const mlc_request_t *req, const eng_direct_t *d, int r)
{
    const eng_comm_t *ec = req->comm->impl;
    const mlc_args_t *a = &req->args;
    if (r == req->comm->rank || !ec->slots) return false;
    bool small = payload_bytes(req) <= ENG_SLOT_DATA && req->coll != MLC_COLL_BARRIER;
    uint64_t v = d->v;
    if (d->quick)
        return d->stage == 0 ? !announced(ec, r, line_free_after(v)) : quick_reads(req, r) && !announced(ec, r, v);
    switch (d->stage) {
    case 0: return d->after_quick ? !announced(ec, r, v - 1) : !flag_at_least(ec, r, F_DONE2, v - 1);
    case 1:
        if (req->coll == MLC_COLL_BROADCAST && small)
            return r == a->root && !flag_at_least(ec, r, F_PUB, v);
        return !flag_at_least(ec, r, F_PUB, v);
    case 2: return !flag_at_least(ec, r, F_DONE1, v);
    case 3: return r >= d->peer && !flag_at_least(ec, r, F_READY, v);
    case 5: /* staged broadcast root: the readers of the chunk it would reuse */
        return stage_reader_behind(ec, d, d->chunk, r);
    case 6: /* staged broadcast reader: the root's next chunk */
        return r == a->root && progress_of(&slot_of(ec, r)->staged, v) < d->chunk + 1;
    case 7: return stage_allreduce_waits_for(ec, d, r);
    case 8: return stage_allgather_waits_for(req, d, r);
    case 9: return shared_allreduce_waits_for(req, d, r);
    default: return !flag_at_least(ec, r, F_DONE2, v); /* stage 4: the readers' done2 */
    }
}
