/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What MPI lacks, through the MPI backend: float16 and bfloat16 (every
 * built-in op), avg (integers truncate toward zero), user ops (commutative
 * and not: applied in rank order), records. Integer sum and prod wrap around
 * on every length (an MPI's vector kernels may saturate instead). Run on
 * every backend.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "base/dtype.h"
#include "harness.h"

enum { N = 19 };

/* 2x2 integer matrices as a 16-byte record: inout = in x inout (in = lower ranks). */
static void matmul(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    (void)dtype;
    int *calls = ctx;
    const int32_t *a = in;
    int32_t *b = inout;
    for (size_t k = 0; k < count; k++, a += 4, b += 4) {
        int32_t c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                        a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
    __atomic_add_fetch(calls, 1, __ATOMIC_RELAXED);
}

/* Commutative: element-wise max on int64, by hand. */
static void max64(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    (void)dtype;
    (void)ctx;
    const int64_t *a = in;
    int64_t *b = inout;
    for (size_t i = 0; i < count; i++)
        if (a[i] > b[i]) b[i] = a[i];
}

static void rank_matrix(int r, size_t k, int32_t m[4])
{
    m[0] = 1;
    m[1] = r + 1 + (int32_t)k % 3;
    m[2] = r % 2 ? -1 : 2;
    m[3] = 1;
}

static void ordered_product(int p, size_t k, int32_t out[4])
{
    int32_t acc[4], m[4];
    rank_matrix(0, k, acc);
    for (int r = 1; r < p; r++) {
        rank_matrix(r, k, m);
        int32_t c[4] = {acc[0] * m[0] + acc[1] * m[2], acc[0] * m[1] + acc[1] * m[3],
                        acc[2] * m[0] + acc[3] * m[2], acc[2] * m[1] + acc[3] * m[3]};
        memcpy(acc, c, sizeof c);
    }
    memcpy(out, acc, sizeof acc);
}

static int halves(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    const mlc_dtype_t types[] = {MLC_FLOAT16, MLC_BFLOAT16};
    const mlc_op_t ops[] = {MLC_SUM, MLC_PROD, MLC_MAX, MLC_MIN, MLC_AVG};
    for (size_t t = 0; t < 2; t++) {
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            uint16_t x[N], y[N];
            for (size_t i = 0; i < N; i++) {
                float v = (float)((r + 1) * (int)(i % 4 + 1)) * (i % 2 ? -1.0f : 1.0f);
                x[i] = types[t] == MLC_FLOAT16 ? mlc_float_to_half(v) : mlc_float_to_bf16(v);
            }
            mlc_request_t *q = NULL;
            CHECK_OK(mlc_allreduce(x, y, N, types[t], ops[o], comm, o % 2 ? &q : NULL));
            CHECK_OK(mlc_request_wait(&q));
            for (size_t i = 0; i < N; i++) {
                float want = ops[o] == MLC_PROD ? 1.0f : 0.0f;
                for (int k = 0; k < p; k++) {
                    float v = (float)((k + 1) * (int)(i % 4 + 1)) * (i % 2 ? -1.0f : 1.0f);
                    if (ops[o] == MLC_PROD) want *= v;
                    else if (ops[o] == MLC_MAX) want = k == 0 || v > want ? v : want;
                    else if (ops[o] == MLC_MIN) want = k == 0 || v < want ? v : want;
                    else want += v;
                }
                if (ops[o] == MLC_AVG) want /= (float)p;
                float got = types[t] == MLC_FLOAT16 ? mlc_half_to_float(y[i]) : mlc_bf16_to_float(y[i]);
                CHECK(got == want, "%s %s [%zu] = %g, want %g", mlc_dtype_name(types[t]), mlc_op_name(ops[o]), i,
                      (double)got, (double)want);
            }
        }
        /* reduce to the last rank, in place there */
        uint16_t z[N];
        for (size_t i = 0; i < N; i++) z[i] = types[t] == MLC_FLOAT16 ? mlc_float_to_half(0.5f) : mlc_float_to_bf16(0.5f);
        CHECK_OK(mlc_reduce(z, r == p - 1 ? z : NULL, N, types[t], MLC_SUM, p - 1, comm, NULL));
        if (r == p - 1)
            for (size_t i = 0; i < N; i++) {
                float got = types[t] == MLC_FLOAT16 ? mlc_half_to_float(z[i]) : mlc_bf16_to_float(z[i]);
                CHECK(got == 0.5f * (float)p, "%s reduce [%zu] = %g", mlc_dtype_name(types[t]), i, (double)got);
            }
    }
    return 0;
}

static int averages(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int32_t x[N * 4], y[N * 4];
    for (size_t i = 0; i < N * (size_t)p; i++) x[i] = -(r + 1) * 3 - (int32_t)i;
    CHECK_OK(mlc_allreduce(x, y, N, MLC_INT32, MLC_AVG, comm, NULL));
    for (size_t i = 0; i < N; i++) {
        int32_t sum = 0;
        for (int k = 0; k < p; k++) sum += -(k + 1) * 3 - (int32_t)i;
        CHECK(y[i] == sum / p, "int32 avg [%zu] = %d, want %d", i, y[i], sum / p);
    }
    /* reduce_scatter avg, in place */
    CHECK_OK(mlc_reduce_scatter(x, x + (size_t)r * N, N, MLC_INT32, MLC_AVG, comm, NULL));
    for (size_t i = 0; i < N; i++) {
        int32_t sum = 0;
        size_t j = (size_t)r * N + i;
        for (int k = 0; k < p; k++) sum += -(k + 1) * 3 - (int32_t)j;
        CHECK(x[j] == sum / p, "reduce_scatter avg [%zu] = %d, want %d", i, x[j], sum / p);
    }
    /* reduce avg on uint64 to rank 0 */
    uint64_t u = (uint64_t)r * 7 + 1, v = 0;
    CHECK_OK(mlc_reduce(&u, r == 0 ? &v : NULL, 1, MLC_UINT64, MLC_AVG, 0, comm, NULL));
    uint64_t usum = 0;
    for (int k = 0; k < p; k++) usum += (uint64_t)k * 7 + 1;
    if (r == 0) CHECK(v == usum / (uint64_t)p, "uint64 avg = %llu", (unsigned long long)v);
    return 0;
}

static int user_ops(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    int calls = 0;
    mlc_op_t mm, mx;
    CHECK_OK(mlc_op_create(matmul, 0, &calls, &mm));
    CHECK_OK(mlc_op_create(max64, 1, NULL, &mx));
    const mlc_dtype_t rec = MLC_RECORD(16);
    int32_t m[N][4], out[N][4], want[4];
    for (size_t k = 0; k < N; k++) rank_matrix(r, k, m[k]);
    for (int mode = 0; mode < 2; mode++) {
        mlc_request_t *q = NULL;
        CHECK_OK(mlc_allreduce(m, out, N, rec, mm, comm, mode ? &q : NULL));
        CHECK_OK(mlc_request_wait(&q));
        for (size_t k = 0; k < N; k++) {
            ordered_product(p, k, want);
            CHECK(memcmp(out[k], want, sizeof want) == 0, "non-commutative allreduce [%zu]: %d %d %d %d", k,
                  out[k][0], out[k][1], out[k][2], out[k][3]);
        }
    }
    memset(out, 0, sizeof out);
    CHECK_OK(mlc_reduce(m, r == 0 ? out : NULL, N, rec, mm, 0, comm, NULL));
    if (r == 0)
        for (size_t k = 0; k < N; k++) {
            ordered_product(p, k, want);
            CHECK(memcmp(out[k], want, sizeof want) == 0, "non-commutative reduce [%zu]", k);
        }
    /* reduce_scatter: one record per rank */
    int32_t blocks[4][4], mine[4];
    for (int k = 0; k < p; k++) rank_matrix(r, (size_t)k, blocks[k]);
    CHECK_OK(mlc_reduce_scatter(blocks, mine, 1, rec, mm, comm, NULL));
    ordered_product(p, (size_t)r, want);
    CHECK(memcmp(mine, want, sizeof want) == 0, "non-commutative reduce_scatter");
    /* Some rank ran the user's function (MPI may reduce on one rank only:
     * Open MPI's nonblocking collectives do on 2 ranks). */
    int32_t mine_calls = __atomic_load_n(&calls, __ATOMIC_RELAXED), all_calls = 0;
    CHECK_OK(mlc_allreduce(&mine_calls, &all_calls, 1, MLC_INT32, MLC_SUM, comm, NULL));
    if (p > 1) CHECK(all_calls > 0, "the user function was never called");

    int64_t a[N], b[N];
    for (size_t i = 0; i < N; i++) a[i] = (int64_t)((r * 7 + (int)i) % 5) - 2;
    CHECK_OK(mlc_allreduce(a, b, N, MLC_INT64, mx, comm, NULL));
    for (size_t i = 0; i < N; i++) {
        int64_t w = INT64_MIN;
        for (int k = 0; k < p; k++) {
            int64_t v = (int64_t)((k * 7 + (int)i) % 5) - 2;
            if (v > w) w = v;
        }
        CHECK(b[i] == w, "user max [%zu] = %lld", i, (long long)b[i]);
    }
    CHECK_OK(mlc_op_free(mm));
    CHECK_OK(mlc_op_free(mx));
    return 0;
}

/* Element i of rank r's input for an integer dtype of e bytes: values near
 * the top of the range (and negative ones), so sums and products overflow. */
static uint64_t int_input(int r, size_t i, size_t e)
{
    static const uint64_t pattern[] = {0xf0f1f2f3f4f5f6f7u, 0x7f7e7d7c7b7a7978u, 0x8081828384858687u,
                                       0xfffffffffffffffeu, 0x0102030405060708u, 0xc3c2c1c0bfbebdbcu};
    uint64_t v = pattern[(i + (size_t)r) % 6] - (uint64_t)r * 3 - i % 5;
    return e == 8 ? v : v & ((UINT64_C(1) << (8 * e)) - 1);
}

/* Sign-extended from e bytes when `is_signed`. */
static int64_t as_signed(uint64_t v, size_t e)
{
    unsigned shift = (unsigned)(64 - 8 * e);
    return (int64_t)(v << shift) >> shift;
}

static uint64_t int_expected(int p, size_t i, size_t e, bool is_signed, mlc_op_t op)
{
    uint64_t acc = int_input(0, i, e);
    for (int k = 1; k < p; k++) {
        uint64_t v = int_input(k, i, e);
        bool greater = is_signed ? as_signed(v, e) > as_signed(acc, e) : v > acc;
        if (op == MLC_SUM) acc += v;
        else if (op == MLC_PROD) acc *= v;
        else if (op == MLC_MAX) acc = greater ? v : acc;
        else acc = greater || v == acc ? acc : v;
    }
    return e == 8 ? acc : acc & ((UINT64_C(1) << (8 * e)) - 1);
}

/* Integer sum/prod wrap, max/min compare as the type's sign says, on lengths
 * around every vector width (allreduce, reduce, reduce_scatter). */
static int integer_wraps(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    const mlc_dtype_t types[] = {MLC_INT8, MLC_UINT8, MLC_INT32, MLC_UINT32, MLC_INT64, MLC_UINT64};
    const bool is_signed[] = {true, false, true, false, true, false};
    const mlc_op_t ops[] = {MLC_SUM, MLC_PROD, MLC_MAX, MLC_MIN};
    const size_t lengths[] = {1, 7, 16, 31, 32, 33, 64, 65, 255, 1000};
    enum { MAXLEN = 1000 };
    static _Thread_local unsigned char x[MAXLEN * 8 * 4], y[MAXLEN * 8 * 4], want[MAXLEN * 8];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t e = mlc_dtype_size(types[t]);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
                size_t n = lengths[l];
                for (size_t i = 0; i < n * (size_t)p; i++) {
                    uint64_t v = int_input(r, i, e);
                    memcpy(x + i * e, &v, e); /* little-endian */
                }
                for (size_t i = 0; i < n * (size_t)p; i++) {
                    uint64_t w = int_expected(p, i, e, is_signed[t], ops[o]);
                    if (i < n) memcpy(want + i * e, &w, e);
                }
                const char *what = mlc_dtype_name(types[t]), *how = mlc_op_name(ops[o]);
                memset(y, 0, n * e);
                CHECK_OK(mlc_allreduce(x, y, n, types[t], ops[o], comm, NULL));
                CHECK_MEM(y, want, n * e, e, "allreduce %s %s of %zu", what, how, n);
                memset(y, 0, n * e);
                CHECK_OK(mlc_reduce(x, r == 0 ? y : NULL, n, types[t], ops[o], 0, comm, NULL));
                if (r == 0) CHECK_MEM(y, want, n * e, e, "reduce %s %s of %zu", what, how, n);
                /* reduce_scatter: rank r gets block r of n elements */
                for (size_t i = 0; i < n; i++) {
                    uint64_t w = int_expected(p, (size_t)r * n + i, e, is_signed[t], ops[o]);
                    memcpy(want + i * e, &w, e);
                }
                CHECK_OK(mlc_reduce_scatter(x, y, n, types[t], ops[o], comm, NULL));
                CHECK_MEM(y, want, n * e, e, "reduce_scatter %s %s of %zu", what, how, n);
            }
        }
    }
    return 0;
}

/* Float max/min as on every backend: -0 < +0, a NaN loses to a number.
 * Element i < 16: rank r holds -0 if bit r of i is set, else +0; element
 * 16 + j: rank r holds NaN if bit r of j is set, else r + 1. */
static int float_extremes(mlc_comm_t *comm)
{
    int r = mlc_comm_rank(comm), p = mlc_comm_size(comm);
    enum { M = 32 };
    for (int wide = 0; wide < 2; wide++) {
        for (int o = 0; o < 2; o++) {
            mlc_op_t op = o ? MLC_MIN : MLC_MAX;
            double x[M], y[M];
            for (int i = 0; i < M; i++) {
                bool bit = ((i % 16) >> r) & 1;
                x[i] = i < 16 ? (bit ? -0.0 : 0.0) : (bit ? __builtin_nan("") : (double)(r + 1));
            }
            if (wide) {
                CHECK_OK(mlc_allreduce(x, y, M, MLC_FLOAT64, op, comm, NULL));
            } else {
                float xf[M], yf[M];
                for (int i = 0; i < M; i++) xf[i] = (float)x[i];
                CHECK_OK(mlc_allreduce(xf, yf, M, MLC_FLOAT32, op, comm, NULL));
                for (int i = 0; i < M; i++) y[i] = yf[i];
            }
            for (int i = 0; i < M; i++) {
                int all = (1 << p) - 1, set = (i % 16) & all;
                double want;
                if (i < 16) want = op == MLC_MAX ? (set == all ? -0.0 : 0.0) : (set == 0 ? 0.0 : -0.0);
                else if (set == all) want = __builtin_nan("");
                else {
                    want = op == MLC_MAX ? 0 : 1e9;
                    for (int k = 0; k < p; k++)
                        if (!((set >> k) & 1)) want = op == MLC_MAX ? (k + 1 > want ? k + 1 : want) : (k + 1 < want ? k + 1 : want);
                }
                bool same = want != want ? y[i] != y[i] : (y[i] == want && __builtin_signbit(y[i]) == __builtin_signbit(want));
                CHECK(same, "%s %s [%d] = %g, want %g", wide ? "float64" : "float32", mlc_op_name(op), i, y[i], want);
            }
        }
    }
    return 0;
}

static int body(mlc_comm_t *comm)
{
    if (mlc_comm_size(comm) > 4) return MLC_TEST_SKIP;
    if (halves(comm) || averages(comm) || user_ops(comm) || integer_wraps(comm) || float_extremes(comm)) return 1;
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
