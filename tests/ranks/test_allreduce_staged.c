/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allreduces of 16 MiB and more, and (with MLC_STAGES=on, or where single
 * copy is missing or slow) every allreduce too large for the slots: between
 * processes on shm they run through the ranks' stages, chunk by chunk
 * (docs/ENGINE.md). Sizes whose slices end
 * mid-chunk, element sizes of 1, 2, 4 and 8 bytes, AVG, in place and out of
 * place, and calls in a row with a small allreduce and a staged broadcast
 * between them (they share the stages); every result checked against a
 * local reference, bitwise identical on every rank, no byte written past a
 * buffer and no send buffer changed. Non-commutative user ops at these
 * sizes are in test_userop; here one more, on records of 12 bytes (which
 * a chunk of a power of two would split) and of 40008 (a few to a chunk
 * at 2-4 ranks, where a chunk is 512, 170 and 128 KiB; from 8 ranks no
 * chunk holds one, and they take single copy). Last, one whose request is
 * still pending while its communicator is split.
 */
#include <stdbool.h>
#include <string.h>
#include "harness.h"
#include "testdata.h"

#define MIB (1024u * 1024u)

typedef struct staged_case {
    mlc_dtype_t dt;
    mlc_op_t op;
    size_t count;
    int inplace;
} staged_case_t;

#define CASE_FMT "allreduce %s %s count=%zu %s"
#define CASE_ARGS(c) mlc_dtype_name((c)->dt), mlc_op_name((c)->op), (c)->count, (c)->inplace ? "in place" : "out of place"

static int check_case(mlc_comm_t *comm, const staged_case_t *c, uint32_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t es = mlc_dtype_size(c->dt), bytes = c->count * es;
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes), *want = mlc_test_alloc(bytes);
    mlc_tv_fill(c->dt, c->op, p, r, seed, send, 0, c->count);
    mlc_tv_fill_expected(c->dt, c->op, p, seed, want, 0, c->count);
    unsigned char *out = c->inplace ? send : recv;
    CHECK_OK(mlc_allreduce(send, out, c->count, c->dt, c->op, comm, NULL));
    CHECK_MEM(out, want, bytes, es, CASE_FMT, CASE_ARGS(c));
    if (!c->inplace) {
        mlc_tv_fill(c->dt, c->op, p, r, seed, want, 0, c->count);
        CHECK_MEM(send, want, bytes, es, "sendbuf changed by " CASE_FMT, CASE_ARGS(c));
    }
    CHECK(mlc_test_guard_ok(send, bytes) && mlc_test_guard_ok(recv, bytes), "write past a buffer in " CASE_FMT,
          CASE_ARGS(c));
    CHECK(mlc_test_same_on_all_ranks(comm, out, bytes, "staged allreduce") == 0, "ranks disagree in " CASE_FMT,
          CASE_ARGS(c));
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

/* A 12-byte lane {a, b, n}: (a, b) composes x -> a*x + b mod 2^32 in the
 * order applied (not commutative), n sums. A record is one or more lanes. */
typedef struct rec12 {
    uint32_t a, b, n;
} rec12_t;

static mlc_op_t op_rec12;

/* inout = in (op) inout: first in's map, then inout's. */
static void rec12_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    (void)ctx;
    const rec12_t *x = in;
    rec12_t *y = inout;
    size_t lanes = count * (mlc_dtype_size(dt) / sizeof(rec12_t));
    for (size_t i = 0; i < lanes; i++)
        y[i] = (rec12_t){x[i].a * y[i].a, x[i].b * y[i].a + y[i].b, x[i].n + y[i].n};
}

static rec12_t rec12_of(int r, size_t i)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r + 1) * 40503u;
    return (rec12_t){h | 1u, h >> 7, (uint32_t)r * 1000u + (uint32_t)(i % 997)};
}

/* count records of rec_bytes (a multiple of 12). */
static int check_records(mlc_comm_t *comm, size_t rec_bytes, size_t count, int inplace)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t bytes = count * rec_bytes, lanes = bytes / sizeof(rec12_t);
    rec12_t *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes), *want = mlc_test_alloc(bytes);
    for (size_t i = 0; i < lanes; i++) {
        send[i] = rec12_of(r, i);
        want[i] = rec12_of(0, i);
        for (int q = 1; q < p; q++) { /* want = want (op) rank q's, in rank order */
            rec12_t next = rec12_of(q, i);
            rec12_fn(&want[i], &next, 1, MLC_RECORD(12), NULL);
            want[i] = next;
        }
    }
    mlc_dtype_t dt = MLC_RECORD((int32_t)rec_bytes);
    rec12_t *out = inplace ? send : recv;
    CHECK_OK(mlc_allreduce(send, out, count, dt, op_rec12, comm, NULL));
    CHECK_MEM(out, want, bytes, rec_bytes, "allreduce of %zu %zu-byte records %s", count, rec_bytes,
              inplace ? "in place" : "out of place");
    if (!inplace) {
        bool same = true;
        for (size_t i = 0; i < lanes && same; i++) {
            rec12_t x = rec12_of(r, i);
            same = memcmp(&send[i], &x, sizeof x) == 0;
        }
        CHECK(same, "sendbuf changed by an allreduce of %zu %zu-byte records", count, rec_bytes);
    }
    CHECK(mlc_test_guard_ok(send, bytes) && mlc_test_guard_ok(recv, bytes), "write past a buffer");
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

/* A small allreduce and a large in-place broadcast between staged calls. */
static int interleave(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm);
    double x = r + 1, sum = 0;
    CHECK_OK(mlc_allreduce(&x, &sum, 1, MLC_FLOAT64, MLC_SUM, comm, NULL));
    int p = mlc_comm_size(comm);
    CHECK(sum == p * (p + 1) / 2.0, "small allreduce between staged ones: %g", sum);
    size_t n = 3 * MIB + 17;
    unsigned char *buf = mlc_test_alloc(n);
    if (r == 0) mlc_test_pattern_fill(buf, n, 99);
    CHECK_OK(mlc_broadcast(buf, buf, n, MLC_UINT8, 0, comm, NULL));
    size_t bad = mlc_test_pattern_check(buf, n, 99);
    CHECK(bad == SIZE_MAX, "broadcast between staged allreduces differs at byte %zu", bad);
    mlc_test_free(buf);
    return 0;
}

/* A staged allreduce whose request is still pending while its
 * communicator is split, and one on the new communicator (stages of its
 * own) before the first is waited for: the split's own collectives queue
 * behind the staged call (on shm they complete only after it has), and
 * both results are right. */
static int split_while_staged(mlc_comm_t *comm, uint32_t seed)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t count = MIB + 4099, bytes = count * 4; /* about 4 MiB of float32 */
    unsigned char *send = mlc_test_alloc(bytes), *recv = mlc_test_alloc(bytes), *want = mlc_test_alloc(bytes);
    unsigned char *sub_buf = mlc_test_alloc(bytes), *sub_want = mlc_test_alloc(bytes);
    mlc_tv_fill(MLC_FLOAT32, MLC_SUM, p, r, seed, send, 0, count);
    mlc_tv_fill_expected(MLC_FLOAT32, MLC_SUM, p, seed, want, 0, count);
    mlc_request_t *req = NULL;
    CHECK_OK(mlc_allreduce(send, recv, count, MLC_FLOAT32, MLC_SUM, comm, &req));
    mlc_comm_t *sub = NULL; /* the ranks in reverse order: each new rank differs from its old one */
    CHECK_OK(mlc_comm_split(comm, 0, p - 1 - r, &sub));
    CHECK(mlc_comm_size(sub) == p && mlc_comm_rank(sub) == p - 1 - r, "split: rank %d of %d",
          mlc_comm_rank(sub), mlc_comm_size(sub));
    int sr = mlc_comm_rank(sub);
    mlc_tv_fill(MLC_FLOAT32, MLC_MAX, p, sr, seed + 1, sub_buf, 0, count);
    mlc_tv_fill_expected(MLC_FLOAT32, MLC_MAX, p, seed + 1, sub_want, 0, count);
    CHECK_OK(mlc_allreduce(sub_buf, sub_buf, count, MLC_FLOAT32, MLC_MAX, sub, NULL));
    CHECK_OK(mlc_request_wait(&req));
    CHECK_MEM(recv, want, bytes, 4, "allreduce in flight across a split");
    CHECK_MEM(sub_buf, sub_want, bytes, 4, "allreduce on the communicator split off beside a staged one");
    CHECK_OK(mlc_comm_free(sub));
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    mlc_test_free(sub_buf);
    mlc_test_free(sub_want);
    return 0;
}

static int body(mlc_comm_t *comm)
{
    static const staged_case_t cases[] = {
        {MLC_FLOAT32, MLC_SUM, 4 * MIB + 333, 0},    /* just above 16 MiB; slices end mid-chunk */
        {MLC_FLOAT32, MLC_SUM, 4 * MIB + 333, 1},
        /* Below 16 MiB from here: every shm variant of this test forces the
         * path (MLC_STAGES=on or off, or MLC_CMA=0, where auto stages every
         * allreduce past the slots), and 4-6 MiB take 4 to 12 steps, so
         * each of the two places of a stage is reused. */
        {MLC_FLOAT64, MLC_AVG, MIB / 2 + 77, 0},     /* 4 MiB */
        {MLC_INT8, MLC_MAX, 4 * MIB + 5, 1},
        {MLC_FLOAT16, MLC_MIN, 2 * MIB + 1, 0},
        {MLC_BFLOAT16, MLC_SUM, 3 * MIB + 4097, 1}, /* 6 MiB */
        {MLC_FLOAT32, MLC_SUM, 2049, 0},             /* just past the slots: one short step */
        {MLC_INT32, MLC_MAX, 300001, 1},
        {MLC_FLOAT64, MLC_AVG, MIB / 8 + 3, 0},      /* 1 MiB */
        {MLC_FLOAT16, MLC_SUM, 3 * MIB / 2 + 1, 1},
    };
    uint32_t seed = 41;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK_RUN(check_case(comm, &cases[i], seed++));
        CHECK_RUN(interleave(comm));
    }
    CHECK_RUN(check_records(comm, 12, 100003, 0)); /* 1.2 MB */
    CHECK_RUN(check_records(comm, 12, 100003, 1));
    CHECK_RUN(check_records(comm, 40008, 5, 0)); /* past the slots, one record to a chunk */
    CHECK_RUN(check_records(comm, 40008, 5, 1));
    CHECK_RUN(split_while_staged(comm, seed));
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

int main(int argc, char **argv)
{
    /* Ops are process-wide: created once, before the ranks start. */
    if (mlc_op_create(rec12_fn, 0, NULL, &op_rec12) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_op_create: %s\n", mlc_last_error());
        return 1;
    }
    int rc = mlc_test_main(argc, argv, body);
    if (mlc_op_free(op_rec12) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_op_free: %s\n", mlc_last_error());
        return 1;
    }
    return rc;
}
