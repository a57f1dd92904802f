/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every bad-argument case returns MLC_ERR_INVALID_ARG with a message, leaves
 * the request output untouched and the communicator healthy: NULL buffers
 * with count > 0, bad root / peer / tag, unknown dtype / op, a built-in op on
 * records, overlapping buffers that are not the in-place form, missing
 * count/displacement arrays, displacements and counts whose end overflows
 * or passes PTRDIFF_MAX bytes (every v-collective layout), counts whose
 * total overflows, bad config structs, bad request and op calls.
 * Then the sticky errors: after mlc_comm_abort (from one rank, or from
 * another thread while a receive is pending) every call on the communicator
 * returns MLC_ERR_ABORTED on every rank, while its parent keeps working.
 *
 * Bad-argument checks are local, so a case that is only wrong on some ranks
 * (the root's buffers) is only called there.
 */
#include <pthread.h>
#include <stddef.h>
#include "harness.h"

#define N 4 /* count used by the bad calls */

static int dummy_request_target;
#define SENTINEL ((mlc_request_t *)&dummy_request_target)

/* A call (taking &req last) that must fail with INVALID_ARG and leave req alone. */
#define BAD(call)                                                                         \
    do {                                                                                  \
        req = SENTINEL;                                                                   \
        CHECK_ERR(call, MLC_ERR_INVALID_ARG);                                             \
        CHECK(req == SENTINEL, "%s wrote its request output on failure", #call);          \
    } while (0)

static void noop_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx) {}

static int null_buffers(mlc_comm_t *comm, unsigned char *a, unsigned char *b, size_t *cnt,
                        size_t *dsp)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), root = p - 1;
    mlc_request_t *req;
    BAD(mlc_allreduce(NULL, b, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_allreduce(a, NULL, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_reduce(NULL, b, N, MLC_INT32, MLC_SUM, root, comm, &req));
    if (r == root) BAD(mlc_reduce(a, NULL, N, MLC_INT32, MLC_SUM, root, comm, &req));
    if (r == root) BAD(mlc_broadcast(NULL, b, N, MLC_INT32, root, comm, &req));
    BAD(mlc_broadcast(a, NULL, N, MLC_INT32, root, comm, &req));
    BAD(mlc_allgather(NULL, b, N, MLC_INT32, comm, &req));
    BAD(mlc_allgather(a, NULL, N, MLC_INT32, comm, &req));
    BAD(mlc_allgatherv(NULL, N, b, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_allgatherv(a, N, NULL, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_allgatherv(a, N, b, NULL, dsp, MLC_INT32, comm, &req));
    BAD(mlc_allgatherv(a, N, b, cnt, NULL, MLC_INT32, comm, &req));
    BAD(mlc_allgatherv(a, N + 1, b, cnt, dsp, MLC_INT32, comm, &req)); /* != recvcounts[rank] */
    BAD(mlc_reduce_scatter(NULL, b, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_reduce_scatter(a, NULL, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_alltoall(NULL, b, N, MLC_INT32, comm, &req));
    BAD(mlc_alltoall(a, NULL, N, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(a, NULL, dsp, b, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(a, cnt, NULL, b, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(a, cnt, dsp, b, NULL, dsp, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(a, cnt, dsp, b, cnt, NULL, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(NULL, cnt, dsp, b, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_alltoallv(a, cnt, dsp, NULL, cnt, dsp, MLC_INT32, comm, &req));
    BAD(mlc_gather(NULL, b, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_gather(a, NULL, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_gatherv(a, N, NULL, cnt, dsp, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_gatherv(a, N, b, NULL, dsp, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_gatherv(a, N, b, cnt, NULL, MLC_INT32, root, comm, &req));
    BAD(mlc_gatherv(NULL, N, b, cnt, dsp, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_scatter(NULL, b, N, MLC_INT32, root, comm, &req));
    BAD(mlc_scatter(a, NULL, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_scatterv(NULL, cnt, dsp, b, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_scatterv(a, NULL, dsp, b, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_scatterv(a, cnt, NULL, b, N, MLC_INT32, root, comm, &req));
    BAD(mlc_scatterv(a, cnt, dsp, NULL, N, MLC_INT32, root, comm, &req));
    BAD(mlc_send(NULL, N, MLC_INT32, 0, 1, comm, &req));
    BAD(mlc_recv(NULL, N, MLC_INT32, 0, 1, comm, NULL, &req));
    BAD(mlc_sendrecv(NULL, N, 0, 1, b, N, 0, 1, MLC_INT32, comm, NULL, &req));
    BAD(mlc_sendrecv(a, N, 0, 1, NULL, N, 0, 1, MLC_INT32, comm, NULL, &req));
    return 0;
}

/*
 * Counts and displacements that reach past any possible buffer: an end
 * displs[i] + counts[i] that overflows, or whose byte size overflows or
 * exceeds PTRDIFF_MAX (the largest object), on every v-collective's every
 * layout (allgatherv/gatherv receive, scatterv send, alltoallv both sides);
 * plain counts whose total (count * size * element) does. Each would make
 * the backend read or write outside the caller's buffers.
 */
static int bad_vlayouts(mlc_comm_t *comm, unsigned char *a, unsigned char *b, const size_t *cnt0,
                        const size_t *dsp0)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), root = p - 1, other = (r + 1) % p;
    mlc_request_t *req;
    size_t *cnt = calloc((size_t)p, sizeof *cnt), *dsp = calloc((size_t)p, sizeof *dsp);
    CHECK(cnt && dsp, "out of memory");
    /* Displacement values, each bad for a 4-byte element with count N. */
    const size_t bad_displs[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - N + 1, SIZE_MAX / 4,
                                 (size_t)PTRDIFF_MAX / 4, (size_t)PTRDIFF_MAX};
    for (size_t k = 0; k < sizeof bad_displs / sizeof *bad_displs; k++) {
        for (int at = 0; at < 2; at++) {
            int i = at ? other : r; /* my own block, and another rank's */
            memcpy(cnt, cnt0, sizeof *cnt * (size_t)p);
            memcpy(dsp, dsp0, sizeof *dsp * (size_t)p);
            dsp[i] = bad_displs[k];
            BAD(mlc_allgatherv(a, N, b, cnt, dsp, MLC_INT32, comm, &req));
            BAD(mlc_alltoallv(a, cnt, dsp, b, cnt0, dsp0, MLC_INT32, comm, &req));
            BAD(mlc_alltoallv(a, cnt0, dsp0, b, cnt, dsp, MLC_INT32, comm, &req));
            if (r == root) BAD(mlc_gatherv(a, N, b, cnt, dsp, MLC_INT32, root, comm, &req));
            if (r == root) BAD(mlc_scatterv(a, cnt, dsp, b, N, MLC_INT32, root, comm, &req));
        }
    }
    /* Counts past any buffer (another rank's block: mine must equal sendcount). */
    const size_t bad_counts[] = {SIZE_MAX, SIZE_MAX / 2, (size_t)PTRDIFF_MAX / 4 + 1};
    for (size_t k = 0; k < sizeof bad_counts / sizeof *bad_counts; k++) {
        memcpy(cnt, cnt0, sizeof *cnt * (size_t)p);
        cnt[other] = bad_counts[k];
        if (other != r) BAD(mlc_allgatherv(a, N, b, cnt, dsp0, MLC_INT32, comm, &req));
        BAD(mlc_alltoallv(a, cnt, dsp0, b, cnt0, dsp0, MLC_INT32, comm, &req));
        BAD(mlc_alltoallv(a, cnt0, dsp0, b, cnt, dsp0, MLC_INT32, comm, &req));
        if (r == root && other != r) BAD(mlc_gatherv(a, N, b, cnt, dsp0, MLC_INT32, root, comm, &req));
        if (r == root && other != r) BAD(mlc_scatterv(a, cnt, dsp0, b, N, MLC_INT32, root, comm, &req));
    }
    /* Plain counts: one byte-sized element, and totals of count * size. */
    const size_t huge[] = {SIZE_MAX, (size_t)PTRDIFF_MAX + 1};
    for (size_t k = 0; k < sizeof huge / sizeof *huge; k++) {
        size_t c = huge[k];
        BAD(mlc_allreduce(a, b, c, MLC_UINT8, MLC_SUM, comm, &req));
        BAD(mlc_reduce(a, b, c, MLC_UINT8, MLC_SUM, root, comm, &req));
        BAD(mlc_broadcast(a, b, c, MLC_UINT8, root, comm, &req));
        BAD(mlc_send(a, c, MLC_UINT8, 0, 1, comm, &req));
        BAD(mlc_recv(b, c, MLC_UINT8, 0, 1, comm, NULL, &req));
        BAD(mlc_sendrecv(a, c, 0, 1, b, N, 0, 1, MLC_UINT8, comm, NULL, &req));
        BAD(mlc_sendrecv(a, N, 0, 1, b, c, 0, 1, MLC_UINT8, comm, NULL, &req));
        BAD(mlc_allgatherv(a, c, b, cnt0, dsp0, MLC_UINT8, comm, &req));
        BAD(mlc_gatherv(a, c, b, cnt0, dsp0, MLC_UINT8, root, comm, &req));
        BAD(mlc_scatterv(a, cnt0, dsp0, b, c, MLC_UINT8, root, comm, &req));
    }
    /* count fits, count * size (* element) does not: the total wraps or passes PTRDIFF_MAX. */
    size_t c = (size_t)PTRDIFF_MAX / (size_t)p + 1;
    BAD(mlc_allgather(a, b, c, MLC_UINT8, comm, &req));
    BAD(mlc_alltoall(a, b, c, MLC_UINT8, comm, &req));
    BAD(mlc_reduce_scatter(a, b, c, MLC_UINT8, MLC_SUM, comm, &req));
    BAD(mlc_gather(a, b, c, MLC_UINT8, root, comm, &req));
    BAD(mlc_scatter(a, b, c, MLC_UINT8, root, comm, &req));
    c = SIZE_MAX / (size_t)p + 1; /* count * size wraps to a small number */
    if (p > 1) {
        BAD(mlc_allgather(a, b, c, MLC_UINT8, comm, &req));
        BAD(mlc_alltoall(a, b, c, MLC_UINT8, comm, &req));
        BAD(mlc_reduce_scatter(a, b, c, MLC_UINT8, MLC_SUM, comm, &req));
        BAD(mlc_gather(a, b, c, MLC_UINT8, root, comm, &req));
        BAD(mlc_scatter(a, b, c, MLC_UINT8, root, comm, &req));
    }
    free(cnt);
    free(dsp);
    return 0;
}

static int bad_dtypes_and_ops(mlc_comm_t *comm, unsigned char *a, unsigned char *b)
{
    static const mlc_dtype_t bad_dtypes[] = {-5, MLC_DTYPE_COUNT, 999, MLC_RECORD(0),
                                             (mlc_dtype_t)0x30004};
    static const mlc_op_t bad_ops[] = {-2, MLC_OP_BUILTIN_COUNT + 4000, 12345};
    mlc_request_t *req;
    for (size_t k = 0; k < sizeof bad_dtypes / sizeof *bad_dtypes; k++) {
        mlc_dtype_t dt = bad_dtypes[k];
        BAD(mlc_allreduce(a, b, N, dt, MLC_SUM, comm, &req));
        BAD(mlc_broadcast(a, b, N, dt, 0, comm, &req));
        BAD(mlc_allgather(a, b, 1, dt, comm, &req));
        BAD(mlc_send(a, 1, dt, 0, 1, comm, &req));
        BAD(mlc_recv(b, 1, dt, 0, 1, comm, NULL, &req));
        CHECK(mlc_dtype_size(dt) == 0, "mlc_dtype_size(%d) = %zu", (int)dt, mlc_dtype_size(dt));
        CHECK(mlc_dtype_name(dt) == NULL, "mlc_dtype_name(%d) = %s", (int)dt, mlc_dtype_name(dt));
    }
    for (size_t k = 0; k < sizeof bad_ops / sizeof *bad_ops; k++) {
        mlc_op_t op = bad_ops[k];
        BAD(mlc_allreduce(a, b, N, MLC_FLOAT32, op, comm, &req));
        BAD(mlc_reduce(a, b, N, MLC_FLOAT32, op, 0, comm, &req));
        BAD(mlc_reduce_scatter(a, b, 1, MLC_FLOAT32, op, comm, &req));
        CHECK(mlc_op_name(op) == NULL, "mlc_op_name(%d) = %s", (int)op, mlc_op_name(op));
    }
    /* Built-in ops do not reduce opaque records. */
    for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++) {
        BAD(mlc_allreduce(a, b, 1, MLC_RECORD(4), op, comm, &req));
        BAD(mlc_reduce(a, b, 1, MLC_RECORD(4), op, 0, comm, &req));
        BAD(mlc_reduce_scatter(a, b, 1, MLC_RECORD(2), op, comm, &req));
        CHECK_ERR(mlc_reduce_local(a, b, 1, MLC_RECORD(4), op), MLC_ERR_INVALID_ARG);
    }
    CHECK_ERR(mlc_reduce_local(NULL, b, N, MLC_INT32, MLC_SUM), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_reduce_local(a, NULL, N, MLC_INT32, MLC_SUM), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_reduce_local(a, b, N, 999, MLC_SUM), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_reduce_local(a, b, N, MLC_INT32, 12345), MLC_ERR_INVALID_ARG);
    return 0;
}

static int bad_roots_peers_tags(mlc_comm_t *comm, unsigned char *a, unsigned char *b, size_t *cnt,
                                size_t *dsp)
{
    int p = mlc_comm_size(comm), tmax = mlc_comm_tag_max(comm);
    int bad_roots[] = {-1, -3, p, p + 7};
    mlc_request_t *req;
    int flag = 0;
    mlc_msg_status_t st;
    for (size_t k = 0; k < sizeof bad_roots / sizeof *bad_roots; k++) {
        int root = bad_roots[k];
        BAD(mlc_reduce(a, b, N, MLC_INT32, MLC_SUM, root, comm, &req));
        BAD(mlc_broadcast(a, b, N, MLC_INT32, root, comm, &req));
        BAD(mlc_gather(a, b, N, MLC_INT32, root, comm, &req));
        BAD(mlc_gatherv(a, N, b, cnt, dsp, MLC_INT32, root, comm, &req));
        BAD(mlc_scatter(a, b, N, MLC_INT32, root, comm, &req));
        BAD(mlc_scatterv(a, cnt, dsp, b, N, MLC_INT32, root, comm, &req));
    }
    /* Peers: MLC_ANY_SOURCE is only for receiving. */
    int bad_dest[] = {MLC_ANY_SOURCE, -5, p, p + 1};
    for (size_t k = 0; k < sizeof bad_dest / sizeof *bad_dest; k++) {
        BAD(mlc_send(a, N, MLC_INT32, bad_dest[k], 1, comm, &req));
        BAD(mlc_sendrecv(a, N, bad_dest[k], 1, b, N, 0, 1, MLC_INT32, comm, NULL, &req));
    }
    int bad_source[] = {-5, p, p + 1};
    for (size_t k = 0; k < sizeof bad_source / sizeof *bad_source; k++) {
        BAD(mlc_recv(b, N, MLC_INT32, bad_source[k], 1, comm, NULL, &req));
        BAD(mlc_sendrecv(a, N, 0, 1, b, N, bad_source[k], 1, MLC_INT32, comm, NULL, &req));
        CHECK_ERR(mlc_probe(bad_source[k], 1, comm, &st), MLC_ERR_INVALID_ARG);
        CHECK_ERR(mlc_iprobe(bad_source[k], 1, comm, &flag, &st), MLC_ERR_INVALID_ARG);
    }
    /* Tags: MLC_ANY_TAG is only for receiving; above tag_max is refused. */
    int bad_send_tags[] = {MLC_ANY_TAG, -7, tmax < 0x7fffffff ? tmax + 1 : -9};
    for (size_t k = 0; k < sizeof bad_send_tags / sizeof *bad_send_tags; k++) {
        BAD(mlc_send(a, N, MLC_INT32, 0, bad_send_tags[k], comm, &req));
        BAD(mlc_sendrecv(a, N, 0, bad_send_tags[k], b, N, 0, 1, MLC_INT32, comm, NULL, &req));
    }
    int bad_recv_tags[] = {-7, tmax < 0x7fffffff ? tmax + 1 : -9};
    for (size_t k = 0; k < sizeof bad_recv_tags / sizeof *bad_recv_tags; k++) {
        BAD(mlc_recv(b, N, MLC_INT32, 0, bad_recv_tags[k], comm, NULL, &req));
        CHECK_ERR(mlc_iprobe(0, bad_recv_tags[k], comm, &flag, &st), MLC_ERR_INVALID_ARG);
    }
    CHECK_ERR(mlc_iprobe(0, 1, comm, NULL, &st), MLC_ERR_INVALID_ARG);
    return 0;
}

/* Send and receive buffers that overlap without being the in-place form. */
static int overlapping(mlc_comm_t *comm, unsigned char *a)
{
    int r = mlc_comm_rank(comm), root = 0;
    int32_t *x = (int32_t *)a; /* room for 64 elements */
    mlc_request_t *req;
    BAD(mlc_allreduce(x, x + 1, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_allreduce(x + 2, x, N, MLC_INT32, MLC_SUM, comm, &req));
    if (r == root) BAD(mlc_reduce(x, x + 1, N, MLC_INT32, MLC_SUM, root, comm, &req));
    if (r == root) BAD(mlc_broadcast(x + 1, x, N, MLC_INT32, root, comm, &req));
    /* allgather in place is sendbuf == recvbuf + rank*count; +1 element never is (count 4). */
    BAD(mlc_allgather(x + 1, x, N, MLC_INT32, comm, &req));
    if (r != 0) BAD(mlc_allgather(x, x, N, MLC_INT32, comm, &req)); /* in place only for rank 0 */
    /* reduce_scatter in place is recvbuf == sendbuf + rank*recvcount. */
    BAD(mlc_reduce_scatter(x, x + 1, N, MLC_INT32, MLC_SUM, comm, &req));
    if (r != 0) BAD(mlc_reduce_scatter(x, x, N, MLC_INT32, MLC_SUM, comm, &req));
    BAD(mlc_alltoall(x, x + 1, N, MLC_INT32, comm, &req));
    if (r == root) BAD(mlc_gather(x + 1, x, N, MLC_INT32, root, comm, &req));
    if (r == root) BAD(mlc_scatter(x, x + 1, N, MLC_INT32, root, comm, &req));
    return 0;
}

/*
 * Receive blocks of a v-layout that overlap (allgatherv, gatherv at the
 * root, alltoallv's receive side): an element written twice would hold
 * whichever block came last, different on different ranks. Blocks out of
 * order and zero-count blocks anywhere are fine.
 */
static int overlapping_blocks(mlc_comm_t *comm, unsigned char *a, unsigned char *b, const size_t *cnt0)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm), root = 0;
    mlc_request_t *req;
    if (p < 2) return 0;
    size_t *dsp = calloc((size_t)p, sizeof *dsp);
    CHECK(dsp, "out of memory");
    for (int q = 0; q < p; q++) dsp[q] = (size_t)(p - 1 - q) * N; /* reversed: fine */
    dsp[p - 1] = 1; /* the last block now starts inside the one at 0 */
    BAD(mlc_allgatherv(a, N, b, cnt0, dsp, MLC_INT32, comm, &req));
    CHECK(strstr(mlc_last_error(), "overlap") != NULL, "the message does not say overlap: %s", mlc_last_error());
    BAD(mlc_alltoallv(a, cnt0, dsp, b, cnt0, dsp, MLC_INT32, comm, &req)); /* the receive side */
    if (r == root) BAD(mlc_gatherv(a, N, b, cnt0, dsp, MLC_INT32, root, comm, &req));
    /* a zero-count block may sit anywhere, and the blocks in any order */
    size_t *cnt = calloc((size_t)p, sizeof *cnt);
    CHECK(cnt, "out of memory");
    for (int q = 0; q < p; q++) cnt[q] = q == 0 ? 0 : N, dsp[q] = q == 0 ? 2 : (size_t)(p - q) * N;
    int32_t *in = (int32_t *)a, *out = (int32_t *)b;
    for (int i = 0; i < N; i++) in[i] = r * 10 + i;
    CHECK_OK(mlc_allgatherv(a, cnt[r], b, cnt, dsp, MLC_INT32, comm, NULL));
    for (int q = 1; q < p; q++)
        for (int i = 0; i < N; i++)
            CHECK(out[dsp[q] + (size_t)i] == q * 10 + i, "allgatherv, reversed blocks: block %d element %d = %d", q, i,
                  (int)out[dsp[q] + (size_t)i]);
    free(cnt);
    free(dsp);
    return 0;
}

static int bad_config_requests_ops(mlc_comm_t *comm)
{
    mlc_comm_t *c = NULL, *cs[2] = {NULL, NULL};
    mlc_config_t cfg = MLC_CONFIG_INIT;
    /* Broken config structs: size, magic, version. */
    cfg.size = 0;
    CHECK_ERR(mlc_comm_init(&cfg, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(2, &cfg, cs), MLC_ERR_INVALID_ARG);
    cfg.size = sizeof cfg;
    cfg.magic = 0xdeadbeefu;
    CHECK_ERR(mlc_comm_init(&cfg, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(2, &cfg, cs), MLC_ERR_INVALID_ARG);
    cfg.magic = MLC_CONFIG_MAGIC;
    cfg.version = 0; /* older than any library (newer versions may be accepted) */
    CHECK_ERR(mlc_comm_init(&cfg, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(2, &cfg, cs), MLC_ERR_INVALID_ARG);
    CHECK(c == NULL && cs[0] == NULL && cs[1] == NULL, "a failed init wrote its output");
    CHECK_ERR(mlc_comm_init(NULL, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(0, NULL, cs), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(-1, NULL, cs), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_all(2, NULL, NULL), MLC_ERR_INVALID_ARG);
    mlc_unique_id_t id;
    CHECK_OK(mlc_get_unique_id(&id));
    CHECK_ERR(mlc_get_unique_id(NULL), MLC_ERR_INVALID_ARG);
    /* Output parameters are written only on success: a caller's value stays. */
    mlc_comm_t *const untouched = (mlc_comm_t *)&id;
    c = untouched;
    CHECK_ERR(mlc_comm_init_rank(NULL, 2, 0, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_rank(&id, 2, 2, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_rank(&id, 2, -1, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_rank(&id, 0, 0, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_init_rank(&id, 1, 0, NULL, NULL), MLC_ERR_INVALID_ARG);
    mlc_unique_id_t damaged = id;
    memset(&damaged, 0x5a, sizeof damaged / 2);
    CHECK_ERR(mlc_comm_init_rank(&damaged, 2, 0, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK(c == untouched, "a failed init_rank wrote its output");
    mlc_store_t no_get = {.set = NULL, .get = NULL};
    CHECK_ERR(mlc_comm_init_store(&no_get, 2, 0, NULL, &c), MLC_ERR_INVALID_ARG);
    CHECK(c == untouched, "a failed init_store wrote its output");
    c = NULL;

    /* Requests. */
    int done = 0;
    mlc_request_t *none = NULL;
    CHECK_ERR(mlc_request_wait(NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_request_test(NULL, &done), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_request_test(&none, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_request_wait_all(3, NULL, NULL), MLC_ERR_INVALID_ARG);
    CHECK_OK(mlc_request_wait(&none));

    /* Algorithm overrides and queries. */
    const char *name = NULL;
    CHECK_ERR(mlc_comm_set_algo(comm, MLC_COLL_ALLREDUCE, "no-such-algorithm"), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_set_algo(comm, MLC_COLL_COUNT, "ring"), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_set_algo(comm, -1, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_set_algo(NULL, MLC_COLL_ALLREDUCE, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_get_algo(comm, MLC_COLL_ALLREDUCE, 64, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_comm_get_algo(comm, MLC_COLL_COUNT, 64, &name), MLC_ERR_INVALID_ARG);
    CHECK(name == NULL, "failed get_algo wrote its output");

    /* Names and parsing. */
    mlc_dtype_t dt = -1;
    mlc_op_t op = -1;
    CHECK_ERR(mlc_dtype_from_name("float128", &dt), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_dtype_from_name(NULL, &dt), MLC_ERR_INVALID_ARG);
    CHECK(dt == -1, "failed dtype_from_name wrote its output");
    CHECK_OK(mlc_dtype_from_name("bf16", &dt));
    CHECK(dt == MLC_BFLOAT16, "bf16 parsed as %d", (int)dt);
    CHECK_OK(mlc_dtype_from_name("fp16", &dt));
    CHECK(dt == MLC_FLOAT16, "fp16 parsed as %d", (int)dt);
    CHECK_ERR(mlc_op_from_name("median", &op), MLC_ERR_INVALID_ARG);
    CHECK(op == -1, "failed op_from_name wrote its output");
    CHECK_OK(mlc_op_from_name("avg", &op));
    CHECK(op == MLC_AVG, "avg parsed as %d", (int)op);
#define X(nm, val, text)                                                                  \
    CHECK(mlc_status_name(nm) && strcmp(mlc_status_name(nm), #nm) == 0, "status name of %d", val); \
    CHECK(mlc_status_string(nm) && strcmp(mlc_status_string(nm), text) == 0, "status text of %d", val);
    MLC_STATUS_LIST(X)
#undef X

    /* Ops: create without fn, free built-ins and unknown ops. */
    CHECK_ERR(mlc_op_create(NULL, 1, NULL, &op), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_op_create(noop_fn, 1, NULL, NULL), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_op_free(MLC_SUM), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_op_free(12345), MLC_ERR_INVALID_ARG);
    return 0;
}

/* An op used after mlc_op_free is unknown. Run by one rank at a time: ops
 * are process-wide, and with the threads backend another rank creating an
 * op could reuse the freed id. */
static int op_after_free(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    for (int turn = 0; turn < p; turn++) {
        if (turn == r) {
            mlc_op_t op;
            int32_t a[N] = {1, 2, 3, 4}, b[N];
            mlc_request_t *req;
            CHECK_OK(mlc_op_create(noop_fn, 0, NULL, &op));
            CHECK(mlc_op_name(op) && strcmp(mlc_op_name(op), "user") == 0, "user op name %s",
                  mlc_op_name(op) ? mlc_op_name(op) : "(null)");
            CHECK_OK(mlc_op_free(op));
            BAD(mlc_allreduce(a, b, N, MLC_INT32, op, comm, &req));
            CHECK_ERR(mlc_op_free(op), MLC_ERR_INVALID_ARG);
        }
        CHECK_OK(mlc_barrier(comm, NULL));
    }
    return 0;
}

/* Every call on a failed communicator returns its sticky error at once. */
static int all_calls_fail(mlc_comm_t *comm, mlc_comm_t *failed, mlc_status_t code)
{
    int32_t a[N] = {0}, b[64];
    size_t cnt[64], dsp[64];
    int flag;
    mlc_msg_status_t st;
    mlc_request_t *req = NULL;
    mlc_comm_t *child = NULL;
    for (int i = 0; i < 64; i++) cnt[i] = N, dsp[i] = (size_t)i * N;
    int me = mlc_comm_rank(failed);
    CHECK(mlc_comm_status(failed) == code, "mlc_comm_status is %s, expected %s",
          mlc_status_name(mlc_comm_status(failed)), mlc_status_name(code));
    CHECK_ERR(mlc_allreduce(a, b, N, MLC_INT32, MLC_SUM, failed, NULL), code);
    CHECK_ERR(mlc_allreduce(a, b, N, MLC_INT32, MLC_SUM, failed, &req), code);
    CHECK(req == NULL, "failed async call wrote its request");
    CHECK_ERR(mlc_reduce(a, b, N, MLC_INT32, MLC_SUM, 0, failed, NULL), code);
    CHECK_ERR(mlc_broadcast(a, b, N, MLC_INT32, 0, failed, NULL), code);
    CHECK_ERR(mlc_allgather(a, b, N, MLC_INT32, failed, NULL), code);
    CHECK_ERR(mlc_allgatherv(a, N, b, cnt, dsp, MLC_INT32, failed, NULL), code);
    CHECK_ERR(mlc_reduce_scatter(b, a, 1, MLC_INT32, MLC_SUM, failed, NULL), code);
    CHECK_ERR(mlc_alltoall(b, b + 32, 1, MLC_INT32, failed, NULL), code);
    CHECK_ERR(mlc_gather(a, b, N, MLC_INT32, 0, failed, NULL), code);
    CHECK_ERR(mlc_scatter(b, a, N, MLC_INT32, 0, failed, NULL), code);
    CHECK_ERR(mlc_barrier(failed, NULL), code);
    CHECK_ERR(mlc_send(a, N, MLC_INT32, me, 1, failed, NULL), code);
    CHECK_ERR(mlc_recv(b, N, MLC_INT32, MLC_ANY_SOURCE, 1, failed, NULL, NULL), code);
    CHECK_ERR(mlc_sendrecv(a, N, me, 1, b, N, me, 1, MLC_INT32, failed, NULL, NULL), code);
    CHECK_ERR(mlc_probe(MLC_ANY_SOURCE, MLC_ANY_TAG, failed, &st), code);
    CHECK_ERR(mlc_iprobe(MLC_ANY_SOURCE, MLC_ANY_TAG, failed, &flag, &st), code);
    CHECK_ERR(mlc_comm_split(failed, 0, 0, &child), code);
    CHECK(child == NULL, "split of a failed communicator wrote its output");
    /* Abort stays allowed (and harmless) on a failed communicator. */
    CHECK_OK(mlc_comm_abort(failed));
    /* The parent is unaffected. */
    int32_t one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == mlc_comm_size(comm), "parent allreduce gave %d", sum);
    return 0;
}

/* Rank 0 aborts; every other rank is blocked in a receive from rank 0 that
 * never comes, and is released with MLC_ERR_ABORTED. */
static int abort_seen_by_peers(mlc_comm_t *comm)
{
    mlc_comm_t *sub = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, 0, &sub));
    int32_t x;
    if (mlc_comm_rank(sub) == 0) {
        mlc_test_sleep_ms(100); /* let the peers block first */
        CHECK_OK(mlc_comm_abort(sub));
    } else {
        CHECK_ERR(mlc_recv(&x, 1, MLC_INT32, 0, 1, sub, NULL, NULL), MLC_ERR_ABORTED);
    }
    CHECK_RUN(all_calls_fail(comm, sub, MLC_ERR_ABORTED));
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

typedef struct abort_later {
    mlc_comm_t *comm;
    int delay_ms;
} abort_later_t;

static void *abort_thread(void *p)
{
    abort_later_t *a = p;
    mlc_test_sleep_ms(a->delay_ms);
    mlc_comm_abort(a->comm);
    return NULL;
}

/* Rank 0 stays out of an allreduce and aborts from a helper thread while
 * the others wait in it: they are released with MLC_ERR_ABORTED. */
static int abort_releases_collective(mlc_comm_t *comm)
{
    mlc_comm_t *sub = NULL;
    if (mlc_comm_size(comm) < 2) return 0;
    CHECK_OK(mlc_comm_split(comm, 0, 0, &sub));
    float x[1000] = {0}, y[1000];
    if (mlc_comm_rank(sub) == 0) {
        abort_later_t arg = {sub, 200};
        pthread_t tid;
        CHECK(pthread_create(&tid, NULL, abort_thread, &arg) == 0, "pthread_create");
        pthread_join(tid, NULL);
    } else {
        mlc_status_t st = mlc_allreduce(x, y, 1000, MLC_FLOAT32, MLC_SUM, sub, NULL);
        CHECK(st == MLC_ERR_ABORTED, "allreduce waiting for the aborting rank -> %s (%s)",
              mlc_status_name(st), mlc_last_error());
    }
    CHECK_RUN(all_calls_fail(comm, sub, MLC_ERR_ABORTED));
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

/* mlc_comm_abort from another thread releases a blocked receive and fails
 * a pending asynchronous one. Every rank does it to its own rank. */
static int abort_from_thread(mlc_comm_t *comm)
{
    mlc_comm_t *sub = NULL;
    CHECK_OK(mlc_comm_split(comm, 0, 0, &sub));
    int32_t x, y;
    mlc_request_t *pending = NULL;
    CHECK_OK(mlc_recv(&y, 1, MLC_INT32, MLC_ANY_SOURCE, 98, sub, NULL, &pending));
    abort_later_t arg = {sub, 200};
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, abort_thread, &arg) == 0, "pthread_create");
    mlc_status_t st = mlc_recv(&x, 1, MLC_INT32, MLC_ANY_SOURCE, 99, sub, NULL, NULL);
    pthread_join(tid, NULL);
    CHECK(st == MLC_ERR_ABORTED, "blocked recv released with %s (%s)", mlc_status_name(st),
          mlc_last_error());
    CHECK_ERR(mlc_request_wait(&pending), MLC_ERR_ABORTED);
    CHECK(pending == NULL, "failed wait did not release the request");
    CHECK_RUN(all_calls_fail(comm, sub, MLC_ERR_ABORTED));
    CHECK_OK(mlc_comm_free(sub));
    return 0;
}

/* Every rank aborts several communicators at the same moment: each abort
 * must stick to its own communicator (with the threads backend all of this
 * happens in one process, concurrently). */
static int many_aborts_at_once(mlc_comm_t *comm)
{
    enum { K = 8 };
    mlc_comm_t *subs[K];
    for (int k = 0; k < K; k++) CHECK_OK(mlc_comm_split(comm, 0, 0, &subs[k]));
    CHECK_OK(mlc_barrier(comm, NULL));
    for (int k = 0; k < K; k++) CHECK_OK(mlc_comm_abort(subs[k]));
    for (int k = 0; k < K; k++) {
        CHECK(mlc_comm_status(subs[k]) == MLC_ERR_ABORTED,
              "communicator %d: mlc_comm_status is %s right after mlc_comm_abort returned", k,
              mlc_status_name(mlc_comm_status(subs[k])));
        CHECK_ERR(mlc_barrier(subs[k], NULL), MLC_ERR_ABORTED);
    }
    for (int k = 0; k < K; k++) CHECK_OK(mlc_comm_free(subs[k]));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    if (p * N * 4 > 1024) return MLC_TEST_SKIP; /* the buffers below are 1 KiB */
    unsigned char *a = mlc_test_alloc(1024), *b = mlc_test_alloc(1024);
    size_t *cnt = calloc((size_t)p, sizeof *cnt), *dsp = calloc((size_t)p, sizeof *dsp);
    CHECK(cnt && dsp, "out of memory");
    for (int q = 0; q < p; q++) cnt[q] = N, dsp[q] = (size_t)q * N;
    memset(a, 0, 1024);

    CHECK_RUN(null_buffers(comm, a, b, cnt, dsp));
    CHECK_RUN(bad_vlayouts(comm, a, b, cnt, dsp));
    CHECK_RUN(bad_dtypes_and_ops(comm, a, b));
    CHECK_RUN(bad_roots_peers_tags(comm, a, b, cnt, dsp));
    CHECK_RUN(overlapping(comm, a));
    CHECK_RUN(overlapping_blocks(comm, a, b, cnt));
    CHECK_RUN(bad_config_requests_ops(comm));
    CHECK(mlc_comm_status(comm) == MLC_SUCCESS, "bad arguments made the communicator fail: %s",
          mlc_status_name(mlc_comm_status(comm)));
    CHECK_RUN(op_after_free(comm));
    /* Still fully usable after all that. */
    int32_t one = 1, sum = 0;
    CHECK_OK(mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p, "allreduce after the bad calls gave %d", sum);

    CHECK_RUN(abort_seen_by_peers(comm));
    CHECK_RUN(abort_from_thread(comm));
    CHECK_RUN(abort_releases_collective(comm));
    CHECK_RUN(many_aborts_at_once(comm));
    CHECK(mlc_comm_free(NULL) == MLC_SUCCESS, "mlc_comm_free(NULL)");
    mlc_test_free(a);
    mlc_test_free(b);
    free(cnt);
    free(dsp);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

MLC_TEST_MAIN(body)
