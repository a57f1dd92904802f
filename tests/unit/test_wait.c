/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared wait loop (base/wait.h): one meaning of the timeout (no progress
 * for N s), stop and check hooks, the event hook's slices, and sleeping. */
#include <time.h>

#include "base/clock.h"
#include "base/wait.h"
#include "unit.h"

typedef struct {
    double t0, every, until; /* move every `every` s; done at t0 + until */
    double last;
    int moves, elsewhere, stop_at, check_stops, check_completes, checks, blocks;
    int block_now, steps, steps_at_first_block, most_steps_between_blocks, steps_since_block;
    double max_block;
    int over;
} sim_t;

static int sim_step(void *p)
{
    sim_t *s = p;
    double now = mlc_now();
    s->steps++;
    s->steps_since_block++;
    if (now - s->t0 >= s->until) s->over = 1;
    if (s->stop_at && ++s->moves >= s->stop_at) return MLC_WAIT_STOP;
    if (s->every > 0 && now - s->last >= s->every) {
        s->last = now;
        return s->elsewhere ? MLC_WAIT_MOVED_ELSEWHERE : MLC_WAIT_MOVED;
    }
    return s->block_now ? MLC_WAIT_BLOCK_NOW : MLC_WAIT_NOTHING;
}

static int sim_done(void *p) { return ((sim_t *)p)->over; }

static int sim_check(void *p)
{
    sim_t *s = p;
    s->checks++;
    if (s->check_completes) s->over = 1;
    return s->check_stops || s->check_completes;
}

static int sim_block(void *p, double max_s)
{
    sim_t *s = p;
    if (s->blocks++ == 0) s->steps_at_first_block = s->steps;
    else if (s->steps_since_block > s->most_steps_between_blocks) s->most_steps_between_blocks = s->steps_since_block;
    s->steps_since_block = 0;
    if (max_s > s->max_block) s->max_block = max_s;
    struct timespec ts = {0, (long)(max_s < 0.01 ? max_s * 1e9 : 1e7)};
    nanosleep(&ts, NULL);
    return 1;
}

static sim_t sim(double every, double until)
{
    sim_t s = {0};
    s.t0 = s.last = mlc_now();
    s.every = every;
    s.until = until;
    return s;
}

static mlc_wait_t waiter(sim_t *s, double timeout)
{
    mlc_wait_t w = {.step = sim_step, .done = sim_done, .ctx = s, .timeout_s = timeout, .what = "the test"};
    return w;
}

/* Progress every 0.1 s for 1.2 s in all, timeout 0.4 s: no timeout (in
 * total the wait is three timeouts long). Both kinds of progress count. */
static void test_progress_resets(void)
{
    for (int elsewhere = 0; elsewhere < 2; elsewhere++) {
        sim_t s = sim(0.1, 1.2);
        s.elsewhere = elsewhere;
        mlc_wait_t w = waiter(&s, 0.4);
        mlc_wait_status_t st = mlc_wait_run(&w);
        CHECK(st == MLC_WAIT_DONE, "elsewhere=%d: progressing wait ended with %d after %.2f s", elsewhere, (int)st,
              mlc_now() - s.t0);
    }
}

/* Nothing moves: the wait times out after the timeout, not much later. */
static void test_no_progress_times_out(void)
{
    sim_t s = sim(0, 1e9);
    mlc_wait_t w = waiter(&s, 0.3);
    mlc_wait_status_t st = mlc_wait_run(&w);
    double took = mlc_now() - s.t0;
    CHECK(st == MLC_WAIT_TIMEOUT, "status %d", (int)st);
    CHECK(took >= 0.3 && took < 2.0, "timed out after %.3f s (timeout 0.3 s)", took);
    CHECK(w.idle_s > 0.3, "idle_s %.3f", w.idle_s);
    char buf[160];
    CHECK(strstr(mlc_wait_describe(&w, buf, sizeof buf), "the test made no progress for 0.3 s") != NULL, "%s", buf);
}

static int moves_early(void *p)
{
    sim_t *s = p;
    double now = mlc_now();
    if (now - s->t0 < 0.4 && now - s->last >= 0.05) {
        s->last = now;
        return MLC_WAIT_MOVED;
    }
    return MLC_WAIT_NOTHING;
}

static void test_timeout_counts_from_last_progress(void)
{
    sim_t s = sim(0, 1e9);
    mlc_wait_t w = waiter(&s, 0.3);
    w.step = moves_early;
    mlc_wait_status_t st = mlc_wait_run(&w);
    double took = mlc_now() - s.t0;
    CHECK(st == MLC_WAIT_TIMEOUT, "status %d", (int)st);
    CHECK(took >= 0.65, "timed out after %.3f s: before 0.35 s (last progress) + 0.3 s", took);
}

static void test_stop_and_check(void)
{
    sim_t s = sim(0, 1e9);
    s.stop_at = 10;
    mlc_wait_t w = waiter(&s, 0);
    CHECK(mlc_wait_run(&w) == MLC_WAIT_STOPPED, "a step's stop stops the wait");

    s = sim(0, 1e9);
    s.check_stops = 1;
    w = waiter(&s, 0);
    w.check = sim_check;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_STOPPED && s.checks == 1, "the check's stop (checks %d)", s.checks);

    s = sim(0, 1e9);
    s.check_completes = 1;
    w = waiter(&s, 0);
    w.check = sim_check;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE, "a check that completes the wait: done, not stopped");

    /* Done on the first step: no clock, no check. */
    s = sim(0, 0);
    w = waiter(&s, 1);
    w.check = sim_check;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE && s.checks == 0, "immediately done (checks %d)", s.checks);
}

/* The event hook is used instead of sleeping, with slices no longer than
 * slice_s and the time left before the timeout. */
static void test_block_hook(void)
{
    sim_t s = sim(0, 0.5);
    mlc_wait_t w = waiter(&s, 10);
    w.block = sim_block;
    w.slice_s = 0.05;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE, "done");
    CHECK(s.blocks > 0, "the hook was used");
    CHECK(s.max_block <= 0.05 + 1e-9, "a slice of %.3f s (slice_s 0.05)", s.max_block);

    s = sim(0, 1e9);
    w = waiter(&s, 0.2);
    w.block = sim_block;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_TIMEOUT, "timed out");
    CHECK(s.max_block <= 0.2 + 2e-3, "a slice of %.3f s with 0.2 s left", s.max_block);
}

/* A step that says MLC_WAIT_BLOCK_NOW is not polled again first: the hook
 * blocks after it, also right after progress, with the checks and the
 * deadline as before; without the hook the loop sleeps at once. */
static void test_block_now(void)
{
    sim_t s = sim(0.02, 0.3);
    s.block_now = 1;
    mlc_wait_t w = waiter(&s, 10);
    w.block = sim_block;
    w.check = sim_check;
    w.slice_s = 0.005;
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE, "done");
    CHECK(s.steps_at_first_block == 1, "first block after %d steps, want 1", s.steps_at_first_block);
    CHECK(s.most_steps_between_blocks <= 2, "up to %d steps between blocks, want at most 2 (a move, then block)",
          s.most_steps_between_blocks);
    CHECK(s.checks >= s.blocks, "%d checks for %d blocks: each block checks first", s.checks, s.blocks);

    s = sim(0, 1e9);
    s.block_now = 1;
    w = waiter(&s, 0.2);
    w.block = sim_block;
    double t0 = mlc_now();
    CHECK(mlc_wait_run(&w) == MLC_WAIT_TIMEOUT, "nothing moves: timed out");
    CHECK(mlc_now() - t0 < 1.0, "timed out after %.2f s (timeout 0.2 s)", mlc_now() - t0);

    /* Without a hook: sleeps, so few steps in 0.2 s (spinning would take millions). */
    s = sim(0, 0.2);
    s.block_now = 1;
    w = waiter(&s, 10);
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE, "done");
    CHECK(s.steps < 2000, "%d steps in 0.2 s: it polled", s.steps);
}

/* A long wait without an event hook sleeps: it uses a small part of a core
 * (spin 2 ms, yield 0.5 ms, then naps of up to 1 ms). */
static void test_sleeps(void)
{
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    sim_t s = sim(0, 1.0);
    mlc_wait_t w = waiter(&s, 0);
    CHECK(mlc_wait_run(&w) == MLC_WAIT_DONE, "done");
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double wall = mlc_now() - s.t0;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    CHECK(cpu < 0.3 * wall, "a %.2f s wait used %.3f s of CPU", wall, cpu);
}

/* Work that moves on every step (other traffic of the communicator) must not
 * hide a remote abort or a dead peer: the check still runs, within a slice. */
static void test_check_runs_while_moving(void)
{
    sim_t s = sim(0, 5.0);
    s.every = 1e-9; /* moves on every step */
    s.check_stops = 1;
    mlc_wait_t w = waiter(&s, 0);
    w.check = sim_check;
    w.slice_s = 0.05;
    mlc_wait_status_t st = mlc_wait_run(&w);
    double took = mlc_now() - s.t0;
    CHECK(st == MLC_WAIT_STOPPED && s.checks >= 1, "a wait that keeps moving ended with %d after %.2f s, %d checks",
          (int)st, took, s.checks);
    CHECK(took < 2.0, "the check ran only after %.2f s of moving", took);
}

int main(void)
{
    test_check_runs_while_moving();
    test_progress_resets();
    test_no_progress_times_out();
    test_timeout_counts_from_last_progress();
    test_stop_and_check();
    test_block_hook();
    test_block_now();
    test_sleeps();
    return unit_result("unit_wait");
}
