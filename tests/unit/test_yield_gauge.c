/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm engine's choice, with more ranks than cores, between yielding the
 * core and sleeping on the doorbell (src/backends/engine/yield_gauge.c),
 * driven with made-up readings: costly yields while the job's ranks get
 * the cpus whole (a rank beside its busy peer) keep the yields; costly
 * yields while they get less than 0.8 of them (another process competes)
 * make waiters sleep for 0.1 s, then for twice as long each time it comes
 * back at once (up to 1.6 s), and for 0.1 s again after a quiet spell.
 * Readings closer than 20 ms decide nothing; one older than 1 s starts
 * the window again.
 */
#include "backends/engine/engine.h"
#include "unit.h"

#define CPUS 2

static void fresh(eng_yield_gauge_t *g)
{
    CHECK(eng_yield_gauge_init(g, 4), "init");
    g->cpus = CPUS;
}

/* Costly yields every `every` s from t for `span` s, the job's ranks
 * getting `share` of the cpus; returns the time after the last one. */
static double costly_yields(eng_yield_gauge_t *g, double t, double span, double every, double share, double *cpu)
{
    for (double end = t + span; t < end; t += every) {
        *cpu += share * CPUS * every;
        if (!eng_yield_futile(g, t)) eng_yield_sample(g, t, *cpu, NULL);
    }
    return t;
}

static void test_quiet_keeps_yielding(void)
{
    eng_yield_gauge_t g;
    fresh(&g);
    double cpu = 0;
    double t = costly_yields(&g, 10.0, 5.0, 0.005, 0.99, &cpu);
    CHECK(!eng_yield_futile(&g, t), "ranks that had the cpus whole: still yielding");
    t = costly_yields(&g, t, 5.0, 0.3, 0.85, &cpu);
    CHECK(!eng_yield_futile(&g, t), "0.85 of the cpus: still yielding");
    eng_yield_gauge_free(&g);
}

static void test_competition_blocks(void)
{
    eng_yield_gauge_t g;
    fresh(&g);
    double cpu = 0, t = 10.0;
    eng_yield_sample(&g, t, cpu, NULL);
    CHECK(!eng_yield_futile(&g, t), "one reading decides nothing");
    cpu += 0.6 * CPUS * 0.01;
    eng_yield_sample(&g, t + 0.01, cpu, NULL);
    CHECK(!eng_yield_futile(&g, t + 0.01), "a reading 10 ms after the first decides nothing");
    cpu += 0.6 * CPUS * 0.02;
    double share = 0, stretch = eng_yield_sample(&g, t + 0.03, cpu, &share);
    CHECK(eng_yield_futile(&g, t + 0.03), "0.6 of the cpus over 30 ms: sleep");
    CHECK(stretch > 0.0999 && stretch < 0.1001 && share > 0.599 && share < 0.601,
          "the stretch begun %.3f s (want 0.1), the share %.3f (want 0.6)", stretch, share);
    CHECK(eng_yield_futile(&g, t + 0.129) && !eng_yield_futile(&g, t + 0.131), "for 0.1 s");
    eng_yield_gauge_free(&g);
}

static void test_stretches_double_then_reset(void)
{
    eng_yield_gauge_t g;
    fresh(&g);
    double cpu = 0, t = 10.0;
    double want[] = {0.1, 0.2, 0.4, 0.8, 1.6, 1.6};
    for (int i = 0; i < 6; i++) {
        /* Costly yields every 5 ms from the stretch's end until one begins. */
        double start = t;
        while (!eng_yield_futile(&g, t) && t - start < 1) {
            cpu += 0.6 * CPUS * 0.005;
            eng_yield_sample(&g, t, cpu, NULL);
            if (eng_yield_futile(&g, t)) break;
            t += 0.005;
        }
        CHECK(t - start < 0.05, "stretch %d began %.3f s after the last", i, t - start);
        double len = 0;
        while (eng_yield_futile(&g, t + len) && len < 10) len += 0.001;
        CHECK(len > want[i] - 0.002 && len < want[i] + 0.002, "stretch %d: %.3f s, want %.1f", i, len, want[i]);
        cpu += 0.6 * CPUS * len;
        t += len;
    }
    /* A quiet spell (no costly yield for a second), then competition again: 0.1 s. */
    t += 1.0;
    cpu += CPUS * 1.0;
    double start = t;
    while (!eng_yield_futile(&g, t) && t - start < 1) {
        cpu += 0.6 * CPUS * 0.005;
        eng_yield_sample(&g, t, cpu, NULL);
        if (!eng_yield_futile(&g, t)) t += 0.005;
    }
    double len = 0;
    while (eng_yield_futile(&g, t + len) && len < 10) len += 0.001;
    CHECK(len > 0.098 && len < 0.102, "after a quiet spell: %.3f s, want 0.1", len);
    eng_yield_gauge_free(&g);
}

static void test_stale_reading_restarts(void)
{
    eng_yield_gauge_t g;
    fresh(&g);
    eng_yield_sample(&g, 10.0, 0.0, NULL);
    /* 2 s later the job's ranks had only 0.5 of the cpus on average, but
     * the reading is stale: it starts a new window and decides nothing. */
    eng_yield_sample(&g, 12.0, 2.0, NULL);
    CHECK(!eng_yield_futile(&g, 12.0), "a reading over 1 s old decides nothing");
    eng_yield_sample(&g, 12.05, 2.0 + 0.95 * CPUS * 0.05, NULL);
    CHECK(!eng_yield_futile(&g, 12.05), "the new window: 0.95 of the cpus");
    eng_yield_gauge_free(&g);
}

int main(void)
{
    test_quiet_keeps_yielding();
    test_competition_blocks();
    test_stretches_double_then_reset();
    test_stale_reading_restarts();
    return unit_result("unit_yield_gauge");
}
