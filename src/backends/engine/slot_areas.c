/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which slot area a new communicator gets (engine.h: direct collectives).
 *
 * A communicator's members read one another's slots in its area until each
 * has freed it (`left`). So an area may go to a new communicator once every
 * slot in it that was used has left: then nobody reads it any more. Slots
 * are indexed by world rank, so two communicators with no member in common
 * may hold one area at once, and each rank judges only what it sees. The
 * ranks of a split offer the areas free in their view, and take the lowest
 * that every rank offered, agreed in one allreduce over the parent
 * (split.c): the same on every rank.
 *
 * An offer claims: the rank marks its own slot in each offered area with
 * the parent's context pair before the agreement, and drops the claims
 * once the new communicator has marked its area used. Otherwise a member
 * of the new communicator that had not yet set it up (it agreed, then lost
 * its core) left its slot looking unused: a faster member that freed the
 * communicator at once found the area free, gave it to its next one, and
 * the slow member read that one's data as its own. The other members of
 * the same split see the claims and pass over them (each judges its own
 * slot itself); a claim of a parent with the same context pair is a
 * sibling's, whose members are not the split's, so sharing is safe.
 * The rank clears its own left slots before it claims them: a peer of the
 * new communicator must find nothing of their last user (op numbers start
 * again at 1), and every member has cleared its slot before any member
 * learns which area it got.
 * Before, areas went to context pairs once and for all: a process's 33rd
 * communicator had none, and so no engine algorithm and no freed-member mark.
 */
#include <string.h>
#include "engine.h"

eng_slot_t *eng_area_slots(const eng_ep_t *ep, uint32_t area)
{
    return (eng_slot_t *)(ep->base + ep->seg->slot_off) + (size_t)area * (size_t)ep->wsize;
}

static eng_slot_t *slot_at(const eng_ep_t *ep, uint32_t area, int w) { return eng_area_slots(ep, area) + w; }

/* Is every used slot of `area` left, and none claimed by another parent's
 * split (*claimed then, if the area is otherwise free)? */
static bool area_free(const eng_ep_t *ep, uint32_t area, uint32_t parent_ctx, bool *claimed)
{
    bool foreign = false;
    for (int w = 0; w < ep->wsize; w++) {
        const eng_slot_t *s = slot_at(ep, area, w);
        uint32_t claim = atomic_load_explicit(&s->claim, memory_order_acquire);
        foreign |= claim && claim != parent_ctx + 1;
        if (atomic_load_explicit(&s->used, memory_order_acquire) &&
            !atomic_load_explicit(&s->left, memory_order_acquire))
            return false;
    }
    *claimed |= foreign;
    return !foreign;
}

uint32_t eng_areas_offer(eng_ep_t *ep, uint32_t parent_ctx, bool *claimed)
{
    uint32_t offered = 0;
    *claimed = false;
    pthread_mutex_lock(&ep->lock);
    for (uint32_t k = 0; k < ep->seg->slot_areas; k++) {
        if (!area_free(ep, k, parent_ctx, claimed)) continue;
        eng_slot_t *mine = slot_at(ep, k, ep->wrank);
        if (atomic_load_explicit(&mine->left, memory_order_relaxed)) memset(mine, 0, sizeof *mine);
        atomic_store_explicit(&mine->claim, parent_ctx + 1, memory_order_relaxed);
        offered |= 1u << k;
    }
    pthread_mutex_unlock(&ep->lock);
    /* Cleared and claimed before the agreement that hands them out. */
    atomic_thread_fence(memory_order_seq_cst);
    return offered;
}

uint32_t eng_area_lowest(uint32_t free_all)
{
    for (uint32_t k = 0; k < ENG_MAX_AREAS; k++)
        if (free_all >> k & 1u) return k;
    return ENG_NO_AREA;
}

void eng_areas_settle(eng_ep_t *ep, uint32_t offered)
{
    for (uint32_t k = 0; k < ENG_MAX_AREAS; k++)
        if (offered >> k & 1u) atomic_store_explicit(&slot_at(ep, k, ep->wrank)->claim, 0, memory_order_release);
}
