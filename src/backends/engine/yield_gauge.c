/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Waiting with more ranks than cores: yield the core, or sleep on the
 * doorbell.
 *
 * A rank that waits while its peers share its core yields it
 * (sched_yield), so that the rank it waits for runs at once: with four
 * ranks on two cores and nothing else running, a yield hands the core to
 * the other rank on it, and a staged 32 MiB allreduce takes 11 ms. Beside
 * another busy process (a build, a test, a second job) most yields come
 * straight back, but about one per time slice hands the core to that
 * process for the whole slice (4-8 ms on a 2-cpu guest beside two busy
 * loops: 670 of 1.5 million yields, 2.5 s of a rank's 3 s), and the same
 * allreduce took 156-200 ms. Sleeping on the doorbell futex instead, it
 * took 30-60 ms there (a rank woken from a sleep preempts a busy loop),
 * but 17 ms on the quiet machine (each wait costs a wake-up).
 *
 * A yield of COSTLY_S or more alone does not tell who ran: on a quiet
 * machine the other rank on the core may have been busy that long (filling
 * a buffer, a long copy). What tells is the CPU time the job's ranks got.
 * So at such a yield the gauge reads the CPU clocks of the ranks on this
 * host (one clock read per rank, only at costly yields); between two such
 * readings SAMPLE_MIN_S to SAMPLE_MAX_S apart, if the ranks got less than
 * JOB_SHARE_MIN of the cpus they can use at once (host_cpus.c), other
 * processes compete for them:
 * blocking waits then sleep on the doorbell at once, without yielding
 * (a caller polling mlc_request_test still yields: it has no sleep), for a
 * stretch of BLOCK_MIN_S (twice the last one, up to BLOCK_MAX_S, when it
 * follows the last one within BLOCK_MIN_S). A rank spinning or yielding
 * uses its cpu whole, so quietly the share is about 1; beside two busy
 * loops on two cpus it is 2/3 at most. Each rank decides alone. Threads of
 * a rank share the gauge; the reading is taken by one at a time (`busy`),
 * the rest are relaxed atomics.
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "engine.h"

#define COSTLY_S 1e-3       /* a yield this long gave the core away for someone's time slice */
#define SAMPLE_MIN_S 0.02   /* shorter windows are a slice or two: too coarse */
#define SAMPLE_MAX_S 1.0    /* an older reading is stale: start again */
#define JOB_SHARE_MIN 0.8
#define BLOCK_MIN_S 0.1
#define BLOCK_MAX_S 1.6

bool eng_yield_gauge_init(eng_yield_gauge_t *g, int nranks)
{
    atomic_init(&g->block_until, 0.0);
    atomic_init(&g->block_s, 0.0);
    atomic_flag_clear(&g->busy);
    g->sample_at = g->sample_cpu = 0;
    g->rank_cpu = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof *g->rank_cpu);
    g->cpus = 1; /* until the ranks have published their cpus (eng_ep_count_cpus) */
    return g->rank_cpu != NULL;
}

void eng_yield_gauge_free(eng_yield_gauge_t *g)
{
    free(g->rank_cpu);
    g->rank_cpu = NULL;
}

bool eng_yield_futile(const eng_yield_gauge_t *g, double now)
{
    return now < atomic_load_explicit(&g->block_until, memory_order_relaxed);
}

double eng_yield_sample(eng_yield_gauge_t *g, double now, double job_cpu_s, double *share_out)
{
    double at = g->sample_at, stretch = 0;
    if (at == 0 || now - at > SAMPLE_MAX_S) {
        g->sample_at = now;
        g->sample_cpu = job_cpu_s;
    } else if (now - at >= SAMPLE_MIN_S) {
        double share = (job_cpu_s - g->sample_cpu) / ((now - at) * g->cpus);
        if (share_out) *share_out = share;
        g->sample_at = now;
        g->sample_cpu = job_cpu_s;
        if (share < JOB_SHARE_MIN) {
            double until = atomic_load_explicit(&g->block_until, memory_order_relaxed);
            double b = atomic_load_explicit(&g->block_s, memory_order_relaxed);
            b = b > 0 && now - until < BLOCK_MIN_S ? (b * 2 < BLOCK_MAX_S ? b * 2 : BLOCK_MAX_S) : BLOCK_MIN_S;
            atomic_store_explicit(&g->block_s, b, memory_order_relaxed);
            atomic_store_explicit(&g->block_until, now + b, memory_order_relaxed);
            g->sample_at = 0; /* a fresh window after the stretch */
            stretch = b;
        }
    }
    return stretch;
}

/* CPU seconds the job's ranks on this host have had: one process's clock
 * when ranks are threads, else each rank's. A clock that cannot be read
 * (a rank gone) keeps its last reading, so the sum never falls. */
static double job_cpu_seconds(eng_ep_t *ep)
{
    double *last = ep->yield_gauge.rank_cpu, s = 0;
    for (int r = 0; r < (ep->threads ? 1 : ep->wsize); r++) {
        clockid_t c = CLOCK_PROCESS_CPUTIME_ID;
        struct timespec ts;
        if ((ep->threads || (ep->pids[r] > 0 && clock_getcpuclockid(ep->pids[r], &c) == 0)) &&
            clock_gettime(c, &ts) == 0) {
            double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
            if (now > last[r]) last[r] = now;
        }
        s += last[r];
    }
    return s;
}

void eng_yield(eng_ep_t *ep)
{
    eng_yield_gauge_t *g = &ep->yield_gauge;
    double t0 = mlc_now();
    sched_yield();
    /* While waiters sleep (a stretch), the wait loop does not come here
     * between its sleeps; a caller polling mlc_request_test does, and
     * still yields. Its readings would only count the sleepers. */
    if (eng_yield_futile(g, t0)) return;
    double t1 = mlc_now();
    if (t1 - t0 < COSTLY_S || atomic_flag_test_and_set_explicit(&g->busy, memory_order_acquire)) return;
    double share = 1, stretch = eng_yield_sample(g, t1, job_cpu_seconds(ep), &share);
    atomic_flag_clear_explicit(&g->busy, memory_order_release);
    if (stretch > 0)
        MLC_DEBUG("shm rank %d: other processes compete for the cores (the job's ranks had %.2f of %.3g cpus): "
                  "waiters sleep instead of yielding for %.1f s", ep->wrank, share, g->cpus, stretch);
}
