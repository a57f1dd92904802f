/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Failed communicators, shared by every member: mlc_comm_abort and calls
 * that do not match fail the communicator on the rank that saw it, which
 * publishes the failure in the segment and wakes the other members; their
 * waits check it on every wake-up (eng_be_health) and fail with the same
 * status and message.
 *
 * Each rank has ENG_FAIL_WORDS / ranks words, one per context pair (pair
 * modulo that share, the pair stored in the word); a rank's word for a pair
 * says who failed its communicator of that pair and how, so the number of
 * failures per job is unbounded. Per rank, because the communicators one
 * mlc_comm_split makes share a context pair (they share no member): a word
 * per pair failed every sibling with one. A rank belongs to one of them,
 * so its word is unambiguous. The member that fails the communicator first
 * claims its rank 0's word (which decides between members failing it at
 * once), then copies that word to every other member's. A word is reused by
 * a communicator of that rank a share of pairs later (256 at 64 ranks); if
 * both have failed and the older is not noticed yet, its members find out
 * by their own waits (timeout, peer death) instead. The message travels in
 * a small ring of notes; a member that finds the note already reused
 * reports the status and origin rank without it.
 */
#include <stdio.h>
#include <string.h>
#include "engine.h"
#include "base/error.h"

static uint64_t word_of(uint32_t pair, mlc_status_t st, int origin)
{
    return ((uint64_t)pair + 1) << 32 | (uint64_t)(uint8_t)(-(int)st) << 24 | ((uint64_t)origin & 0xffffffu);
}

atomic_uint_fast64_t *eng_fail_word(const eng_ep_t *ep, int wrank, uint32_t pair)
{
    size_t share = ENG_FAIL_WORDS / (size_t)ep->wsize;
    if (share == 0) share = 1;
    return &ep->seg->failed[((size_t)wrank * share + pair % share) % ENG_FAIL_WORDS];
}

static void note_put(eng_seg_t *seg, uint32_t pair, int leader, const char *msg)
{
    uint64_t i = atomic_fetch_add(&seg->note_next, 1);
    struct eng_fail_note *n = &seg->notes[i % ENG_FAIL_NOTES];
    atomic_store_explicit(&n->stamp, 2 * (i + 1) - 1, memory_order_relaxed); /* odd: being written */
    atomic_thread_fence(memory_order_release);
    n->pair = pair;
    n->leader = (uint32_t)leader;
    snprintf(n->msg, sizeof n->msg, "%s", msg);
    atomic_store_explicit(&n->stamp, 2 * (i + 1), memory_order_release);
}

/* The newest complete note for pair and leader, copied into buf; false if none is left. */
static bool note_get(eng_seg_t *seg, uint32_t pair, int leader, char *buf, size_t len)
{
    uint64_t next = atomic_load(&seg->note_next);
    for (uint64_t k = 0; k < ENG_FAIL_NOTES && k < next; k++) {
        struct eng_fail_note *n = &seg->notes[(next - 1 - k) % ENG_FAIL_NOTES];
        uint64_t s1 = atomic_load_explicit(&n->stamp, memory_order_acquire);
        if (s1 == 0 || (s1 & 1)) continue;
        uint32_t p = n->pair, l = n->leader;
        char tmp[sizeof n->msg];
        memcpy(tmp, n->msg, sizeof tmp);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&n->stamp, memory_order_relaxed) != s1 || p != pair || l != (uint32_t)leader) continue;
        tmp[sizeof tmp - 1] = '\0';
        snprintf(buf, len, "%s", tmp);
        return true;
    }
    return false;
}

mlc_status_t eng_fail_comm(eng_comm_t *ec, mlc_status_t st, const char *msg)
{
    return eng_fail_comm_note(ec, st, msg, msg);
}

mlc_status_t eng_fail_comm_note(eng_comm_t *ec, mlc_status_t st, const char *msg, const char *note)
{
    eng_ep_t *ep = ec->ep;
    mlc_comm_t *comm = ec->comm;
    mlc_status_t sticky = mlc_comm_fail(comm, st, "%s", msg);
    uint32_t pair = ec->ctx / 2;
    if (eng_fail_posted(ec)) return sticky; /* another member published first, to this rank too */
    atomic_uint_fast64_t *lead = eng_fail_word(ep, ec->world_of[0], pair);
    uint64_t cur = atomic_load(lead);
    if (cur >> 32 != (uint64_t)pair + 1) {
        note_put(ep->seg, pair, ec->world_of[0], note);
        uint64_t want = word_of(pair, st, ep->wrank);
        while (cur >> 32 != (uint64_t)pair + 1 && !atomic_compare_exchange_weak(lead, &cur, want)) {
        }
        cur = atomic_load(lead);
    }
    /* The word that won, to every member (another member may be copying the
     * same word at once). */
    for (int r = 1; r < comm->size; r++) atomic_store(eng_fail_word(ep, ec->world_of[r], pair), cur);
    /* Wake every member: sleepers re-check on wake-up. */
    for (int r = 0; r < comm->size; r++) atomic_fetch_add(&eng_ctl(ep, ec->world_of[r])->doorbell, 1);
    eng_wake_members(ep, ec->world_of, comm->size, -1);
    return sticky;
}

void eng_be_post_failure(mlc_comm_t *comm, mlc_status_t st, const char *note)
{
    eng_fail_comm_note(comm->impl, st, comm->fail_msg, note);
}

mlc_status_t eng_fail_adopt(eng_comm_t *ec)
{
    eng_ep_t *ep = ec->ep;
    uint32_t pair = ec->ctx / 2;
    uint64_t w = atomic_load_explicit(ec->fail_word, memory_order_acquire);
    if (w >> 32 != (uint64_t)pair + 1) return MLC_SUCCESS; /* called without a posted failure */
    mlc_status_t st = (mlc_status_t)(-(int)((w >> 24) & 0xff));
    int origin = (int)(w & 0xffffff);
    int origin_rank = origin < ep->wsize ? ec->comm_of[origin] : -1;
    char note[256];
    if (!note_get(ep->seg, pair, ec->world_of[0], note, sizeof note))
        snprintf(note, sizeof note, "rank %d failed the communicator: %s", origin_rank, mlc_status_string(st));
    if (st == MLC_ERR_ABORTED)
        return mlc_comm_fail(ec->comm, st, "rank %d: the communicator was aborted by rank %d (%.200s)",
                             ec->comm->rank, origin_rank, note);
    if (st == MLC_ERR_PEER_LOST || st == MLC_ERR_TIMEOUT || st == MLC_ERR_USER_OP) /* the note names the ranks at fault */
        return mlc_comm_fail(ec->comm, st, "rank %d: %s", ec->comm->rank, note);
    return mlc_comm_fail(ec->comm, st, "%s (seen by rank %d)", note, origin_rank);
}
