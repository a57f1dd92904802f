/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * User ops. Two non-commutative (but associative) ops, whose result spells
 * out the order they were applied in:
 *   concat (uint64): hex-digit concatenation, x op y = x * 16^digits(y) + y;
 *                    rank r contributes one non-zero digit, so the result
 *                    lists the ranks' digits in the order applied;
 *   affine (8-byte records {a, b}): composition of x -> a*x + b mod 2^32.
 * Both must be applied in rank order by reduce (every root), allreduce and
 * reduce_scatter, in-place and out-of-place, under the selector's choice and
 * every order-preserving algorithm, and allreduce above 16 MiB (staged
 * between processes). A commutative op checks that ctx and
 * dtype reach the function. Ops are process-wide, so main creates them once
 * before the ranks start (with the threads backend every rank shares them).
 */
#include <stdatomic.h>
#include "harness.h"

typedef struct affine {
    uint32_t a, b;
} affine_t;

static mlc_op_t op_concat, op_affine, op_summod;
static const int64_t summod_modulus = 1000003;
static atomic_int summod_bad_call;

static int hex_digits(uint64_t y)
{
    int n = 0;
    for (; y; y >>= 4) n++;
    return n;
}

static uint64_t concat(uint64_t x, uint64_t y) { return (x << (4 * hex_digits(y))) | y; }

static void concat_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    const uint64_t *a = in;
    uint64_t *b = inout;
    for (size_t i = 0; i < count; i++) b[i] = concat(a[i], b[i]);
}

/* Apply `lo` first, then `hi`: x -> hi.a*(lo.a*x + lo.b) + hi.b. */
static affine_t compose(affine_t lo, affine_t hi)
{
    return (affine_t){hi.a * lo.a, hi.a * lo.b + hi.b};
}

static void affine_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    const affine_t *a = in;
    affine_t *b = inout;
    for (size_t i = 0; i < count; i++) b[i] = compose(a[i], b[i]);
}

static void summod_fn(const void *in, void *inout, size_t count, mlc_dtype_t dt, void *ctx)
{
    if (ctx != &summod_modulus || dt != MLC_INT64) atomic_store(&summod_bad_call, 1);
    const int64_t *a = in;
    int64_t *b = inout;
    for (size_t i = 0; i < count; i++) b[i] = (a[i] + b[i]) % summod_modulus;
}

/* Rank r's element i for each op. */
static uint64_t concat_value(int r, size_t i) { return (uint64_t)((size_t)r * 5 + i) % 15 + 1; }
static affine_t affine_value(int r, size_t i)
{
    uint64_t h = mlc_test_mix(((uint64_t)r << 32) ^ i);
    return (affine_t){(uint32_t)h | 1u, (uint32_t)(h >> 32)};
}
static int64_t summod_value(int r, size_t i) { return (int64_t)(((size_t)r * 7919 + i * 104729) % 1000003); }

typedef enum { OP_CONCAT, OP_AFFINE, OP_SUMMOD, OP_KINDS } op_kind_t;

static mlc_op_t op_of(op_kind_t k) { return k == OP_CONCAT ? op_concat : k == OP_AFFINE ? op_affine : op_summod; }
static mlc_dtype_t dtype_of(op_kind_t k) { return k == OP_AFFINE ? MLC_RECORD(8) : k == OP_CONCAT ? MLC_UINT64 : MLC_INT64; }
static const char *name_of(op_kind_t k) { return k == OP_CONCAT ? "concat" : k == OP_AFFINE ? "affine" : "summod"; }

/* Fill count elements from global index first: rank r's data (r >= 0) or
 * the expected fold over ranks 0..p-1 in rank order (r < 0). */
static void fill(op_kind_t k, int p, int r, size_t first, size_t count, void *buf)
{
    for (size_t j = 0; j < count; j++) {
        size_t i = first + j;
        if (k == OP_CONCAT) {
            uint64_t v = r >= 0 ? concat_value(r, i) : concat_value(0, i);
            for (int q = 1; r < 0 && q < p; q++) v = concat(v, concat_value(q, i));
            ((uint64_t *)buf)[j] = v;
        } else if (k == OP_AFFINE) {
            affine_t v = r >= 0 ? affine_value(r, i) : affine_value(0, i);
            for (int q = 1; r < 0 && q < p; q++) v = compose(v, affine_value(q, i));
            ((affine_t *)buf)[j] = v;
        } else {
            int64_t v = r >= 0 ? summod_value(r, i) : summod_value(0, i);
            for (int q = 1; r < 0 && q < p; q++) v = (v + summod_value(q, i)) % summod_modulus;
            ((int64_t *)buf)[j] = v;
        }
    }
}

typedef enum { COLL_ALLREDUCE, COLL_REDUCE, COLL_REDUCE_SCATTER } coll_kind_t;
static const char *coll_names[] = {"allreduce", "reduce", "reduce_scatter"};

static int check_case(mlc_comm_t *comm, coll_kind_t coll, op_kind_t k, size_t count, int inplace,
                      int root, const char *algo)
{
    int p = mlc_comm_size(comm), r = mlc_comm_rank(comm);
    size_t sendcount = coll == COLL_REDUCE_SCATTER ? count * (size_t)p : count;
    size_t first = coll == COLL_REDUCE_SCATTER ? (size_t)r * count : 0;
    size_t es = 8, sbytes = sendcount * es, bytes = count * es;
    unsigned char *send = mlc_test_alloc(sbytes), *recv = mlc_test_alloc(bytes);
    unsigned char *want = mlc_test_alloc(bytes);
    fill(k, p, r, 0, sendcount, send);
    fill(k, p, -1, first, count, want);
    unsigned char *out = recv;
    if (inplace) out = coll == COLL_REDUCE_SCATTER ? send + first * es : send;
    mlc_status_t st;
    if (coll == COLL_ALLREDUCE)
        st = mlc_allreduce(send, out, count, dtype_of(k), op_of(k), comm, NULL);
    else if (coll == COLL_REDUCE)
        st = mlc_reduce(send, r == root ? out : NULL, count, dtype_of(k), op_of(k), root, comm, NULL);
    else
        st = mlc_reduce_scatter(send, out, count, dtype_of(k), op_of(k), comm, NULL);
    CHECK(st == MLC_SUCCESS, "%s %s count=%zu: %s: %s", coll_names[coll], name_of(k), count,
          mlc_status_name(st), mlc_last_error());
    if (coll != COLL_REDUCE || r == root)
        CHECK_MEM(out, want, bytes, es, "%s with %s count=%zu %s root=%d algo=%s (applied out of rank order?)",
                  coll_names[coll], name_of(k), count, inplace ? "in-place" : "out-of-place", root,
                  algo);
    if (coll == COLL_ALLREDUCE)
        CHECK(mlc_test_same_on_all_ranks(comm, out, bytes, "allreduce user op") == 0,
              "ranks disagree on %s count=%zu", name_of(k), count);
    mlc_test_free(send);
    mlc_test_free(recv);
    mlc_test_free(want);
    return 0;
}

static int every_case(mlc_comm_t *comm, coll_kind_t coll, const char *algo)
{
    static const size_t counts[] = {1, 7, 1001, 65537};
    int p = mlc_comm_size(comm);
    int n = 0;
    for (op_kind_t k = 0; k < OP_KINDS; k++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                size_t count = coll == COLL_REDUCE_SCATTER ? counts[c] / 4 + 1 : counts[c];
                int root = (n++ + p - 1) % p;
                CHECK_RUN(check_case(comm, coll, k, count, inplace, root, algo));
            }
    return 0;
}

static const mlc_coll_t coll_ids[] = {MLC_COLL_ALLREDUCE, MLC_COLL_REDUCE, MLC_COLL_REDUCE_SCATTER};

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    for (coll_kind_t coll = 0; coll < 3; coll++) {
        CHECK_RUN(every_case(comm, coll, "auto"));
        const char *algos[32];
        size_t nalgo = mlc_test_algos(comm, coll_ids[coll], algos, 32);
        for (size_t a = 0; a < nalgo; a++) {
            if (!mlc_test_algo_order_preserving(coll_ids[coll], algos[a])) continue;
            CHECK_OK(mlc_comm_set_algo(comm, coll_ids[coll], algos[a]));
            CHECK_RUN(every_case(comm, coll, algos[a]));
        }
        CHECK_OK(mlc_comm_set_algo(comm, coll_ids[coll], NULL));
    }
    for (int root = 0; root < p; root++)
        CHECK_RUN(check_case(comm, COLL_REDUCE, OP_CONCAT, 3, root % 2, root, "auto"));
    /* Allreduces of 16 MiB and more (through the stages between processes on shm). */
    for (op_kind_t k = OP_CONCAT; k <= OP_AFFINE; k++)
        for (int inplace = 0; inplace < 2; inplace++)
            CHECK_RUN(check_case(comm, COLL_ALLREDUCE, k, 2 * 1024 * 1024 + 4099, inplace, 0, "auto"));
    CHECK(atomic_load(&summod_bad_call) == 0, "the user fn got the wrong ctx or dtype");

    /* mlc_reduce_local with a user op: inout = in (op) inout. */
    uint64_t in[3] = {1, 2, 3}, inout[3] = {4, 5, 6};
    CHECK_OK(mlc_reduce_local(in, inout, 3, MLC_UINT64, op_concat));
    CHECK(inout[0] == 0x14 && inout[1] == 0x25 && inout[2] == 0x36,
          "reduce_local with concat gave %llx %llx %llx", (unsigned long long)inout[0],
          (unsigned long long)inout[1], (unsigned long long)inout[2]);
    CHECK(!mlc_test_any_failed(comm, 0), "another rank failed");
    return 0;
}

int main(int argc, char **argv)
{
    if (mlc_op_create(concat_fn, 0, NULL, &op_concat) != MLC_SUCCESS ||
        mlc_op_create(affine_fn, 0, NULL, &op_affine) != MLC_SUCCESS ||
        mlc_op_create(summod_fn, 1, (void *)&summod_modulus, &op_summod) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_op_create: %s\n", mlc_last_error());
        return 1;
    }
    int rc = mlc_test_main(argc, argv, body);
    if (mlc_op_free(op_concat) != MLC_SUCCESS || mlc_op_free(op_affine) != MLC_SUCCESS ||
        mlc_op_free(op_summod) != MLC_SUCCESS) {
        fprintf(stderr, "mlc_op_free: %s\n", mlc_last_error());
        return 1;
    }
    return rc;
}
