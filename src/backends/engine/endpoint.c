/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Endpoint: one rank's view of a segment, its queues, its doorbell and its
 * progress thread. The progress thread exists only once an asynchronous
 * operation was started, and it sleeps on the doorbell futex (woken by peers'
 * writes) instead of spinning: it never steals a core.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "engine.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

static void futex_wake_all(atomic_uint *addr)
{
    syscall(SYS_futex, (void *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(atomic_uint *addr, unsigned expected, double max_s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)max_s;
    ts.tv_nsec = (long)((max_s - (double)ts.tv_sec) * 1e9);
    syscall(SYS_futex, (void *)addr, FUTEX_WAIT, expected, &ts, NULL, 0);
}

/*
 * A waker and a sleeper pair like Dekker's algorithm: the waker stores its
 * data, then loads the sleeper's waiter count; the sleeper raises that count,
 * then looks for data. Each needs a full fence between its store and its
 * load, or both may miss the other's. On the waker's side that is one fence
 * per op, and it stalls the op until the op's store has left the core: with
 * 2 ranks the costliest instruction of an 8-byte broadcast (~0.03 us of
 * ~0.22). So when every rank of the segment could register for
 * membarrier(2), the sleeper, which sleeps only after spinning, pays for
 * both: MEMBARRIER_CMD_GLOBAL_EXPEDITED runs a full barrier on every CPU
 * that runs a registered process, and a waker only keeps the compiler from
 * reordering its store and load. Without membarrier both sides fence.
 */
static int membarrier(int cmd)
{
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

bool eng_light_fences_register(void)
{
    static atomic_int state; /* 0 not tried, 1 registered, -1 unavailable: once per process */
    int s = atomic_load(&state);
    if (s == 0) {
        int cmds = membarrier(MEMBARRIER_CMD_QUERY);
        s = cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                    membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0
                ? 1
                : -1;
        atomic_store(&state, s);
    }
    return s == 1;
}

static inline void waker_fence(const eng_ep_t *ep)
{
    if (ep->light_fences)
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* 1 when the sleeper's barrier covered the wakers; 0 when it could not (then
 * a waker may be missed, and the caller sleeps briefly). */
static int sleeper_fence(const eng_ep_t *ep)
{
    if (ep->light_fences) return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
    atomic_thread_fence(memory_order_seq_cst);
    return 1;
}

/* Ring r's doorbell if it has waiters; the caller has fenced (waker_fence). */
static void ring_if_waiting(eng_ep_t *ep, int r)
{
    eng_ctl_t *c = eng_ctl(ep, r);
    if (atomic_load_explicit(&c->waiters, memory_order_relaxed) == 0) return;
    atomic_fetch_add(&c->doorbell, 1);
    futex_wake_all(&c->doorbell);
}

void eng_wake(eng_ep_t *ep, int r)
{
    /* Pairs with sleeper_fence in eng_sleep: either the sleeper sees our data or we see it waiting. */
    waker_fence(ep);
    ring_if_waiting(ep, r);
}

void eng_wake_members(eng_ep_t *ep, const int *world_of, int n, int skip)
{
    /* One fence for all: it orders this rank's stores before every load below. */
    waker_fence(ep);
    for (int r = 0; r < n; r++)
        if (r != skip) ring_if_waiting(ep, world_of[r]);
}

/* Sleep on our doorbell unless a progress pass finds work first. Lock NOT held. */
void eng_sleep(eng_ep_t *ep, double max_s, const eng_comm_t *ec)
{
    eng_ctl_t *c = eng_ctl(ep, ep->wrank);
    atomic_fetch_add(&c->waiters, 1);
    if (!sleeper_fence(ep) && max_s > 1e-3) max_s = 1e-3;
    unsigned v = atomic_load(&c->doorbell);
    pthread_mutex_lock(&ep->lock);
    int progressed = eng_progress_locked(ep);
    pthread_mutex_unlock(&ep->lock);
    /* A failure posted before we counted as a waiter woke nobody: look once more. */
    if (!progressed && !(ec && eng_fail_posted(ec))) futex_wait(&c->doorbell, v, max_s);
    atomic_fetch_sub(&c->waiters, 1);
}

static void *progress_main(void *arg)
{
    eng_ep_t *ep = arg;
    pthread_mutex_lock(&ep->lock);
    while (!ep->thread_stop) {
        if (ep->async_pending == 0) {
            eng_cond_wait_slice(&ep->cond, &ep->lock);
            continue;
        }
        /* Drive work while it moves; then sleep until a peer writes to us. */
        if (eng_progress_locked(ep)) continue;
        pthread_mutex_unlock(&ep->lock);
        eng_sleep(ep, 0.05, NULL);
        pthread_mutex_lock(&ep->lock);
    }
    pthread_mutex_unlock(&ep->lock);
    return NULL;
}

/* Caller holds the lock. */
mlc_status_t eng_async_begin(eng_ep_t *ep)
{
    ep->async_pending++;
    if (!ep->thread_started) {
        int rc = pthread_create(&ep->thread, NULL, progress_main, ep);
        if (rc != 0) {
            ep->async_pending--;
            return mlc_error(MLC_ERR_SYSTEM, "cannot start the progress thread: %s", strerror(rc));
        }
        ep->thread_started = true;
    }
    pthread_cond_signal(&ep->cond);
    return MLC_SUCCESS;
}

mlc_status_t eng_ep_create(eng_seg_t *seg, int wrank, bool threads, eng_ep_t **out)
{
    int n = (int)seg->nranks;
    size_t stream_min = 0;
    mlc_status_t st = mlc_env_size(MLC_ENV_STREAM_MIN, &stream_min, NULL);
    if (st != MLC_SUCCESS) return st;
    eng_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep) return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory");
    ep->stream_min = stream_min;
    ep->seg = seg;
    ep->base = (char *)seg;
    ep->wrank = wrank;
    ep->wsize = n;
    ep->threads = threads;
    ep->cma_slow = seg->cma_slow != 0;
    ep->cma_ok = (const uint8_t *)ep->base + seg->cma_off;
    ep->sendq_head = calloc((size_t)n, sizeof *ep->sendq_head);
    ep->sendq_tail = calloc((size_t)n, sizeof *ep->sendq_tail);
    ep->in = calloc((size_t)n, sizeof *ep->in);
    ep->pids = calloc((size_t)n, sizeof *ep->pids);
    ep->dead = calloc((size_t)n, sizeof *ep->dead);
    ep->live_at = calloc((size_t)n, sizeof *ep->live_at);
    ep->dead_why = calloc((size_t)n, sizeof *ep->dead_why);
    bool gauge = eng_yield_gauge_init(&ep->yield_gauge, n);
    if (!ep->sendq_head || !ep->sendq_tail || !ep->in || !ep->pids || !ep->dead || !ep->live_at || !ep->dead_why ||
        !gauge) {
        free(ep->sendq_head);
        free(ep->sendq_tail);
        free(ep->in);
        free(ep->pids);
        free(ep->dead);
        free(ep->live_at);
        free(ep->dead_why);
        eng_yield_gauge_free(&ep->yield_gauge);
        free(ep);
        return mlc_error(MLC_ERR_NO_MEMORY, "engine: out of memory");
    }
    /* Rendezvous above this size when the pair allows single-copy; the ring must
     * hold several eager messages. */
    ep->eager_max = seg->ring_bytes / 8 < 16384 ? seg->ring_bytes / 8 : 16384;
    pthread_mutex_init(&ep->lock, NULL);
    pthread_cond_init(&ep->cond, NULL);
    atomic_store(&ep->ctx_next, 1); /* context pair 0 is the world communicator */
    *out = ep;
    return MLC_SUCCESS;
}

void eng_ep_unref(eng_ep_t *ep)
{
    pthread_mutex_lock(&ep->lock);
    int left = --ep->refs;
    if (left == 0) ep->thread_stop = true;
    pthread_cond_signal(&ep->cond);
    pthread_mutex_unlock(&ep->lock);
    if (left > 0) return;
    if (ep->thread_started) {
        eng_ctl_t *c = eng_ctl(ep, ep->wrank);
        atomic_fetch_add(&c->doorbell, 1);
        futex_wake_all(&c->doorbell);
        pthread_join(ep->thread, NULL);
    }
    while (ep->free_ops) {
        eng_op_t *o = ep->free_ops;
        ep->free_ops = o->next;
        free(o);
    }
    while (ep->ux_head) {
        eng_unexp_t *u = ep->ux_head;
        ep->ux_head = u->next;
        free(u->data);
        free(u);
    }
    while (ep->acks) {
        eng_ack_t *a = ep->acks;
        ep->acks = a->next;
        free(a);
    }
    /* Sends still queued (their communicators were freed): drop them; the
     * cancelled ones among them are orphans, freed next. */
    for (int d = 0; d < ep->wsize; d++)
        while (ep->sendq_head[d]) {
            eng_op_t *o = ep->sendq_head[d];
            ep->sendq_head[d] = o->next;
            if (!o->cancelled) free(o);
        }
    while (ep->orphans) {
        eng_op_t *o = ep->orphans;
        ep->orphans = o->orphan_next;
        free(o);
    }
    free(ep->sendq_head);
    free(ep->sendq_tail);
    free(ep->in);
    free(ep->pids);
    free(ep->dead);
    free(ep->live_at);
    free(ep->dead_why);
    eng_yield_gauge_free(&ep->yield_gauge);
    eng_peer_views_free(ep);
    pthread_mutex_destroy(&ep->lock);
    pthread_cond_destroy(&ep->cond);
    if (ep->release) ep->release(ep);
    free(ep);
}
