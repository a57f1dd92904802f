/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which slot area a new communicator gets (engine.h: direct collectives).
 *
 * A communicator's members read one another's slots in its area until each
 * has freed it (`left`). So an area may go to a new communicator once every
 * slot in it that was used has left: then nobody reads it any more. Slots
 * are indexed by world rank, so two communicators with no member in common
 * may hold one area at once, and each rank judges only what it sees. The
 * ranks of a split offer the areas free in their view (eng_areas_offer), and
 * take the lowest that every rank offered (eng_areas_take, after one
 * allreduce over the parent in eng_be_split): the same on every rank.
 *
 * A rank clears its own left slots before it offers them: a peer of the new
 * communicator must find in them nothing of their last user (its op
 * numbers start again at 1). It clears them before the agreement, so every
 * member's slot is clear before any member learns which area it got.
 * Before, areas went to context pairs once and for all: a process's 33rd
 * communicator had none, and so no engine algorithm and no freed-member mark.
 */
#include <string.h>
#include "engine.h"

static eng_slot_t *slot_at(const eng_ep_t *ep, uint32_t area, int w)
{
    return (eng_slot_t *)(ep->base + ep->seg->slot_off) + (size_t)area * (size_t)ep->wsize + (size_t)w;
}

/* Is every used slot of `area` left? */
static bool area_free(const eng_ep_t *ep, uint32_t area)
{
    for (int w = 0; w < ep->wsize; w++) {
        const eng_slot_t *s = slot_at(ep, area, w);
        if (atomic_load_explicit(&s->used, memory_order_acquire) &&
            !atomic_load_explicit(&s->left, memory_order_acquire))
            return false;
    }
    return true;
}

uint32_t eng_areas_offer(eng_ep_t *ep)
{
    uint32_t offered = 0;
    pthread_mutex_lock(&ep->lock);
    for (uint32_t k = 0; k < ep->seg->slot_areas; k++) {
        if ((ep->areas_held >> k & 1u) || !area_free(ep, k)) continue;
        eng_slot_t *mine = slot_at(ep, k, ep->wrank);
        if (atomic_load_explicit(&mine->used, memory_order_relaxed)) memset(mine, 0, sizeof *mine);
        offered |= 1u << k;
    }
    ep->areas_held |= offered;
    pthread_mutex_unlock(&ep->lock);
    /* The cleared slots are visible before the agreement that hands them out. */
    atomic_thread_fence(memory_order_seq_cst);
    return offered;
}

uint32_t eng_areas_take(eng_ep_t *ep, uint32_t offered, uint32_t busy)
{
    uint32_t free_all = offered & ~busy, area = ENG_NO_AREA;
    for (uint32_t k = 0; k < ENG_MAX_AREAS && area == ENG_NO_AREA; k++)
        if (free_all >> k & 1u) area = k;
    pthread_mutex_lock(&ep->lock);
    ep->areas_held &= ~(area == ENG_NO_AREA ? offered : offered & ~(1u << area));
    pthread_mutex_unlock(&ep->lock);
    return area;
}

void eng_areas_release(eng_ep_t *ep, uint32_t area)
{
    if (area == ENG_NO_AREA) return;
    pthread_mutex_lock(&ep->lock);
    ep->areas_held &= ~(1u << area);
    pthread_mutex_unlock(&ep->lock);
}
