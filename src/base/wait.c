/* SPDX-License-Identifier: BSD-3-Clause */
/* The one wait loop (see wait.h). */
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include "clock.h"
#include "wait.h"

#define WAIT_SPIN_S 0.002
#define WAIT_YIELD_S 0.0005
#define WAIT_SLICE_S 0.1
#define WAIT_SLEEP_MIN_S 2e-6
#define WAIT_SLEEP_MAX_S 1e-3
#define WAIT_SPIN_CHECK 64u

static double pick(double v, double dflt) { return v > 0 ? v : v < 0 ? 0 : dflt; }

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

mlc_wait_status_t mlc_wait_run(mlc_wait_t *w)
{
    const double spin = pick(w->spin_s, WAIT_SPIN_S), yield = pick(w->yield_s, WAIT_YIELD_S);
    const double slice_max = pick(w->slice_s, WAIT_SLICE_S);
    const double nap_min = pick(w->sleep_min_s, WAIT_SLEEP_MIN_S);
    const double nap_max = pick(w->sleep_max_s, WAIT_SLEEP_MAX_S) < nap_min ? nap_min
                                                                            : pick(w->sleep_max_s, WAIT_SLEEP_MAX_S);
    const unsigned check_every = w->spin_check ? w->spin_check : WAIT_SPIN_CHECK;
    double now = mlc_now();
    double idle_since = now, spin_until = now + spin, yield_until = spin_until + yield, nap = nap_min;
    double last_check = now;
    int restart_clock = 0, restart_spin = 0;
    unsigned calls = 0, moves = 0;
    w->idle_s = 0;
    for (;;) {
        int r = w->step(w->ctx);
        if (w->done(w->ctx)) return MLC_WAIT_DONE;
        if (r == MLC_WAIT_STOP) return MLC_WAIT_STOPPED;
        if (r == MLC_WAIT_MOVED) {
            restart_clock = restart_spin = 1;
            calls = 0;
            /* Work that keeps moving (other traffic) must not hide a remote
             * abort or a dead peer: the checks still run every slice. */
            if (w->check && ++moves % check_every == 0) {
                now = mlc_now();
                if (now - last_check >= slice_max) {
                    last_check = now;
                    int stop = w->check(w->ctx);
                    if (w->done(w->ctx)) return MLC_WAIT_DONE;
                    if (stop) return MLC_WAIT_STOPPED;
                }
            }
            continue;
        }
        if (r == MLC_WAIT_MOVED_ELSEWHERE) restart_clock = 1;
        const int block_now = r == MLC_WAIT_BLOCK_NOW;
        /* Spinning (the first phase, and the phase after a progress) reads
         * the clock only every check_every steps. */
        if (!block_now && (restart_spin || now < spin_until)) {
            if (++calls % check_every != 0) continue;
        }
        now = mlc_now();
        if (restart_clock) {
            idle_since = now;
            restart_clock = 0;
        }
        if (restart_spin) {
            spin_until = now + spin;
            yield_until = spin_until + yield;
            nap = nap_min;
            restart_spin = 0;
        }
        if (!block_now) {
            if (now < spin_until) continue;
            if (now < yield_until) {
                sched_yield();
                continue;
            }
        }

        /* Slow path: checks, the deadline, then block or sleep a slice. */
        if (w->check) {
            last_check = now;
            int stop = w->check(w->ctx);
            if (w->done(w->ctx)) return MLC_WAIT_DONE;
            if (stop) return MLC_WAIT_STOPPED;
        }
        w->idle_s = now - idle_since;
        if (w->timeout_s > 0 && w->idle_s > w->timeout_s) return MLC_WAIT_TIMEOUT;
        double slice = slice_max;
        if (w->timeout_s > 0 && w->timeout_s - w->idle_s < slice) slice = w->timeout_s - w->idle_s + 1e-3;
        if (w->block && w->block(w->ctx, slice)) {
            /* Woken by an event (or the slice ended): spin briefly again, a
             * woken waiter often finds work. */
            now = mlc_now();
            spin_until = yield_until = now + spin / 4;
            calls = 0;
        } else {
            sleep_s(nap < slice ? nap : slice);
            if (nap < nap_max) nap = nap * 2 < nap_max ? nap * 2 : nap_max;
        }
    }
}

const char *mlc_wait_describe(const mlc_wait_t *w, char *buf, unsigned long len)
{
    snprintf(buf, len, "%s made no progress for %g s (MLC_TIMEOUT)", w->what ? w->what : "a wait", w->timeout_s);
    return buf;
}
