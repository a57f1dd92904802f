/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Liveness of the engine's peers, for every wait:
 *
 *  - a peer is DIED when the backend says so (launcher's job state, or its pid
 *    gone / a zombie) without having released its endpoint; any operation still
 *    pending on a communicator with it fails (after draining what it sent);
 *  - a peer is FREED once it released its endpoint (mlc_comm_free of its last
 *    communicator on the segment, usually just before exiting), or, for one
 *    communicator, once it freed that one (its slot's `left`): it will never
 *    send there again, so exactly the operations that still wait for it fail
 *    (a receive from it, a collective step or flag of it, a probe of it; an
 *    any-source receive or probe only once no other member is left);
 *  - probes have no pending operation: a probe of a gone peer fails when
 *    nothing of it matches; an any-source probe fails when any member DIED
 *    (as MPI ULFM's), or when every member is gone.
 *
 * Each rank stamps its control block (`beat`) whenever its wait loop checks
 * health (at least every ~100 ms while it waits), so a timeout can name only
 * the ranks it was not heard from: the peers the operation still waits for
 * that are not waiting themselves, never the caller.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "engine.h"
#include "base/error.h"

#define PID_RECHECK_S 0.005 /* ask the backend about a live peer at most this often */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void eng_beat(eng_ep_t *ep)
{
    atomic_store_explicit(&eng_ctl(ep, ep->wrank)->beat, now_ns(), memory_order_relaxed);
}

int eng_peer_gone(eng_ep_t *ep, int w, char *why, size_t len)
{
    if (w == ep->wrank) return ENG_ALIVE;
    bool left = atomic_load(&eng_ctl(ep, w)->attached) == ENG_LEFT;
    if (!ep->dead[w] && ep->peer_dead) {
        double now = mlc_now();
        if (now - ep->live_at[w] >= PID_RECHECK_S) {
            ep->live_at[w] = now;
            char how[sizeof ep->dead_why[0]];
            if (ep->peer_dead(ep, w, how, sizeof how)) {
                memcpy(ep->dead_why[w], how, sizeof how);
                ep->dead[w] = 1;
            }
        }
    }
    /* Released its endpoint (maybe between two loads, then exited). */
    if (left || (ep->dead[w] && atomic_load(&eng_ctl(ep, w)->attached) == ENG_LEFT)) {
        bool exited = ep->threads || ep->dead[w];
        snprintf(why, len, "freed the communicator%s", exited ? " and exited" : "");
        return ENG_FREED;
    }
    if (!ep->dead[w]) return ENG_ALIVE;
    snprintf(why, len, "is gone (%s)", ep->dead_why[w]);
    return ENG_DIED;
}

int eng_peer_gone_within(eng_ep_t *ep, int w, double max_s, char *why, size_t len)
{
    double until = mlc_now() + max_s;
    for (;;) {
        ep->live_at[w] = 0; /* ask the backend now, not at its next turn */
        int gone = eng_peer_gone(ep, w, why, len);
        if (gone != ENG_ALIVE || mlc_now() >= until) return gone;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

void eng_member_leave(eng_comm_t *ec)
{
    if (!ec->slots) return;
    atomic_store_explicit(&ec->slots[ec->ep->wrank].left, 1, memory_order_release);
    eng_wake_members(ec->ep, ec->world_of, ec->comm->size, ec->comm->rank);
}

/* Is comm rank r of ec gone: from the job (eng_peer_gone), or from ec alone
 * (it freed ec and lives on; known on communicators with a slot area)? */
static int member_gone(eng_comm_t *ec, int r, char *why, size_t len)
{
    int w = ec->world_of[r];
    int gone = eng_peer_gone(ec->ep, w, why, len);
    if (gone != ENG_ALIVE || w == ec->ep->wrank || !ec->slots) return gone;
    if (!atomic_load_explicit(&ec->slots[w].left, memory_order_acquire)) return ENG_ALIVE;
    snprintf(why, len, "freed the communicator");
    return ENG_FREED;
}

/* Is every member of ec other than this rank gone? Lock held. */
static bool all_others_gone(eng_comm_t *ec)
{
    char why[160];
    for (int r = 0; r < ec->comm->size; r++) {
        int w = ec->world_of[r];
        if (w != ec->ep->wrank && member_gone(ec, r, why, sizeof why) == ENG_ALIVE) return false;
    }
    return true;
}

/* Does an operation pending on ec need comm rank r, gone the way `gone` says? Lock held. */
static bool needed(eng_comm_t *ec, int r, int gone)
{
    for (eng_coll_t *e = ec->ep->colls; e; e = e->next) {
        if (e->ec != ec) continue;
        if (gone == ENG_DIED) return true; /* a death fails whatever is pending */
        int k = eng_entry_waits_for(e, r);
        if (k == 1 || (k == 2 && all_others_gone(ec))) return true;
    }
    return false;
}

mlc_status_t eng_health_peers(mlc_comm_t *comm)
{
    eng_comm_t *ec = comm->impl;
    eng_ep_t *ep = ec->ep;
    eng_beat(ep);
    char why[160];
    int lost = -1;
    bool drained = false;
    pthread_mutex_lock(&ep->lock);
    for (int r = 0; r < comm->size && lost < 0; r++) {
        int gone = member_gone(ec, r, why, sizeof why);
        if (gone == ENG_ALIVE) continue;
        /* What it sent before it went is not lost: drain it first, until
         * nothing moves (a schedule takes one round per pass, and the
         * messages of several rounds may be in). */
        for (int pass = 0; !drained && pass < 64 && eng_progress_locked(ep); pass++) {
        }
        drained = true;
        if (needed(ec, r, gone)) lost = r;
    }
    pthread_mutex_unlock(&ep->lock);
    if (lost < 0) return MLC_SUCCESS;
    /* A member that left after failing the communicator posted why first: report that. */
    mlc_status_t posted = eng_fail_check(ec);
    if (posted != MLC_SUCCESS) return posted;
    /* Every member fails with it: the others may wait on this rank, which now cannot go on. */
    char msg[256], note[224];
    snprintf(note, sizeof note, "peer rank %d %s", lost, why);
    snprintf(msg, sizeof msg, "rank %d: %s", comm->rank, note);
    return eng_fail_comm_note(ec, MLC_ERR_PEER_LOST, msg, note);
}

int eng_probe_gone(eng_comm_t *ec, int source, char *why, size_t len)
{
    eng_ep_t *ep = ec->ep;
    if (source != MLC_ANY_SOURCE) {
        if (member_gone(ec, source, why, len) != ENG_ALIVE) return source;
        /* A member that died breaks the communicator, as it fails every other wait on it. */
        for (int r = 0; r < ec->comm->size; r++)
            if (ec->world_of[r] != ep->wrank && eng_peer_gone(ep, ec->world_of[r], why, len) == ENG_DIED) return r;
        return -1;
    }
    int freed = -1;
    bool alive = false;
    char freed_why[160] = "";
    for (int r = 0; r < ec->comm->size; r++) {
        int w = ec->world_of[r];
        if (w == ep->wrank) continue;
        int gone = member_gone(ec, r, why, len);
        if (gone == ENG_DIED) return r; /* as MPI ULFM: a dead member fails any-source */
        if (gone == ENG_ALIVE) {
            alive = true;
        } else if (freed < 0) {
            freed = r;
            snprintf(freed_why, sizeof freed_why, "%s", why);
        }
    }
    if (alive || freed < 0) return -1; /* someone can still send */
    snprintf(why, len, "%s (and every other member is gone)", freed_why);
    return freed;
}

/* Append ", r" to buf (just "r" when the list, which starts at offset
 * `start`, is empty); false when full. */
static bool add_rank(char *buf, size_t len, size_t *used, size_t start, int r)
{
    char item[24];
    int n = snprintf(item, sizeof item, "%s%d", *used > start ? ", " : "", r);
    if (*used + (size_t)n + 6 > len) { /* keep room for ", ..." */
        if (*used + 6 <= len) memcpy(buf + *used, ", ...", 6);
        *used = len;
        return false;
    }
    memcpy(buf + *used, item, (size_t)n + 1);
    *used += (size_t)n;
    return true;
}

static void name_silent(mlc_comm_t *comm, uint8_t *wait, char *buf, size_t len);

/* A beat within `lim` ns of `now`; a peer may stamp one after `now` was read. */
static bool recent(uint64_t beat, uint64_t now, uint64_t lim)
{
    return beat != 0 && (beat >= now || now - beat <= lim);
}

void eng_name_silent(const mlc_request_t *req, const eng_coll_t *e, char *buf, size_t len)
{
    eng_comm_t *ec = req->comm->impl;
    eng_ep_t *ep = ec->ep;
    int n = req->comm->size, me = req->comm->rank;
    if (len == 0) return;
    buf[0] = '\0';
    uint8_t *wait = calloc((size_t)n, 1);
    if (!wait) return;
    /* The peers this operation still waits for. */
    pthread_mutex_lock(&ep->lock);
    for (int r = 0; r < n; r++) wait[r] = r != me && eng_entry_waits_for(e, r) != 0;
    pthread_mutex_unlock(&ep->lock);
    name_silent(req->comm, wait, buf, len);
}

void eng_be_silent_peers(mlc_comm_t *comm, int source, char *buf, size_t len)
{
    int n = comm->size;
    if (len == 0) return;
    buf[0] = '\0';
    uint8_t *wait = calloc((size_t)n, 1);
    if (!wait) return;
    for (int r = 0; r < n; r++) wait[r] = r != comm->rank && (source == MLC_ANY_SOURCE || source == r);
    name_silent(comm, wait, buf, len);
}

/* Name the ranks of `wait` not heard from; if all were, the members that were not. Frees wait. */
static void name_silent(mlc_comm_t *comm, uint8_t *wait, char *buf, size_t len)
{
    eng_comm_t *ec = comm->impl;
    eng_ep_t *ep = ec->ep;
    int n = comm->size, me = comm->rank;
    /* Heard from = checking health in a wait of its own within the last second
     * (half the timeout when shorter): such a peer waits for someone else. */
    double window = comm->cfg.timeout_s > 0 && comm->cfg.timeout_s < 2 ? comm->cfg.timeout_s / 2 : 1.0;
    uint64_t now = now_ns(), lim = (uint64_t)(window * 1e9);
    size_t used = 0;
    int named = 0, waiting = 0;
    for (int r = 0; r < n; r++) {
        if (!wait[r]) continue;
        uint64_t b = atomic_load_explicit(&eng_ctl(ep, ec->world_of[r])->beat, memory_order_relaxed);
        if (recent(b, now, lim)) {
            waiting++;
            continue;
        }
        named++;
        if (!add_rank(buf, len, &used, 0, r)) break;
    }
    if (named == 0 && waiting > 0) {
        /* Every peer it waits for is itself waiting: name the members that are not. */
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            uint64_t b = atomic_load_explicit(&eng_ctl(ep, ec->world_of[r])->beat, memory_order_relaxed);
            if (recent(b, now, lim)) continue;
            named++;
            if (!add_rank(buf, len, &used, 0, r)) break;
        }
        if (named == 0) {
            size_t start = used = (size_t)snprintf(buf, len, "none (waiting for ");
            for (int r = 0; r < n && used < len; r++)
                if (wait[r] && !add_rank(buf, len, &used, start, r)) break;
            if (used < len) snprintf(buf + used, len - used, ", which wait in another call)");
        }
    }
    free(wait);
}
