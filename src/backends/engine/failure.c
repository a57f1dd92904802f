/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Failed communicators, shared by every member: mlc_comm_abort and calls
 * that do not match fail the communicator on the rank that saw it, which
 * publishes the failure in the segment and wakes the other members; their
 * waits check it on every wake-up (eng_be_health) and fail with the same
 * status and message.
 *
 * One 64-bit word per context pair (indexed by pair % ENG_FAIL_WORDS, the
 * pair stored in the word) says who failed it and how, so the number of
 * failures per job is unbounded; a word is only reused by a communicator
 * ENG_FAIL_WORDS context pairs later. The message travels in a small ring
 * of notes; a member that finds the note already reused reports the status
 * and origin rank without it.
 */
#include <stdio.h>
#include <string.h>
#include "engine.h"
#include "base/error.h"

static uint64_t word_of(uint32_t pair, mlc_status_t st, int origin)
{
    return ((uint64_t)pair + 1) << 32 | (uint64_t)(uint8_t)(-(int)st) << 24 | ((uint64_t)origin & 0xffffffu);
}

static void note_put(eng_seg_t *seg, uint32_t pair, const char *msg)
{
    uint64_t i = atomic_fetch_add(&seg->note_next, 1);
    struct eng_fail_note *n = &seg->notes[i % ENG_FAIL_NOTES];
    atomic_store_explicit(&n->stamp, 2 * (i + 1) - 1, memory_order_relaxed); /* odd: being written */
    atomic_thread_fence(memory_order_release);
    n->pair = pair;
    snprintf(n->msg, sizeof n->msg, "%s", msg);
    atomic_store_explicit(&n->stamp, 2 * (i + 1), memory_order_release);
}

/* The newest complete note for pair, copied into buf; false if none is left. */
static bool note_get(eng_seg_t *seg, uint32_t pair, char *buf, size_t len)
{
    uint64_t next = atomic_load(&seg->note_next);
    for (uint64_t k = 0; k < ENG_FAIL_NOTES && k < next; k++) {
        struct eng_fail_note *n = &seg->notes[(next - 1 - k) % ENG_FAIL_NOTES];
        uint64_t s1 = atomic_load_explicit(&n->stamp, memory_order_acquire);
        if (s1 == 0 || (s1 & 1)) continue;
        uint32_t p = n->pair;
        char tmp[sizeof n->msg];
        memcpy(tmp, n->msg, sizeof tmp);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&n->stamp, memory_order_relaxed) != s1 || p != pair) continue;
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
    atomic_uint_fast64_t *w = &ep->seg->failed[pair % ENG_FAIL_WORDS];
    uint64_t cur = atomic_load(w);
    if (cur >> 32 == (uint64_t)pair + 1) return sticky; /* another member published first */
    note_put(ep->seg, pair, note);
    uint64_t want = word_of(pair, st, ep->wrank);
    while (cur >> 32 != (uint64_t)pair + 1 && !atomic_compare_exchange_weak(w, &cur, want)) {
    }
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
    uint64_t w = atomic_load_explicit(&ep->seg->failed[pair % ENG_FAIL_WORDS], memory_order_acquire);
    if (w >> 32 != (uint64_t)pair + 1) return MLC_SUCCESS; /* called without a posted failure */
    mlc_status_t st = (mlc_status_t)(-(int)((w >> 24) & 0xff));
    int origin = (int)(w & 0xffffff);
    int origin_rank = origin < ep->wsize ? ec->comm_of[origin] : -1;
    char note[256];
    if (!note_get(ep->seg, pair, note, sizeof note))
        snprintf(note, sizeof note, "rank %d failed the communicator: %s", origin_rank, mlc_status_string(st));
    if (st == MLC_ERR_ABORTED)
        return mlc_comm_fail(ec->comm, st, "rank %d: the communicator was aborted by rank %d (%.200s)",
                             ec->comm->rank, origin_rank, note);
    if (st == MLC_ERR_PEER_LOST || st == MLC_ERR_TIMEOUT) /* the note names the ranks at fault, not who noticed */
        return mlc_comm_fail(ec->comm, st, "rank %d: %s", ec->comm->rank, note);
    return mlc_comm_fail(ec->comm, st, "%s (seen by rank %d)", note, origin_rank);
}
