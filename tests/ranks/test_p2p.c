/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Point-to-point: matching by tag out of order, non-overtaking order for one
 * (source, tag), MLC_ANY_SOURCE and MLC_ANY_TAG with the status telling who
 * and what, shorter messages than the buffer, truncation (both sizes named,
 * the message consumed), probe/iprobe, sendrecv around a ring, self-sends,
 * empty messages, the largest tag, 1 MiB messages, many messages in flight.
 * Works for any rank count (with one rank every peer is the rank itself).
 */
#include "harness.h"

#define MIB (1024u * 1024u)

static uint64_t msg_seed(int from, int to, int tag, int k)
{
    return ((uint64_t)from << 40) ^ ((uint64_t)to << 32) ^ ((uint64_t)(unsigned)tag << 8) ^
           (uint64_t)k;
}

/* Sends with tags 5, 3, 9 (in that order) are received as 9, 3, 5. */
static int tags_out_of_order(mlc_comm_t *comm, int next, int prev)
{
    int r = mlc_comm_rank(comm);
    static const int tags[3] = {5, 3, 9};
    enum { N = 50 };
    int32_t out[3][N], in[N];
    mlc_request_t *reqs[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++) out[k][i] = r * 1000 + tags[k] * 10 + i;
        CHECK_OK(mlc_send(out[k], N, MLC_INT32, next, tags[k], comm, &reqs[k]));
    }
    for (int k = 2; k >= 0; k--) {
        mlc_msg_status_t st = {-9, -9, 0};
        CHECK_OK(mlc_recv(in, N, MLC_INT32, prev, tags[k], comm, &st, NULL));
        CHECK(st.source == prev && st.tag == tags[k] && st.bytes == N * 4,
              "status {source %d, tag %d, bytes %zu}, expected {%d, %d, %d}", st.source, st.tag,
              st.bytes, prev, tags[k], N * 4);
        for (int i = 0; i < N; i++)
            CHECK(in[i] == prev * 1000 + tags[k] * 10 + i, "tag %d element %d is %d", tags[k], i,
                  in[i]);
    }
    CHECK_OK(mlc_request_wait_all(3, reqs, NULL));
    return 0;
}

/* Messages with the same source and tag arrive in the order they were sent. */
static int non_overtaking(mlc_comm_t *comm, int next, int prev)
{
    enum { M = 20 };
    int r = mlc_comm_rank(comm);
    mlc_request_t *reqs[M];
    unsigned char *bufs[M];
    for (int k = 0; k < M; k++) {
        size_t bytes = (size_t)(k % 4 == 3 ? 70000 : k * 13 + 1); /* some above any eager size */
        bufs[k] = mlc_test_alloc(bytes);
        mlc_test_pattern_fill(bufs[k], bytes, msg_seed(r, next, 4, k));
        CHECK_OK(mlc_send(bufs[k], bytes, MLC_UINT8, next, 4, comm, &reqs[k]));
    }
    unsigned char *in = mlc_test_alloc(70000);
    for (int k = 0; k < M; k++) {
        size_t bytes = (size_t)(k % 4 == 3 ? 70000 : k * 13 + 1);
        mlc_msg_status_t st;
        CHECK_OK(mlc_recv(in, 70000, MLC_UINT8, prev, 4, comm, &st, NULL));
        CHECK(st.bytes == bytes, "message %d has %zu bytes, expected %zu (overtaken?)", k, st.bytes,
              bytes);
        CHECK(mlc_test_pattern_check(in, bytes, msg_seed(prev, r, 4, k)) == SIZE_MAX,
              "message %d has the wrong content", k);
    }
    CHECK_OK(mlc_request_wait_all(M, reqs, NULL));
    for (int k = 0; k < M; k++) mlc_test_free(bufs[k]);
    mlc_test_free(in);
    return 0;
}

/* Every rank sends to the last rank; it receives from MLC_ANY_SOURCE with
 * MLC_ANY_TAG and learns the sender, tag and size from the status. */
static int any_source_any_tag(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), sink = p - 1;
    size_t maxbytes = 64u * (size_t)p + 8;
    mlc_request_t *req = NULL;
    unsigned char *out = mlc_test_alloc(maxbytes);
    size_t mine = 64u * (size_t)r + 3;
    mlc_test_pattern_fill(out, mine, msg_seed(r, sink, 200 + r, 0));
    CHECK_OK(mlc_send(out, mine, MLC_UINT8, sink, 200 + r, comm, &req));
    if (r == sink) {
        int *seen = calloc((size_t)p, sizeof *seen);
        unsigned char *in = mlc_test_alloc(maxbytes);
        for (int k = 0; k < p; k++) {
            mlc_msg_status_t st = {-9, -9, 0};
            CHECK_OK(mlc_recv(in, maxbytes, MLC_UINT8, MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &st, NULL));
            CHECK(st.source >= 0 && st.source < p, "status source %d", st.source);
            CHECK(!seen[st.source], "rank %d's message received twice", st.source);
            seen[st.source] = 1;
            CHECK(st.tag == 200 + st.source, "tag %d from rank %d", st.tag, st.source);
            CHECK(st.bytes == 64u * (size_t)st.source + 3, "%zu bytes from rank %d", st.bytes,
                  st.source);
            CHECK(mlc_test_pattern_check(in, st.bytes, msg_seed(st.source, sink, st.tag, 0)) ==
                      SIZE_MAX,
                  "wrong content from rank %d", st.source);
        }
        free(seen);
        mlc_test_free(in);
    }
    CHECK_OK(mlc_request_wait(&req));
    CHECK(req == NULL, "wait did not clear the request");
    mlc_test_free(out);
    return 0;
}

/* MLC_ANY_TAG from a given source; a message shorter than the buffer leaves
 * the rest untouched; an empty message with NULL buffers. */
static int any_tag_and_short(mlc_comm_t *comm, int next, int prev)
{
    double out[60], in[100], fresh[100];
    for (int i = 0; i < 60; i++) out[i] = mlc_comm_rank(comm) * 100.0 + i;
    for (int i = 0; i < 100; i++) in[i] = fresh[i] = -1.5;
    mlc_request_t *reqs[2];
    CHECK_OK(mlc_send(out, 60, MLC_FLOAT64, next, 77, comm, &reqs[0]));
    CHECK_OK(mlc_send(NULL, 0, MLC_FLOAT64, next, 78, comm, &reqs[1]));
    mlc_msg_status_t st;
    CHECK_OK(mlc_recv(in, 100, MLC_FLOAT64, prev, MLC_ANY_TAG, comm, &st, NULL));
    CHECK(st.source == prev && st.tag == 77 && st.bytes == 60 * sizeof(double),
          "status {%d, %d, %zu}", st.source, st.tag, st.bytes);
    for (int i = 0; i < 60; i++) CHECK(in[i] == prev * 100.0 + i, "element %d is %g", i, in[i]);
    CHECK(memcmp(in + 60, fresh + 60, 40 * sizeof(double)) == 0,
          "receive wrote past the 60 elements that arrived");
    CHECK_OK(mlc_recv(NULL, 0, MLC_FLOAT64, prev, MLC_ANY_TAG, comm, &st, NULL));
    CHECK(st.tag == 78 && st.bytes == 0, "empty message status {%d, %d, %zu}", st.source, st.tag,
          st.bytes);
    CHECK_OK(mlc_request_wait_all(2, reqs, NULL));
    return 0;
}

static int names_both(const char *msg, const char *a, const char *b)
{
    return strstr(msg, a) != NULL && strstr(msg, b) != NULL;
}

/* A message longer than the receive buffer: MLC_ERR_TRUNCATE naming both
 * sizes; the message is consumed (the next receive gets the next message)
 * and the communicator stays healthy. */
static int truncation(mlc_comm_t *comm, int next, int prev)
{
    int32_t big[100], small[50], after[10];
    for (int i = 0; i < 100; i++) big[i] = i;
    for (int i = 0; i < 10; i++) after[i] = 5000 + i;
    mlc_request_t *reqs[2];
    CHECK_OK(mlc_send(big, 100, MLC_INT32, next, 7, comm, &reqs[0]));
    CHECK_OK(mlc_send(after, 10, MLC_INT32, next, 7, comm, &reqs[1]));
    mlc_status_t st = mlc_recv(small, 50, MLC_INT32, prev, 7, comm, NULL, NULL);
    CHECK(st == MLC_ERR_TRUNCATE, "recv of 100 into 50 elements -> %s (%s)", mlc_status_name(st),
          mlc_last_error());
    const char *msg = mlc_last_error();
    CHECK(names_both(msg, "400", "200") || names_both(msg, "100", "50"),
          "truncation message does not name both sizes: \"%s\"", msg);
    /* Receives have no call number: the message names the peer and tag instead. */
    CHECK(strstr(msg, "#") == NULL && strstr(msg, "tag 7") != NULL,
          "truncation message numbers the receive or does not name its tag: \"%s\"", msg);
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "truncation made the communicator fail");
    int32_t in[10];
    mlc_msg_status_t ms;
    CHECK_OK(mlc_recv(in, 10, MLC_INT32, prev, 7, comm, &ms, NULL));
    CHECK(ms.bytes == 40 && in[0] == 5000 && in[9] == 5009,
          "the message after the truncated one: %zu bytes, first %d", ms.bytes, in[0]);
    mlc_status_t sts[2];
    CHECK_OK(mlc_request_wait_all(2, reqs, sts));
    /* The same with a nonblocking receive. */
    CHECK_OK(mlc_send(big, 100, MLC_INT32, next, 8, comm, &reqs[0]));
    mlc_request_t *rreq = NULL;
    CHECK_OK(mlc_recv(small, 50, MLC_INT32, prev, 8, comm, NULL, &rreq));
    st = mlc_request_wait(&rreq);
    CHECK(st == MLC_ERR_TRUNCATE, "async truncated recv -> %s", mlc_status_name(st));
    CHECK(names_both(mlc_last_error(), "400", "200") || names_both(mlc_last_error(), "100", "50"),
          "async truncation message does not name both sizes: \"%s\"", mlc_last_error());
    CHECK_OK(mlc_request_wait(&reqs[0]));

    /* wait_all returns the first error and reports every request's status. */
    mlc_request_t *sends[3], *recvs[3];
    int32_t a[10], b[50], c[10];
    CHECK_OK(mlc_send(after, 10, MLC_INT32, next, 20, comm, &sends[0]));
    CHECK_OK(mlc_send(big, 100, MLC_INT32, next, 21, comm, &sends[1]));
    CHECK_OK(mlc_send(after, 10, MLC_INT32, next, 22, comm, &sends[2]));
    CHECK_OK(mlc_recv(a, 10, MLC_INT32, prev, 20, comm, NULL, &recvs[0]));
    CHECK_OK(mlc_recv(b, 50, MLC_INT32, prev, 21, comm, NULL, &recvs[1]));
    CHECK_OK(mlc_recv(c, 10, MLC_INT32, prev, 22, comm, NULL, &recvs[2]));
    mlc_status_t rs[3] = {MLC_ERR_INTERNAL, MLC_ERR_INTERNAL, MLC_ERR_INTERNAL};
    st = mlc_request_wait_all(3, recvs, rs);
    CHECK(st == MLC_ERR_TRUNCATE, "wait_all over one truncated receive -> %s", mlc_status_name(st));
    CHECK(rs[0] == MLC_SUCCESS && rs[1] == MLC_ERR_TRUNCATE && rs[2] == MLC_SUCCESS,
          "wait_all statuses %s %s %s", mlc_status_name(rs[0]), mlc_status_name(rs[1]),
          mlc_status_name(rs[2]));
    CHECK(!recvs[0] && !recvs[1] && !recvs[2], "wait_all left a request set");
    CHECK(a[9] == 5009 && c[0] == 5000, "the receives around the truncated one: %d %d", a[9], c[0]);
    CHECK_OK(mlc_request_wait_all(3, sends, NULL));
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "truncation made the communicator fail");
    return 0;
}

static int probe_iprobe(mlc_comm_t *comm, int next, int prev)
{
    int flag = -1;
    mlc_msg_status_t st = {-9, -9, 0};
    /* Nothing is in flight: everything sent so far was received. */
    CHECK_OK(mlc_barrier(comm, NULL));
    CHECK_OK(mlc_iprobe(MLC_ANY_SOURCE, MLC_ANY_TAG, comm, &flag, &st));
    CHECK(flag == 0, "iprobe found a message when none was sent (source %d tag %d)", st.source,
          st.tag);
    CHECK_OK(mlc_barrier(comm, NULL));

    uint64_t out[37], in[37];
    for (int i = 0; i < 37; i++) out[i] = (uint64_t)i * 3u + 1u;
    mlc_request_t *reqs[2];
    CHECK_OK(mlc_send(out, 37, MLC_UINT64, next, 11, comm, &reqs[0]));
    CHECK_OK(mlc_send(out, 5, MLC_UINT64, next, 12, comm, &reqs[1]));
    CHECK_OK(mlc_probe(prev, 11, comm, &st));
    CHECK(st.source == prev && st.tag == 11 && st.bytes == 37 * 8, "probe status {%d, %d, %zu}",
          st.source, st.tag, st.bytes);
    /* Probing does not consume: a second probe sees the same message. */
    CHECK_OK(mlc_probe(MLC_ANY_SOURCE, 11, comm, &st));
    CHECK(st.source == prev && st.bytes == 37 * 8, "second probe status {%d, %d, %zu}", st.source,
          st.tag, st.bytes);
    CHECK_OK(mlc_recv(in, 37, MLC_UINT64, prev, 11, comm, NULL, NULL));
    CHECK(memcmp(in, out, sizeof in) == 0, "message after probe has the wrong content");
    flag = 0;
    while (!flag) CHECK_OK(mlc_iprobe(prev, MLC_ANY_TAG, comm, &flag, &st));
    CHECK(st.source == prev && st.tag == 12 && st.bytes == 5 * 8, "iprobe status {%d, %d, %zu}",
          st.source, st.tag, st.bytes);
    CHECK_OK(mlc_recv(in, 37, MLC_UINT64, prev, 12, comm, NULL, NULL));
    CHECK_OK(mlc_request_wait_all(2, reqs, NULL));
    return 0;
}

/* sendrecv around the ring (dest next, source prev) and with oneself. */
static int sendrecv_ring(mlc_comm_t *comm, int next, int prev)
{
    int r = mlc_comm_rank(comm);
    static const size_t counts[] = {0, 1, 1001, MIB / 4 + 1};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        size_t bytes = counts[k] * 4;
        unsigned char *out = mlc_test_alloc(bytes), *in = mlc_test_alloc(bytes);
        mlc_test_pattern_fill(out, bytes, msg_seed(r, next, 30, (int)k));
        mlc_msg_status_t st;
        CHECK_OK(mlc_sendrecv(out, counts[k], next, 30 + (int)k, in, counts[k], prev,
                              30 + (int)k, MLC_FLOAT32, comm, &st, NULL));
        CHECK(st.source == prev && st.tag == 30 + (int)k && st.bytes == bytes,
              "sendrecv status {%d, %d, %zu}", st.source, st.tag, st.bytes);
        CHECK(mlc_test_pattern_check(in, bytes, msg_seed(prev, r, 30, (int)k)) == SIZE_MAX,
              "sendrecv count %zu: wrong content", counts[k]);
        /* Asynchronously, with oneself, ANY_TAG on the receive side. */
        mlc_request_t *req = NULL;
        CHECK_OK(mlc_sendrecv(out, counts[k], r, 40, in, counts[k], r, MLC_ANY_TAG, MLC_FLOAT32,
                              comm, &st, &req));
        CHECK_OK(mlc_request_wait(&req));
        CHECK(st.source == r && st.tag == 40 && st.bytes == bytes, "self sendrecv status {%d, %d, %zu}",
              st.source, st.tag, st.bytes);
        CHECK(mlc_test_pattern_check(in, bytes, msg_seed(r, next, 30, (int)k)) == SIZE_MAX,
              "self sendrecv count %zu: wrong content", counts[k]);
        mlc_test_free(out);
        mlc_test_free(in);
    }
    return 0;
}

/* Sends to oneself: nonblocking send then blocking receive, and a receive
 * posted before the send. */
static int self_send(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    size_t bytes = MIB + 3;
    unsigned char *out = mlc_test_alloc(bytes), *in = mlc_test_alloc(bytes);
    mlc_test_pattern_fill(out, bytes, msg_seed(r, r, 50, 0));
    mlc_request_t *sreq = NULL, *rreq = NULL;
    CHECK_OK(mlc_send(out, bytes, MLC_UINT8, r, 50, comm, &sreq));
    CHECK_OK(mlc_recv(in, bytes, MLC_UINT8, r, 50, comm, NULL, NULL));
    CHECK_OK(mlc_request_wait(&sreq));
    CHECK(mlc_test_pattern_check(in, bytes, msg_seed(r, r, 50, 0)) == SIZE_MAX, "self-send content");
    memset(in, 0, bytes);
    CHECK_OK(mlc_recv(in, bytes, MLC_UINT8, MLC_ANY_SOURCE, 51, comm, NULL, &rreq));
    CHECK_OK(mlc_send(out, 1000, MLC_UINT8, r, 51, comm, &sreq));
    mlc_request_t *both[2] = {rreq, sreq};
    CHECK_OK(mlc_request_wait_all(2, both, NULL));
    CHECK(mlc_test_pattern_check(in, 1000, msg_seed(r, r, 50, 0)) == SIZE_MAX,
          "self-send with the receive posted first");
    mlc_test_free(out);
    mlc_test_free(in);
    return 0;
}

/* The largest tag works. */
static int tag_max(mlc_comm_t *comm, int next, int prev)
{
    int r = mlc_comm_rank(comm), tmax = mlc_comm_tag_max(comm);
    CHECK(tmax >= 32767, "tag_max %d is below 32767", tmax);
    int32_t v = r, got = -1;
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_send(&v, 1, MLC_INT32, next, tmax, comm, &req));
    CHECK_OK(mlc_recv(&got, 1, MLC_INT32, prev, tmax, comm, NULL, NULL));
    CHECK(got == prev, "tag_max message carried %d", got);
    CHECK_OK(mlc_request_wait(&req));
    return 0;
}

/* 16 messages (one of 1 MiB) to every rank in flight at once; the receives
 * are posted first, in reverse tag order. */
static int many_in_flight(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    enum { K = 16 };
    size_t n = (size_t)p * K;
    mlc_request_t **reqs = calloc(2 * n, sizeof *reqs);
    size_t *lens = calloc(n, sizeof *lens);
    unsigned char **out = calloc(n, sizeof *out), **in = calloc(n, sizeof *in);
    CHECK(reqs && lens && out && in, "out of memory");
    for (int q = 0; q < p; q++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)q * K + (size_t)k;
            lens[i] = k == 0 ? MIB : (size_t)(k * 101);
            out[i] = mlc_test_alloc(lens[i]);
            in[i] = mlc_test_alloc(lens[i]);
            mlc_test_pattern_fill(out[i], lens[i], msg_seed(r, q, 60 + k, k));
        }
    for (int q = 0; q < p; q++) /* receives first, in reverse tag order */
        for (int k = K - 1; k >= 0; k--) {
            size_t i = (size_t)q * K + (size_t)k;
            CHECK_OK(mlc_recv(in[i], lens[i], MLC_UINT8, q, 60 + k, comm, NULL, &reqs[n + i]));
        }
    for (size_t i = 0; i < n; i++)
        CHECK_OK(mlc_send(out[i], lens[i], MLC_UINT8, (int)(i / K), 60 + (int)(i % K), comm, &reqs[i]));
    mlc_status_t *sts = calloc(2 * n, sizeof *sts);
    CHECK_OK(mlc_request_wait_all(2 * n, reqs, sts));
    for (size_t i = 0; i < n; i++) {
        int q = (int)(i / K), k = (int)(i % K);
        CHECK(mlc_test_pattern_check(in[i], lens[i], msg_seed(q, r, 60 + k, k)) == SIZE_MAX,
              "message tag %d from rank %d has the wrong content", 60 + k, q);
        mlc_test_free(in[i]);
        mlc_test_free(out[i]);
    }
    free(sts);
    free(reqs);
    free(lens);
    free(out);
    free(in);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    int next = (r + 1) % p, prev = (r + p - 1) % p;
    /* A barrier after each section: wildcard receives of one section must
     * not match messages a faster rank already sent for the next. */
#define SECTION(call)                                                                     \
    do {                                                                                  \
        CHECK_RUN(call);                                                                  \
        CHECK_OK(mlc_barrier(comm, NULL));                                                \
    } while (0)
    SECTION(tags_out_of_order(comm, next, prev));
    SECTION(non_overtaking(comm, next, prev));
    SECTION(any_source_any_tag(comm));
    SECTION(any_tag_and_short(comm, next, prev));
    SECTION(truncation(comm, next, prev));
    SECTION(probe_iprobe(comm, next, prev));
    SECTION(sendrecv_ring(comm, next, prev));
    SECTION(self_send(comm));
    SECTION(tag_max(comm, next, prev));
    SECTION(many_in_flight(comm));
#undef SECTION
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
