/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_split on the engine: the new communicator's context pair and
 * slot area.
 *
 * The parent's members agree on both in one allreduce (max): the context
 * pair is the highest of their next free ones, the area the lowest that
 * each offered (slot_areas.c). A rank's next free pair and its offer stand
 * only while no other split of that rank agrees at the same time: two
 * threads that split two parents at once got one pair, and their
 * communicators mixed each other's data. So one split at a time agrees on
 * a rank; another takes part in its parent's allreduce saying "not now",
 * and every member of that parent tries again. Which split goes first is
 * the same on every rank: the one whose parent has the lowest context pair
 * among the splits under way on that rank. The lowest parent among all
 * splits under way anywhere then agrees on every one of its ranks, so each
 * split gets its turn. A split that waits longer than the parent's timeout
 * fails with MLC_ERR_BUSY on every member alike, naming what held it up on
 * this rank, and leaves the parent usable (every member saw the same).
 *
 * A claim lasts one agreement, so an agreement that found no area free
 * because other parents' splits had claimed them is tried again: those
 * claims are gone by the next try, and a communicator without an area has
 * no engine algorithm and learns late that a member freed it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "engine.h"
#include "base/clock.h"
#include "base/error.h"

struct eng_split_wait {
    uint32_t parent_ctx;
    int parent_size;
    struct eng_split_wait *next;
};

/* What each member says in the agreement; max over the members. */
enum { SAY_NOT_NOW, SAY_OUT_OF_TIME, SAY_CLAIMED, SAY_CTX, SAY_BUSY, SAY_WORDS = SAY_BUSY + ENG_MAX_AREAS };

static void enlist(eng_ep_t *ep, struct eng_split_wait *w)
{
    pthread_mutex_lock(&ep->lock);
    w->next = ep->splits;
    ep->splits = w;
    pthread_mutex_unlock(&ep->lock);
}

static void delist(eng_ep_t *ep, struct eng_split_wait *w)
{
    pthread_mutex_lock(&ep->lock);
    for (struct eng_split_wait **p = &ep->splits; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&ep->lock);
}

/* This split's turn to agree: none agrees now, and its parent is the
 * lowest under way. Else *held_size: the size of the parent of the split
 * that has the turn or goes first. */
static bool take_turn(eng_ep_t *ep, const struct eng_split_wait *w, int *held_size)
{
    pthread_mutex_lock(&ep->lock);
    const struct eng_split_wait *first = w;
    for (const struct eng_split_wait *o = ep->splits; o; o = o->next)
        if (o->parent_ctx < first->parent_ctx) first = o;
    bool turn = first == w && !ep->split_agreeing;
    if (turn) ep->split_agreeing = w;
    else *held_size = (ep->split_agreeing ? ep->split_agreeing : first)->parent_size;
    pthread_mutex_unlock(&ep->lock);
    return turn;
}

static void end_turn(eng_ep_t *ep)
{
    pthread_mutex_lock(&ep->lock);
    ep->split_agreeing = NULL;
    pthread_mutex_unlock(&ep->lock);
}

static mlc_status_t make_child(eng_comm_t *pec, const int *members, int n, uint32_t ctx, uint32_t area,
                               mlc_comm_t *child)
{
    int *world_of = malloc(sizeof(int) * (size_t)n);
    if (!world_of) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_split: out of memory");
    for (int i = 0; i < n; i++) world_of[i] = pec->world_of[members[i]];
    mlc_status_t st = eng_comm_create(child, pec->ep, ctx, area, world_of);
    free(world_of);
    return st;
}

mlc_status_t eng_be_split(mlc_comm_t *parent, int color, int key, const int *members, int n, mlc_comm_t *child)
{
    (void)color, (void)key;
    eng_comm_t *pec = parent->impl;
    eng_ep_t *ep = pec->ep;
    struct eng_split_wait me = {pec->ctx, parent->size, NULL};
    int held_size = 0; /* > 0: a split of this rank held this one up, its parent this size */
    enlist(ep, &me);
    double start = mlc_now(), timeout = parent->cfg.timeout_s;
    mlc_status_t st;
    for (;;) {
        bool turn = take_turn(ep, &me, &held_size), claimed = false;
        uint32_t offered = turn ? eng_areas_offer(ep, pec->ctx, &claimed) : 0, mine[SAY_WORDS], all[SAY_WORDS];
        mine[SAY_NOT_NOW] = !turn;
        mine[SAY_OUT_OF_TIME] = timeout > 0 && mlc_now() - start > timeout;
        mine[SAY_CLAIMED] = claimed;
        mine[SAY_CTX] = atomic_load(&ep->ctx_next);
        for (int a = 0; a < ENG_MAX_AREAS; a++) mine[SAY_BUSY + a] = !(offered >> a & 1u);
        st = mlc_allreduce(mine, all, SAY_WORDS, MLC_UINT32, MLC_MAX, parent, NULL);
        uint32_t busy = 0;
        for (int a = 0; a < ENG_MAX_AREAS && st == MLC_SUCCESS; a++) busy |= all[SAY_BUSY + a] ? 1u << a : 0;
        uint32_t area = eng_area_lowest(offered & ~busy);
        bool agreed = st == MLC_SUCCESS && !all[SAY_NOT_NOW];
        if (agreed && (area != ENG_NO_AREA || !all[SAY_CLAIMED] || all[SAY_OUT_OF_TIME])) {
            uint32_t k = all[SAY_CTX], cur = atomic_load(&ep->ctx_next);
            while (cur < k + 1 && !atomic_compare_exchange_weak(&ep->ctx_next, &cur, k + 1)) {
            }
            if (child) st = make_child(pec, members, n, 2 * k, area, child);
            eng_areas_settle(ep, offered); /* the child marked its area used */
            end_turn(ep);
            break;
        }
        eng_areas_settle(ep, offered);
        if (turn) end_turn(ep);
        if (st != MLC_SUCCESS) break;
        if (all[SAY_OUT_OF_TIME]) {
            char why[200] = "splits on other members held it up";
            if (held_size)
                snprintf(why, sizeof why, "on this rank, another thread's split of a communicator of %d ranks "
                         "went first and waited for its members", held_size);
            st = mlc_error(MLC_ERR_BUSY, "mlc_comm_split: the members could not agree for %g s (MLC_TIMEOUT): "
                           "%s; nothing was made, and the communicator split stays usable", timeout, why);
            break;
        }
        struct timespec pause = {0, 100000}; /* let the split whose turn it is agree */
        nanosleep(&pause, NULL);
    }
    delist(ep, &me);
    return st;
}
