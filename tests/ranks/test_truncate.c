/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A message longer than the receive buffer never writes outside it: the
 * receive fails with MLC_ERR_TRUNCATE naming the message's size and the
 * buffer's, its status names the sender, the tag and the message's size,
 * the buffer holds the message's first bytes, and not one byte
 * before or after it changes. Messages 1 KiB, 4 KiB, 64 KiB and 1 MiB longer
 * than buffers of 8, 1000 and 8192 bytes, to self and from the previous
 * rank, by every receive path:
 *   blocking receive (message sent first), nonblocking receive posted before
 *   the message is sent (a barrier orders them), nonblocking receive of a
 *   message already there, MLC_ANY_SOURCE posted first, sendrecv.
 * Run with a deadline and with MLC_TIMEOUT=0 (with a deadline every call is nonblocking
 * underneath). After each truncation the next message of the same source
 * and tag arrives whole (the truncated one was consumed). Last, a blocking
 * receive whose message comes 50 ms late (rank 1 to rank 0).
 */
#include "harness.h"

#define GUARD 4096u

enum { BLOCKING, POSTED_FIRST, ARRIVED_FIRST, ANY_SOURCE_FIRST, SENDRECV, NMODES };
static const char *const mode_names[NMODES] = {"blocking recv", "irecv posted first", "irecv of an arrived message",
                                                "irecv from any source posted first", "sendrecv"};

typedef struct region {
    unsigned char *base; /* GUARD | cap bytes (the user's buffer) | excess + GUARD */
    size_t cap, len;
} region_t;

static unsigned char guard_byte(size_t off) { return (unsigned char)(0xA5 ^ (off * 7)); }

static int region_make(region_t *g, size_t cap, size_t excess)
{
    g->cap = cap;
    g->len = GUARD + cap + excess + GUARD;
    g->base = malloc(g->len);
    if (!g->base) return 1;
    for (size_t i = 0; i < g->len; i++) g->base[i] = guard_byte(i);
    return 0;
}

/* First byte outside the buffer that changed, or SIZE_MAX. */
static size_t region_touched(const region_t *g)
{
    for (size_t i = 0; i < g->len; i++)
        if ((i < GUARD || i >= GUARD + g->cap) && g->base[i] != guard_byte(i)) return i;
    return SIZE_MAX;
}

static uint64_t seed_of(int from, int to, int mode, size_t bytes)
{
    return ((uint64_t)(unsigned)from << 48) ^ ((uint64_t)(unsigned)to << 40) ^ ((uint64_t)mode << 32) ^ bytes;
}

static int names_size(const char *msg, size_t n)
{
    char s[32];
    snprintf(s, sizeof s, "%zu", n);
    return strstr(msg, s) != NULL;
}

/* One truncated message of cap + excess bytes from `from` to this rank (which
 * sends its own to `to`), received by `mode`, then a whole 16-byte message. */
static int one_case(mlc_comm_t *comm, int mode, int to, int from, size_t cap, size_t excess)
{
    int r = mlc_comm_rank(comm), tag = 40 + mode;
    size_t n = cap + excess;
    unsigned char *out = malloc(n), follow[16], got[16];
    region_t g;
    CHECK(out && region_make(&g, cap, excess) == 0, "out of memory for %zu bytes", n);
    unsigned char *buf = g.base + GUARD;
    mlc_test_pattern_fill(out, n, seed_of(r, to, mode, n));
    mlc_test_pattern_fill(follow, sizeof follow, seed_of(r, to, mode, 16));
    mlc_request_t *sreq = NULL, *rreq = NULL, *freq = NULL;
    mlc_msg_status_t ms = {-9, -9, 0};
    mlc_status_t st = MLC_ERR_INTERNAL;
    int src = mode == ANY_SOURCE_FIRST ? MLC_ANY_SOURCE : from;
    switch (mode) {
    case BLOCKING:
        CHECK_OK(mlc_send(out, n, MLC_UINT8, to, tag, comm, &sreq));
        st = mlc_recv(buf, cap, MLC_UINT8, from, tag, comm, &ms, NULL);
        break;
    case POSTED_FIRST:
    case ANY_SOURCE_FIRST:
        CHECK_OK(mlc_recv(buf, cap, MLC_UINT8, src, tag, comm, &ms, &rreq));
        CHECK_OK(mlc_barrier(comm, NULL)); /* every receive is posted before any message is sent */
        CHECK_OK(mlc_send(out, n, MLC_UINT8, to, tag, comm, &sreq));
        st = mlc_request_wait(&rreq);
        break;
    case ARRIVED_FIRST:
        CHECK_OK(mlc_send(out, n, MLC_UINT8, to, tag, comm, &sreq));
        CHECK_OK(mlc_barrier(comm, NULL));
        {
            int flag = 0; /* the message has arrived before the receive is posted */
            for (double t0 = mlc_test_now(); !flag && mlc_test_now() - t0 < 30;) {
                mlc_msg_status_t ps;
                CHECK_OK(mlc_iprobe(from, tag, comm, &flag, &ps));
                if (flag) CHECK(ps.bytes == n, "iprobe: %zu bytes, expected %zu", ps.bytes, n);
            }
            CHECK(flag, "the %zu-byte message did not arrive within 30 s", n);
        }
        CHECK_OK(mlc_recv(buf, cap, MLC_UINT8, from, tag, comm, &ms, &rreq));
        st = mlc_request_wait(&rreq);
        break;
    case SENDRECV:
        st = mlc_sendrecv(out, n, to, tag, buf, cap, from, tag, MLC_UINT8, comm, &ms, NULL);
        break;
    }
    char what[160];
    snprintf(what, sizeof what, "%s of %zu bytes into %zu from rank %d", mode_names[mode], n, cap, from);
    CHECK(st == MLC_ERR_TRUNCATE, "%s -> %s (%s)", what, mlc_status_name(st), mlc_last_error());
    const char *msg = mlc_last_error();
    CHECK(names_size(msg, n) && names_size(msg, cap), "%s: the error does not name both sizes: \"%s\"", what,
          msg);
    /* The status says who sent it, and its size (a receive from MLC_ANY_SOURCE learns it only so). */
    CHECK(ms.source == from && ms.tag == tag && ms.bytes == n, "%s: the status after the truncation: {%d, %d, %zu}",
          what, ms.source, ms.tag, ms.bytes);
    size_t bad = region_touched(&g);
    CHECK(bad == SIZE_MAX, "%s: byte %td %s the buffer was overwritten", what,
          bad < GUARD ? (ptrdiff_t)(GUARD - bad) : (ptrdiff_t)(bad - GUARD - cap + 1),
          bad < GUARD ? "before" : "after");
    CHECK(mlc_test_pattern_check(buf, cap, seed_of(from, r, mode, n)) == SIZE_MAX,
          "%s: the buffer does not hold the message's first %zu bytes", what, cap);
    if (sreq) CHECK_OK(mlc_request_wait(&sreq));
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "%s made the communicator fail", what);
    /* The truncated message was consumed: the next one of that source and tag is whole. */
    CHECK_OK(mlc_send(follow, sizeof follow, MLC_UINT8, to, tag, comm, &freq));
    CHECK_OK(mlc_recv(got, sizeof got, MLC_UINT8, from, tag, comm, &ms, NULL));
    CHECK(ms.source == from && ms.tag == tag && ms.bytes == sizeof got, "%s: the next message: {%d, %d, %zu}",
          what, ms.source, ms.tag, ms.bytes);
    CHECK(mlc_test_pattern_check(got, sizeof got, seed_of(from, r, mode, 16)) == SIZE_MAX,
          "%s: the next message has the wrong content", what);
    CHECK_OK(mlc_request_wait(&freq));
    CHECK_OK(mlc_barrier(comm, NULL)); /* no message of this case is left when the next starts */
    free(g.base);
    free(out);
    return 0;
}

/* A blocking receive that waits longer than any spin for its message (rank 1
 * sends to rank 0 50 ms after rank 0 started receiving). */
static int late_message(mlc_comm_t *comm, size_t cap, size_t excess)
{
    int r = mlc_comm_rank(comm);
    size_t n = cap + excess;
    region_t g;
    unsigned char *out = malloc(n);
    CHECK(out && region_make(&g, cap, excess) == 0, "out of memory for %zu bytes", n);
    mlc_test_pattern_fill(out, n, seed_of(1, 0, 99, n));
    CHECK_OK(mlc_barrier(comm, NULL));
    if (r == 1) {
        mlc_test_sleep_ms(50);
        CHECK_OK(mlc_send(out, n, MLC_UINT8, 0, 99, comm, NULL));
    } else if (r == 0) {
        mlc_msg_status_t ms;
        mlc_status_t st = mlc_recv(g.base + GUARD, cap, MLC_UINT8, 1, 99, comm, &ms, NULL);
        CHECK(st == MLC_ERR_TRUNCATE, "late %zu bytes into %zu -> %s (%s)", n, cap, mlc_status_name(st),
              mlc_last_error());
        CHECK(names_size(mlc_last_error(), n) && names_size(mlc_last_error(), cap),
              "late message: the error does not name both sizes: \"%s\"", mlc_last_error());
        size_t bad = region_touched(&g);
        CHECK(bad == SIZE_MAX, "late %zu bytes into %zu: byte %zu of the area (buffer at %u) was overwritten", n,
              cap, bad, GUARD);
        CHECK(mlc_test_pattern_check(g.base + GUARD, cap, seed_of(1, 0, 99, n)) == SIZE_MAX,
              "late message: the buffer does not hold the message's first %zu bytes", cap);
    }
    CHECK_OK(mlc_barrier(comm, NULL));
    free(g.base);
    free(out);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    static const size_t caps[] = {8, 1000, 8192};
    static const size_t excess[] = {1024, 4096, 65536, 1048576};
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    for (int self = 1; self >= 0; self--) {
        if (!self && p == 1) continue;
        for (int mode = 0; mode < NMODES; mode++) {
            /* From any source, every rank's message may match: only to self with one rank. */
            if (mode == ANY_SOURCE_FIRST && !self && p > 2) continue;
            if (mode == ANY_SOURCE_FIRST && self && p > 1) continue;
            for (size_t c = 0; c < sizeof caps / sizeof *caps; c++)
                for (size_t e = 0; e < sizeof excess / sizeof *excess; e++)
                    CHECK_RUN(one_case(comm, mode, self ? r : next, self ? r : prev, caps[c], excess[e]));
        }
    }
    if (p >= 2) {
        CHECK_RUN(late_message(comm, 8, 65536));
        CHECK_RUN(late_message(comm, 8192, 1048576)); /* probed for a while first under MLC_TIMEOUT */
    }
    return 0;
}

MLC_TEST_MAIN(body)
