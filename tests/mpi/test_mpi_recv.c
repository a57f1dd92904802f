/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Point-to-point receives on MPI (mpi_recv_size.c: probed receives, the
 * bounded type with its spill area). MPI's order among pending receives (any
 * source, any tag), a later receive completing before an earlier overlapping
 * one, a blocking receive while a nonblocking one is pending, iprobe never
 * reporting a message a pending receive takes, pending receives letting a
 * peer's large blocking send through, truncation naming both sizes
 * (blocking, nonblocking posted before the message, large, sendrecv, and
 * through the large-count paths with the count limit shrunk), and a message
 * longer than the buffer and the whole spill area (shrunk to 64 bytes):
 * truncated inside the receive type, nothing written outside the buffer.
 */
#include <dlfcn.h>
#include "../ranks/harness.h"

typedef void (*set_spill_fn)(size_t bytes);
typedef void (*set_limits_fn)(size_t count, size_t displ, int large_count_calls);

static int names_both(const char *msg, const char *a, const char *b)
{
    return strstr(msg, a) != NULL && strstr(msg, b) != NULL;
}

/* prev sends A(tag 1) B(tag 2) C(tag 1): receives (prev, any), (prev, 1),
 * (any, any) get A, C, B, whether posted before or after the messages came. */
static int order(mlc_comm_t *comm, int next, int prev, int receives_first)
{
    int32_t out[3] = {10, 20, 30}, in[3] = {-1, -1, -1};
    int tags[3] = {1, 2, 1};
    mlc_request_t *sends[3], *recvs[3];
    mlc_msg_status_t st[3];
    if (!receives_first) {
        for (int i = 0; i < 3; i++) CHECK_OK(mlc_send(&out[i], 1, MLC_INT32, next, tags[i], comm, &sends[i]));
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    CHECK_OK(mlc_recv(&in[0], 1, MLC_INT32, prev, MLC_ANY_TAG, comm, &st[0], &recvs[0]));
    CHECK_OK(mlc_recv(&in[1], 1, MLC_INT32, prev, 1, comm, &st[1], &recvs[1]));
    CHECK_OK(mlc_recv(&in[2], 1, MLC_INT32, MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &st[2], &recvs[2]));
    if (receives_first) {
        CHECK_OK(mlc_barrier(comm, NULL));
        for (int i = 0; i < 3; i++) CHECK_OK(mlc_send(&out[i], 1, MLC_INT32, next, tags[i], comm, &sends[i]));
    }
    CHECK_OK(mlc_request_wait_all(3, recvs, NULL));
    CHECK_OK(mlc_request_wait_all(3, sends, NULL));
    CHECK(in[0] == 10 && in[1] == 30 && in[2] == 20, "receives got %d %d %d, want 10 30 20 (receives %s)", in[0],
          in[1], in[2], receives_first ? "first" : "last");
    CHECK(st[0].tag == 1 && st[1].tag == 1 && st[2].tag == 2 && st[2].source == prev && st[2].bytes == 4,
          "statuses: tags %d %d %d, last from %d with %zu bytes", st[0].tag, st[1].tag, st[2].tag, st[2].source,
          st[2].bytes);
    return 0;
}

/* Receives (prev, 5) then (any, any): the later one takes the tag-6 message
 * and completes first; the tag-5 message is only sent after it did. */
static int later_first(mlc_comm_t *comm, int next, int prev)
{
    int32_t six = 6, five = 5, a = -1, b = -1;
    mlc_request_t *r5, *rany, *s6, *s5;
    mlc_msg_status_t st;
    CHECK_OK(mlc_recv(&a, 1, MLC_INT32, prev, 5, comm, NULL, &r5));
    CHECK_OK(mlc_recv(&b, 1, MLC_INT32, MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &st, &rany));
    CHECK_OK(mlc_send(&six, 1, MLC_INT32, next, 6, comm, &s6));
    CHECK_OK(mlc_request_wait(&rany));
    CHECK(b == 6 && st.tag == 6 && st.source == prev, "(any, any) got %d tag %d from %d", b, st.tag, st.source);
    CHECK_OK(mlc_send(&five, 1, MLC_INT32, next, 5, comm, &s5));
    CHECK_OK(mlc_request_wait(&r5));
    CHECK(a == 5, "(prev, 5) got %d", a);
    CHECK_OK(mlc_request_wait(&s6));
    CHECK_OK(mlc_request_wait(&s5));
    return 0;
}

/* A blocking receive while a nonblocking one waits for another tag. */
static int blocking_behind(mlc_comm_t *comm, int next, int prev)
{
    int32_t seven = 7, eight = 8, a = -1, b = -1;
    mlc_request_t *r7, *s8, *s7;
    CHECK_OK(mlc_recv(&a, 1, MLC_INT32, prev, 7, comm, NULL, &r7));
    CHECK_OK(mlc_send(&eight, 1, MLC_INT32, next, 8, comm, &s8));
    CHECK_OK(mlc_recv(&b, 1, MLC_INT32, prev, 8, comm, NULL, NULL));
    CHECK(b == 8, "blocking (prev, 8) got %d", b);
    CHECK_OK(mlc_send(&seven, 1, MLC_INT32, next, 7, comm, &s7));
    CHECK_OK(mlc_request_wait(&r7));
    CHECK(a == 7, "(prev, 7) got %d", a);
    CHECK_OK(mlc_request_wait(&s8));
    CHECK_OK(mlc_request_wait(&s7));
    return 0;
}

/* With (prev, any) pending, prev sends tag 3 then tag 4: iprobe sees only
 * the tag-4 message (the tag-3 one is the pending receive's). */
static int iprobe_skips_taken(mlc_comm_t *comm, int next, int prev)
{
    int32_t m1 = 3, m2 = 4, a = -1, b = -1;
    mlc_request_t *r, *s[2];
    mlc_msg_status_t st = {-9, -9, 0};
    CHECK_OK(mlc_recv(&a, 1, MLC_INT32, prev, MLC_ANY_TAG, comm, NULL, &r));
    CHECK_OK(mlc_send(&m1, 1, MLC_INT32, next, 3, comm, &s[0]));
    CHECK_OK(mlc_send(&m2, 1, MLC_INT32, next, 4, comm, &s[1]));
    int flag = 0;
    double end = mlc_test_now() + 20;
    while (!flag && mlc_test_now() < end) CHECK_OK(mlc_iprobe(prev, MLC_ANY_TAG, comm, &flag, &st));
    CHECK(flag, "iprobe saw no message in 20 s");
    CHECK(st.tag == 4 && st.source == prev && st.bytes == 4, "iprobe reported tag %d from %d (%zu bytes)", st.tag,
          st.source, st.bytes);
    /* The tag-3 message came first: the pending receive has it. */
    CHECK_OK(mlc_iprobe(MLC_ANY_SOURCE, 3, comm, &flag, &st));
    CHECK(!flag, "iprobe reported the pending receive's message (tag %d)", st.tag);
    CHECK_OK(mlc_recv(&b, 1, MLC_INT32, prev, 4, comm, NULL, NULL));
    CHECK_OK(mlc_request_wait(&r));
    CHECK(a == 3 && b == 4, "pending receive got %d, then (prev, 4) got %d", a, b);
    CHECK_OK(mlc_request_wait_all(2, s, NULL));
    return 0;
}

/* Every rank posts a receive, then sends 4 MiB (MPI's rendezvous) to the
 * next one with a blocking send: the posted receives let them through. */
static int posted_progress(mlc_comm_t *comm, int next, int prev)
{
    enum { N = 1 << 20 };
    int32_t *out = malloc(N * sizeof *out), *in = malloc(N * sizeof *in);
    CHECK(out && in, "out of memory");
    for (int i = 0; i < N; i++) out[i] = mlc_comm_rank(comm) + i;
    mlc_request_t *r;
    CHECK_OK(mlc_recv(in, N, MLC_INT32, prev, 50, comm, NULL, &r));
    CHECK_OK(mlc_send(out, N, MLC_INT32, next, 50, comm, NULL));
    CHECK_OK(mlc_request_wait(&r));
    CHECK(in[0] == prev && in[N - 1] == prev + N - 1, "got %d ... %d", in[0], in[N - 1]);
    free(out);
    free(in);
    return 0;
}

/* 400 bytes into 200: MLC_ERR_TRUNCATE naming both, the message consumed. */
static int truncation(mlc_comm_t *comm, int next, int prev)
{
    int32_t big[100], small[50], after = 99, got = -1;
    for (int i = 0; i < 100; i++) big[i] = i;
    mlc_request_t *s[2], *r;
    /* Blocking, with nothing else pending. */
    CHECK_OK(mlc_send(big, 100, MLC_INT32, next, 30, comm, &s[0]));
    CHECK_OK(mlc_send(&after, 1, MLC_INT32, next, 30, comm, &s[1]));
    CHECK_ERR(mlc_recv(small, 50, MLC_INT32, prev, 30, comm, NULL, NULL), MLC_ERR_TRUNCATE);
    CHECK(names_both(mlc_last_error(), "400", "200"), "blocking: \"%s\"", mlc_last_error());
    CHECK_OK(mlc_recv(&got, 1, MLC_INT32, prev, 30, comm, NULL, NULL));
    CHECK(got == 99, "the message after the truncated one: %d", got);
    CHECK_OK(mlc_request_wait_all(2, s, NULL));
    /* Nonblocking, posted before the message is sent (matched lazily). */
    CHECK_OK(mlc_recv(small, 50, MLC_INT32, prev, 31, comm, NULL, &r));
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_send(big, 100, MLC_INT32, next, 31, comm, &s[0]));
    CHECK_ERR(mlc_request_wait(&r), MLC_ERR_TRUNCATE);
    CHECK(names_both(mlc_last_error(), "400", "200"), "nonblocking: \"%s\"", mlc_last_error());
    CHECK_OK(mlc_request_wait(&s[0]));
    /* The same, 4 MiB into 1 MiB (MPI's rendezvous), then the next message. */
    enum { M = 1 << 20 };
    int32_t *huge = calloc(4 * M, sizeof *huge), *part = malloc(M * sizeof *part);
    CHECK(huge && part, "out of memory");
    CHECK_OK(mlc_recv(part, M, MLC_INT32, MLC_ANY_SOURCE, 33, comm, NULL, &r));
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_send(huge, 4 * M, MLC_INT32, next, 33, comm, &s[0]));
    CHECK_OK(mlc_send(&after, 1, MLC_INT32, next, 33, comm, &s[1]));
    CHECK_ERR(mlc_request_wait(&r), MLC_ERR_TRUNCATE);
    CHECK(names_both(mlc_last_error(), "16777216", "4194304"), "large nonblocking: \"%s\"", mlc_last_error());
    CHECK_OK(mlc_recv(&got, 1, MLC_INT32, prev, 33, comm, NULL, NULL));
    CHECK(got == 99, "the message after the large truncated one: %d", got);
    CHECK_OK(mlc_request_wait_all(2, s, NULL));
    free(huge);
    free(part);
    /* sendrecv, blocking. */
    mlc_status_t st = mlc_sendrecv(big, 100, next, 32, small, 50, prev, 32, MLC_INT32, comm, NULL, NULL);
    CHECK(st == MLC_ERR_TRUNCATE, "sendrecv of 100 into 50 -> %s (%s)", mlc_status_name(st), mlc_last_error());
    CHECK(names_both(mlc_last_error(), "400", "200"), "sendrecv: \"%s\"", mlc_last_error());
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "truncation made the communicator fail");
    return 0;
}

/* The same through the module's large-message paths (one big datatype, or
 * MPI-4 large-count calls), with one MPI call limited to 5 elements. */
static int large(mlc_comm_t *comm, int next, int prev, set_limits_fn set_limits)
{
    enum { N = 1000 };
    unsigned char out[N], in[N];
    for (int i = 0; i < N; i++) out[i] = (unsigned char)(i * 7 + mlc_comm_rank(comm));
    for (int calls = 0; calls < 2; calls++) {
        set_limits(5, 1000, calls);
        mlc_request_t *s, *r;
        mlc_msg_status_t st;
        memset(in, 0, N);
        CHECK_OK(mlc_send(out, N, MLC_UINT8, next, 40, comm, &s));
        CHECK_OK(mlc_recv(in, N, MLC_UINT8, prev, 40, comm, &st, NULL));
        CHECK(st.bytes == N && in[N - 1] == (unsigned char)((N - 1) * 7 + prev), "blocking large: %zu bytes",
              st.bytes);
        CHECK_OK(mlc_request_wait(&s));
        memset(in, 0, N);
        CHECK_OK(mlc_recv(in, N, MLC_UINT8, MLC_ANY_SOURCE, 41, comm, &st, &r));
        CHECK_OK(mlc_send(out, N, MLC_UINT8, next, 41, comm, &s));
        CHECK_OK(mlc_request_wait(&r));
        CHECK(st.bytes == N && st.source == prev && in[7] == (unsigned char)(49 + prev),
              "nonblocking large: %zu bytes from %d", st.bytes, st.source);
        CHECK_OK(mlc_request_wait(&s));
        memset(in, 0xEE, N);
        CHECK_OK(mlc_send(out, N, MLC_UINT8, next, 42, comm, &s));
        CHECK_ERR(mlc_recv(in, 600, MLC_UINT8, prev, 42, comm, NULL, NULL), MLC_ERR_TRUNCATE);
        CHECK(names_both(mlc_last_error(), "1000", "600"), "large truncation: \"%s\"", mlc_last_error());
        CHECK_OK(mlc_request_wait(&s));
        CHECK_OK(mlc_recv(in, 600, MLC_UINT8, prev, 43, comm, NULL, &r)); /* posted before the message */
        CHECK_OK(mlc_barrier(comm, NULL));
        CHECK_OK(mlc_send(out, N, MLC_UINT8, next, 43, comm, &s));
        CHECK_ERR(mlc_request_wait(&r), MLC_ERR_TRUNCATE);
        CHECK(names_both(mlc_last_error(), "1000", "600"), "large posted truncation: \"%s\"", mlc_last_error());
        CHECK_OK(mlc_request_wait(&s));
        for (int i = 600; i < N; i++) CHECK(in[i] == 0xEE, "large truncation wrote byte %d past the buffer", i - 600);
    }
    set_limits(0, 0, 1); /* back to the defaults */
    return 0;
}

/* The spill area shrunk to 64 bytes: 64 KiB into 200 bytes posted first (from
 * the previous rank, then from self) is truncated inside the receive type. */
static int spill_overflow(mlc_comm_t *comm, int next, int prev, set_spill_fn set_spill)
{
    enum { CAP = 200, N = 65536, G = 4096 };
    unsigned char *out = malloc(N), *area = malloc(G + CAP + N + G), after = 7, got = 0;
    CHECK(out && area, "out of memory");
    memset(out, 0x5A, N);
    set_spill(64);
    for (int self = 0; self < 2; self++) {
        int to = self ? mlc_comm_rank(comm) : next, from = self ? mlc_comm_rank(comm) : prev;
        mlc_request_t *s[2], *r;
        memset(area, 0xEE, G + CAP + N + G);
        CHECK_OK(mlc_recv(area + G, CAP, MLC_UINT8, from, 50, comm, NULL, &r));
        CHECK_OK(mlc_barrier(comm, NULL));
        CHECK_OK(mlc_send(out, N, MLC_UINT8, to, 50, comm, &s[0]));
        CHECK_OK(mlc_send(&after, 1, MLC_UINT8, to, 50, comm, &s[1]));
        mlc_status_t st = mlc_request_wait(&r);
        CHECK(st == MLC_ERR_TRUNCATE, "%s: %d bytes into %d past the spill area -> %s (%s)", self ? "self" : "peer",
              N, CAP, mlc_status_name(st), mlc_last_error());
        CHECK(strstr(mlc_last_error(), "200") != NULL, "the error does not name the buffer: \"%s\"",
              mlc_last_error());
        /* Outside the buffer nothing changed; the buffer holds the message's
         * first bytes (Open MPI) or nothing of it (MPICH from a peer). */
        for (size_t i = 0; i < G + CAP + N + G; i++)
            CHECK((i >= G && i < G + CAP) ? area[i] == area[G] && (area[i] == 0x5A || area[i] == 0xEE)
                                          : area[i] == 0xEE,
                  "%s: byte %zu of the area (buffer at %d..%d) is 0x%02x", self ? "self" : "peer", i, G, G + CAP,
                  area[i]);
        CHECK_OK(mlc_recv(&got, 1, MLC_UINT8, from, 50, comm, NULL, NULL));
        CHECK(got == 7, "the message after the truncated one: %d", got);
        CHECK_OK(mlc_request_wait_all(2, s, NULL));
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    set_spill(0);
    free(out);
    free(area);
    return 0;
}

static int scenarios(mlc_comm_t *comm, set_limits_fn set_limits)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    CHECK_RUN(order(comm, next, prev, 1));
    CHECK_RUN(order(comm, next, prev, 0));
    CHECK_RUN(later_first(comm, next, prev));
    CHECK_RUN(blocking_behind(comm, next, prev));
    CHECK_RUN(iprobe_skips_taken(comm, next, prev));
    CHECK_RUN(posted_progress(comm, next, prev));
    CHECK_RUN(truncation(comm, next, prev));
    CHECK_RUN(large(comm, next, prev, set_limits));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (strcmp(mlc_comm_backend(comm), "mpi") != 0) return MLC_TEST_SKIP;
    set_spill_fn set_spill;
    set_limits_fn set_limits;
    *(void **)&set_spill = dlsym(RTLD_DEFAULT, "mlc_mpi_set_spill_bytes");
    *(void **)&set_limits = dlsym(RTLD_DEFAULT, "mlc_mpi_set_limits");
    CHECK(set_spill && set_limits, "the MPI module's test knobs are missing: %s", dlerror());
    CHECK_RUN(scenarios(comm, set_limits));
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    CHECK_RUN(spill_overflow(comm, (r + 1) % p, (r + p - 1) % p, set_spill));
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
