/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writing into a stage: plain stores while they keep pace, streaming stores
 * while they stall (MLC_STAGE_STORES).
 *
 * A stage place a rank writes was read by its peers a little earlier, so
 * their caches still hold it, and a plain store must take each line back
 * from them first (read for ownership). While the cores share a cache that
 * is cheap. On an AMD EPYC KVM guest whose two cores the host now and then
 * runs apart (for seconds at a time, up to half of the time), each such
 * store waits on the other core's cache: plain writes into a stage cost
 * 300-430 ns per KiB instead of 25-45, and the readers' copies of what was
 * written so slow down too. A 2-rank allgather of 2 MiB took 530 us
 * instead of 73, an allreduce of 2 MiB 930 instead of 135. Streaming stores
 * do not read the line first; in both states they cost about the same, but
 * readers then find the chunk in memory, not in a cache: 112 and 240 us
 * apart, 154 and 199 us together.
 *
 * So every write of GAUGE_MIN_BYTES or more is timed (two clock reads) and
 * the stores follow the measurements: after SLOW_TO_STREAM plain writes in
 * a row slower than STREAM_WHEN times the streamed ones (apart 6-17 times,
 * together at most about 1.6), writes stream. A plain probe (its first
 * PROBE_BYTES) is timed after PROBE_MIN_S, then after twice as long each
 * time it is still slow (up to PROBE_MAX_S); FAST_TO_PLAIN fast probes in
 * a row make writes plain again. While plain stores keep pace, one write
 * in STREAM_SAMPLE_EVERY streams to keep the streamed figure true (the
 * first timed write streams, to have one, and one in STREAM_SAMPLE_FIRST
 * of the next STREAM_SAMPLE_FIRST_WRITES: those paid the stage's page
 * faults). A fast probe does not shorten the time to the next one: after
 * a long slow spell, three probes PROBE_MAX_S apart bring plain stores
 * back. Each rank decides alone: what its readers copy is the same either
 * way.
 *
 * The gauge times a rank's own writes, not what they cost its readers. A
 * staged allreduce is mostly such reads (each rank copies the others'
 * pieces and results out of their stages), and on the AMD EPYC (Zen 5)
 * guest whose cores run apart its writes streamed made it up to twice as
 * fast while the gauge, seeing plain writes at 1.5-2x the streamed ones,
 * kept them plain (2 ranks, medians of 5 interleaved rounds: 512 KiB 80.6
 * -> 43.0 us, 2 MiB 289 -> 173, 32 MiB 5.9 -> 4.7 ms). Streaming loses
 * where the cores share a cache (there readers find a plain write's lines
 * in it). So under MLC_STAGE_STORES=auto each staged allreduce either
 * follows the gauge or streams, whichever made the operations of its size
 * class (a power of two) faster per byte, timed from its start to its own
 * last copy; each mode is timed once first, then one operation in
 * CHOICE_TRY_EVERY tries the other. Every rank makes the same calls, so the
 * ranks try at the same operations.
 */
#include <string.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/stream_copy.h"
#include "engine.h"

#define GAUGE_MIN_BYTES ((size_t)16 << 10) /* shorter writes are not timed: the clock would weigh */
#define STREAM_WHEN 3.0
#define SLOW_TO_STREAM 2u /* one slow write may have been preempted or faulted */
#define STREAM_SAMPLE_EVERY 256u
#define STREAM_SAMPLE_FIRST 8u         /* ... one in this many of ... */
#define STREAM_SAMPLE_FIRST_WRITES 64u /* ... the first timed plain writes */
#define FAST_TO_PLAIN 3u /* probes in a row that keep pace (each write's own cost hides its readers') */
#define PROBE_BYTES ((size_t)64 << 10)
#define PROBE_MIN_S 250e-6
#define PROBE_MAX_S 4e-3
#define CHOICE_TRY_EVERY 16u

bool eng_gauge_pick(eng_store_gauge_t *g, double now)
{
    if (g->stream_ns_per_kib == 0) return true;
    if (g->streaming) return now < g->probe_at;
    /* The first streamed writes also paid the stage's page faults: sample
     * more often at first. */
    unsigned every = g->plain_writes < STREAM_SAMPLE_FIRST_WRITES ? STREAM_SAMPLE_FIRST : STREAM_SAMPLE_EVERY;
    return ++g->plain_writes % every == 0;
}

static void gauge_streamed(eng_store_gauge_t *g, double ns_per_kib)
{
    /* Quick to fall, slow to rise: a write that was preempted or faulted
     * does not make streaming look slow for long. */
    double e = g->stream_ns_per_kib;
    if (ns_per_kib <= 0) ns_per_kib = 1e-3; /* 0 means "none yet" */
    g->stream_ns_per_kib = e == 0 || ns_per_kib < e ? ns_per_kib : 0.875 * e + 0.125 * ns_per_kib;
}

static void gauge_plain(eng_store_gauge_t *g, double ns_per_kib, double now)
{
    bool slow = ns_per_kib > STREAM_WHEN * g->stream_ns_per_kib;
    if (!g->streaming) {
        g->slow_in_row = slow ? g->slow_in_row + 1 : 0;
        if (g->slow_in_row < SLOW_TO_STREAM) return;
        g->streaming = true;
        g->fast_probes = 0;
        g->probe_s = PROBE_MIN_S;
    } else if (slow) { /* a probe: still slow, look again after twice as long */
        g->fast_probes = 0;
        g->probe_s = g->probe_s * 2 < PROBE_MAX_S ? g->probe_s * 2 : PROBE_MAX_S;
    } else if (++g->fast_probes >= FAST_TO_PLAIN) {
        g->streaming = false;
        g->slow_in_row = 0;
        return;
    }
    g->probe_at = now + g->probe_s;
}

void eng_gauge_record(eng_store_gauge_t *g, bool streamed, double ns_per_kib, double now)
{
    if (streamed)
        gauge_streamed(g, ns_per_kib);
    else
        gauge_plain(g, ns_per_kib, now);
}

bool eng_stage_store(eng_store_gauge_t *g, int mode, void *place, const void *src, size_t n)
{
    if (mode == MLC_STAGE_STORES_STREAMING) {
        mlc_copy_stream(place, src, n);
        return true;
    }
    if (mode == MLC_STAGE_STORES_PLAIN || n < GAUGE_MIN_BYTES) {
        memcpy(place, src, n);
        return false;
    }
    double t0 = mlc_now();
    bool stream = eng_gauge_pick(g, t0);
    /* A probe while streaming writes only its first PROBE_BYTES plainly (a
     * slow plain write of 512 KiB costs some 150 us more than a streamed
     * one) and streams the rest. */
    size_t timed = !stream && g->streaming && n > PROBE_BYTES ? PROBE_BYTES : n;
    if (stream)
        mlc_copy_stream(place, src, n);
    else
        memcpy(place, src, timed);
    double t1 = mlc_now();
    eng_gauge_record(g, stream, (t1 - t0) * 1e9 / ((double)timed / 1024.0), t1);
    if (timed == n) return stream;
    mlc_copy_stream((char *)place + timed, (const char *)src + timed, n - timed);
    return true;
}

bool eng_stage_stalls(const eng_store_gauge_t *g, int mode)
{
    return mode == MLC_STAGE_STORES_STREAMING || (mode == MLC_STAGE_STORES_AUTO && g->streaming);
}

static unsigned size_class(size_t bytes)
{
    unsigned k = 0;
    while (bytes > 1 && k + 1 < ENG_STORE_CLASSES) bytes >>= 1, k++;
    return k;
}

int eng_store_choice_pick(eng_store_choice_t *c, int mode, size_t bytes)
{
    if (mode != MLC_STAGE_STORES_AUTO) return mode;
    unsigned k = size_class(bytes), n = c->ops[k]++;
    const double *e = c->ns_per_byte[k];
    if (e[0] == 0) return MLC_STAGE_STORES_AUTO;
    if (e[1] == 0) return MLC_STAGE_STORES_STREAMING;
    bool stream = e[1] < e[0];
    if (n % CHOICE_TRY_EVERY == CHOICE_TRY_EVERY - 1) stream = !stream;
    return stream ? MLC_STAGE_STORES_STREAMING : MLC_STAGE_STORES_AUTO;
}

void eng_store_choice_record(eng_store_choice_t *c, int picked, size_t bytes, double seconds)
{
    if (bytes == 0 || (picked != MLC_STAGE_STORES_AUTO && picked != MLC_STAGE_STORES_STREAMING)) return;
    double ns = seconds * 1e9 / (double)bytes, *e = &c->ns_per_byte[size_class(bytes)][picked != MLC_STAGE_STORES_AUTO];
    if (ns <= 0) ns = 1e-9; /* 0 means "none yet" */
    /* Quick to fall, slow to rise (at most 1.25x per operation): one
     * operation preempted or faulting does not turn the choice; a lasting
     * change of the host does within a few. */
    double risen = 0.75 * *e + 0.25 * ns;
    *e = *e == 0 || ns < *e ? ns : risen < 1.25 * *e ? risen : 1.25 * *e;
}
