/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shm engine's choice between plain and streaming stores into a stage
 * (src/backends/engine/stage_store.c), driven with made-up timings: plain
 * while plain writes keep pace (one write in 256 streamed, to keep the
 * streamed figure), streaming after two slow plain writes in a row (not
 * after one, nor after two apart), a plain probe after 250 us, then after twice as long while
 * probes stay slow (up to 4 ms), plain again after three fast probes in a
 * row; a first streamed figure inflated by page faults is corrected. And
 * MLC_STAGE_STORES=plain / streaming and a probe (its first 64 KiB plain)
 * copy exactly. And whole staged allreduces (eng_store_choice_*): the
 * gauge's stores or streaming, whichever made them faster, the other tried
 * once in 16, per size class, following a change of the host.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/engine/engine.h"
#include "base/config.h"
#include "unit.h"

#define FAST_PLAIN 30.0  /* ns per KiB: cores that share a cache */
#define SLOW_PLAIN 400.0 /* ... that do not: every line waits on the peer's cache */
#define STREAMED 70.0

/* One timed write at `now` with the given costs; returns whether it streamed. */
static bool write_at(eng_store_gauge_t *g, double now, double plain_ns, double stream_ns)
{
    bool s = eng_gauge_pick(g, now);
    eng_gauge_record(g, s, s ? stream_ns : plain_ns, now);
    return s;
}

/* A gauge past its first writes, plain ones keeping pace; returns the time. */
static double settled(eng_store_gauge_t *g)
{
    memset(g, 0, sizeof *g);
    double t = 1.0;
    /* The very first streamed write paid the stage's page faults. */
    CHECK(eng_gauge_pick(g, t), "the first timed write does not stream (no streamed figure to compare with)");
    eng_gauge_record(g, true, 900.0, t);
    for (int i = 0; i < 200; i++, t += 5e-6) write_at(g, t, FAST_PLAIN, STREAMED);
    CHECK(g->stream_ns_per_kib < 2 * STREAMED, "the streamed figure is still %g ns/KiB after 200 writes "
          "(the first one's page faults)", g->stream_ns_per_kib);
    return t;
}

static void keeps_plain_while_fast(void)
{
    eng_store_gauge_t g;
    double t = settled(&g);
    int streamed = 0;
    for (int i = 0; i < 2560; i++, t += 5e-6) streamed += write_at(&g, t, FAST_PLAIN, STREAMED);
    CHECK(streamed >= 9 && streamed <= 11, "%d of 2560 writes streamed while plain kept pace (expected 10: one in 256)",
          streamed);
    CHECK(!g.streaming, "streaming although plain writes kept pace");
    /* One slow write (preempted, say) is not enough. */
    write_at(&g, t, SLOW_PLAIN, STREAMED);
    for (int i = 0; i < 3; i++) {
        t += 5e-6;
        CHECK(!write_at(&g, t, FAST_PLAIN, STREAMED), "write %d after a single slow plain write streamed", i);
    }
    CHECK(!g.streaming, "streaming after a single slow plain write");
    /* Slow writes apart, not in a row: still plain. */
    for (int i = 0; i < 4; i++) {
        t += 5e-6;
        write_at(&g, t, i % 2 ? FAST_PLAIN : SLOW_PLAIN, STREAMED);
    }
    CHECK(!g.streaming, "streaming after slow plain writes that were not in a row");
}

/* Slow plain writes until the gauge streams (it must take two); returns the time streaming began. */
static double slow_until_streaming(eng_store_gauge_t *g, double t)
{
    int plain = 0;
    while (!g->streaming && plain < 10) {
        if (!write_at(g, t, SLOW_PLAIN, STREAMED)) plain++;
        t += 5e-6;
    }
    CHECK(g->streaming && plain == 2, "streaming after %d slow plain writes (expected after 2)", plain);
    return t - 5e-6;
}

static void streams_while_slow(void)
{
    eng_store_gauge_t g;
    double t = slow_until_streaming(&g, settled(&g));
    double start = t;
    /* Every write streams until the first probe, 250 us on. */
    for (t += 5e-6; t < start + 240e-6; t += 5e-6)
        CHECK(eng_gauge_pick(&g, t), "a write %.0f us after the switch did not stream", (t - start) * 1e6);
    double gaps[6], last = start;
    int probes = 0;
    for (; t < start + 20e-3 && probes < 6; t += 5e-6) {
        if (!write_at(&g, t, SLOW_PLAIN, STREAMED)) {
            gaps[probes++] = t - last;
            last = t;
        }
    }
    static const double want[6] = {250e-6, 500e-6, 1e-3, 2e-3, 4e-3, 4e-3};
    for (int i = 0; i < probes; i++)
        CHECK(gaps[i] >= want[i] - 1e-9 && gaps[i] < want[i] + 10e-6, "probe %d came %.0f us after the one before "
              "(expected %.0f)", i, gaps[i] * 1e6, want[i] * 1e6);
    CHECK(probes == 6 && g.streaming, "%d probes, streaming %d", probes, g.streaming);
}

static void plain_again_after_fast_probes(void)
{
    eng_store_gauge_t g;
    double t = slow_until_streaming(&g, settled(&g));
    /* Two fast probes and a slow one: still streaming. */
    int fast = 0;
    const double costs[] = {FAST_PLAIN, FAST_PLAIN, SLOW_PLAIN, FAST_PLAIN, FAST_PLAIN};
    int probe = 0;
    for (t += 5e-6; probe < 5 && t < 10.0; t += 5e-6) {
        if (!eng_gauge_pick(&g, t)) {
            eng_gauge_record(&g, false, costs[probe], t);
            probe++;
            fast = costs[probe - 1] == FAST_PLAIN ? fast + 1 : 0;
            CHECK(g.streaming, "plain again after probe %d (%d fast in a row)", probe, fast);
        } else {
            eng_gauge_record(&g, true, STREAMED, t);
        }
    }
    /* The third fast probe in a row. */
    for (; t < 10.0; t += 5e-6) {
        if (!eng_gauge_pick(&g, t)) {
            eng_gauge_record(&g, false, FAST_PLAIN, t);
            break;
        }
        eng_gauge_record(&g, true, STREAMED, t);
    }
    CHECK(!g.streaming, "still streaming after three fast probes in a row");
    CHECK(!write_at(&g, t + 5e-6, FAST_PLAIN, STREAMED), "the write after the return to plain streamed");
}

static void modes_copy(void)
{
    enum { N = 70000 };
    unsigned char *src = malloc(N), *dst = malloc(N + 64);
    CHECK(src && dst, "out of memory");
    if (!src || !dst) return;
    for (size_t i = 0; i < N; i++) src[i] = (unsigned char)(i * 37 + 11);
    eng_store_gauge_t g;
    memset(&g, 0, sizeof g);
    const struct {
        int mode;
        size_t n;
        bool streams;
    } cases[] = {{MLC_STAGE_STORES_PLAIN, N, false},     {MLC_STAGE_STORES_STREAMING, N, true},
                 {MLC_STAGE_STORES_STREAMING, 100, true}, {MLC_STAGE_STORES_AUTO, 100, false}, /* too short to time */
                 {MLC_STAGE_STORES_AUTO, N, true}};        /* the first timed write */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memset(dst, 0, N + 64);
        bool s = eng_stage_store(&g, cases[i].mode, dst + 3, src, cases[i].n);
        CHECK(s == cases[i].streams, "case %zu: streamed %d, expected %d", i, s, cases[i].streams);
        CHECK(memcmp(dst + 3, src, cases[i].n) == 0, "case %zu: the copy differs", i);
        CHECK(dst[2] == 0 && dst[3 + cases[i].n] == 0, "case %zu: a byte written outside the place", i);
    }
    CHECK(g.stream_ns_per_kib > 0, "the timed write left no streamed figure");
    /* A probe while streaming writes its first 64 KiB plainly, times them,
     * and streams the rest. */
    memset(&g, 0, sizeof g);
    g.streaming = true;
    g.stream_ns_per_kib = 1e9; /* so the probe keeps pace */
    g.probe_s = 250e-6;
    memset(dst, 0, N + 64);
    CHECK(eng_stage_store(&g, MLC_STAGE_STORES_AUTO, dst + 5, src, N), "a probe's write not counted as streamed");
    CHECK(memcmp(dst + 5, src, N) == 0, "a probe's copy differs");
    CHECK(dst[4] == 0 && dst[5 + N] == 0, "a probe wrote outside the place");
    CHECK(g.fast_probes == 1 && g.streaming, "after a fast probe: %u fast probes, streaming %d", g.fast_probes,
          g.streaming);
    free(src);
    free(dst);
}

/* n staged allreduces of `bytes` whose time per byte is plain_ns (gauge)
 * or stream_ns (streaming); returns how many streamed. */
static int allreduces(eng_store_choice_t *c, int n, size_t bytes, double plain_ns, double stream_ns)
{
    int streamed = 0;
    for (int i = 0; i < n; i++) {
        int m = eng_store_choice_pick(c, MLC_STAGE_STORES_AUTO, bytes);
        CHECK(m == MLC_STAGE_STORES_AUTO || m == MLC_STAGE_STORES_STREAMING, "picked mode %d", m);
        bool s = m == MLC_STAGE_STORES_STREAMING;
        streamed += s;
        eng_store_choice_record(c, m, bytes, (double)bytes * (s ? stream_ns : plain_ns) * 1e-9);
    }
    return streamed;
}

/* Whole staged allreduces pick their stores by what made them faster. */
static void allreduce_choice(void)
{
    eng_store_choice_t c;
    memset(&c, 0, sizeof c);
    size_t mib = (size_t)1 << 20;
    /* Set modes are kept, and not timed. */
    CHECK(eng_store_choice_pick(&c, MLC_STAGE_STORES_PLAIN, mib) == MLC_STAGE_STORES_PLAIN, "plain not kept");
    CHECK(eng_store_choice_pick(&c, MLC_STAGE_STORES_STREAMING, mib) == MLC_STAGE_STORES_STREAMING,
          "streaming not kept");
    eng_store_choice_record(&c, MLC_STAGE_STORES_PLAIN, mib, 1.0);
    CHECK(c.ns_per_byte[20][0] == 0 && c.ns_per_byte[20][1] == 0, "a set mode's time was recorded");
    /* First one of each, then the faster, trying the other one in 16. */
    CHECK(eng_store_choice_pick(&c, MLC_STAGE_STORES_AUTO, mib) == MLC_STAGE_STORES_AUTO, "first is not the gauge's");
    eng_store_choice_record(&c, MLC_STAGE_STORES_AUTO, mib, 2e-3);
    CHECK(eng_store_choice_pick(&c, MLC_STAGE_STORES_AUTO, mib) == MLC_STAGE_STORES_STREAMING,
          "second does not try streaming");
    eng_store_choice_record(&c, MLC_STAGE_STORES_STREAMING, mib, 1e-3);
    int s = allreduces(&c, 160, mib, 2.0, 1.0);
    CHECK(s >= 148 && s <= 152, "%d of 160 streamed where streaming is twice as fast (expected 150)", s);
    /* The host changes: streaming becomes the slower; within a few tries of
     * plain the choice follows. */
    allreduces(&c, 160, mib, 1.0, 3.0);
    s = allreduces(&c, 160, mib, 1.0, 3.0);
    CHECK(s >= 8 && s <= 12, "%d of 160 streamed after streaming became the slower (expected 10)", s);
    /* One slow plain operation (preempted) does not turn it. */
    eng_store_choice_record(&c, MLC_STAGE_STORES_AUTO, mib, 50e-3);
    s = allreduces(&c, 15, mib, 1.0, 3.0);
    CHECK(s <= 2, "%d of 15 streamed after one slow plain operation", s);
    /* Size classes are apart: 64 KiB has no figures yet. */
    CHECK(eng_store_choice_pick(&c, MLC_STAGE_STORES_AUTO, (size_t)64 << 10) == MLC_STAGE_STORES_AUTO &&
              c.ns_per_byte[16][1] == 0, "64 KiB took 1 MiB's figures");
}

int main(void)
{
    keeps_plain_while_fast();
    streams_while_slow();
    plain_again_after_fast_probes();
    modes_copy();
    allreduce_choice();
    return unit_result("unit_stage_store");
}
