/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The local reduction kernels: every dtype x built-in op in every call shape
 * (apply, apply3 with each aliasing) against a scalar reference, with values
 * that are exactly representable in every dtype, so results compare exactly.
 * Also float max/min special cases, integer wrap-around, avg division and
 * user ops.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/dtype.h"
#include "base/reduce_impl.h"
#include "unit.h"

static const size_t counts[] = {0, 1, 7, 33, 1000, 1025};
#define GUARD 16 /* canary bytes after each buffer */

static bool is_unsigned(mlc_dtype_t d) { return d == MLC_UINT8 || d == MLC_UINT32 || d == MLC_UINT64; }

static double get(const void *buf, size_t i, mlc_dtype_t d)
{
    switch (d) {
    case MLC_INT8: return ((const int8_t *)buf)[i];
    case MLC_UINT8: return ((const uint8_t *)buf)[i];
    case MLC_INT32: return ((const int32_t *)buf)[i];
    case MLC_UINT32: return ((const uint32_t *)buf)[i];
    case MLC_INT64: return (double)((const int64_t *)buf)[i];
    case MLC_UINT64: return (double)((const uint64_t *)buf)[i];
    case MLC_FLOAT16: return mlc_half_to_float(((const uint16_t *)buf)[i]);
    case MLC_BFLOAT16: return mlc_bf16_to_float(((const uint16_t *)buf)[i]);
    case MLC_FLOAT32: return ((const float *)buf)[i];
    case MLC_FLOAT64: return ((const double *)buf)[i];
    }
    abort();
}

/* v must be exactly representable in d. */
static void put(void *buf, size_t i, mlc_dtype_t d, double v)
{
    switch (d) {
    case MLC_INT8: ((int8_t *)buf)[i] = (int8_t)v; return;
    case MLC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; return;
    case MLC_INT32: ((int32_t *)buf)[i] = (int32_t)v; return;
    case MLC_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; return;
    case MLC_INT64: ((int64_t *)buf)[i] = (int64_t)v; return;
    case MLC_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; return;
    case MLC_FLOAT16: ((uint16_t *)buf)[i] = mlc_float_to_half((float)v); return;
    case MLC_BFLOAT16: ((uint16_t *)buf)[i] = mlc_float_to_bf16((float)v); return;
    case MLC_FLOAT32: ((float *)buf)[i] = (float)v; return;
    case MLC_FLOAT64: ((double *)buf)[i] = v; return;
    }
    abort();
}

/* Small integers: sums and products stay exact in every dtype (bf16: <= 256). */
static double value(size_t i, int seed, mlc_dtype_t d)
{
    int v = (int)((i * (size_t)(5 + 2 * seed) + (size_t)seed * 3) % 16);
    return is_unsigned(d) ? v : v - 8;
}

static double ref(mlc_op_t op, double a, double b)
{
    switch (op) {
    case MLC_SUM:
    case MLC_AVG: return a + b;
    case MLC_PROD: return a * b;
    case MLC_MAX: return a > b ? a : b;
    case MLC_MIN: return a < b ? a : b;
    }
    abort();
}

typedef struct buf {
    unsigned char *p;
    size_t bytes;
} buf_t;

static buf_t buf_new(size_t count, mlc_dtype_t d)
{
    buf_t b = {malloc(count * mlc_dtype_size(d) + GUARD), count * mlc_dtype_size(d)};
    memset(b.p, 0xA5, b.bytes + GUARD);
    return b;
}

static bool guard_ok(buf_t b)
{
    for (size_t i = 0; i < GUARD; i++)
        if (b.p[b.bytes + i] != 0xA5) return false;
    return true;
}

static void fill(buf_t b, size_t count, mlc_dtype_t d, int seed)
{
    for (size_t i = 0; i < count; i++) put(b.p, i, d, value(i, seed, d));
}

/* Compare buf with op(x, y) element by element (x/y: seeds; -1 = same as x). */
static void expect(const char *shape, buf_t b, size_t count, mlc_dtype_t d, mlc_op_t op, int sx,
                   int sy)
{
    int bad = 0;
    for (size_t i = 0; i < count && bad < 3; i++) {
        double e = ref(op, value(i, sx, d), value(i, sy, d));
        double g = get(b.p, i, d);
        if (g != e) {
            CHECK(g == e, "%s %s/%s count %zu [%zu]: got %g expected %g", shape,
                  mlc_dtype_name(d), mlc_op_name(op), count, i, g, e);
            bad++;
        }
    }
    CHECK(guard_ok(b), "%s %s/%s count %zu: wrote past the end", shape, mlc_dtype_name(d),
          mlc_op_name(op), count);
}

static void expect_unchanged(const char *shape, buf_t b, size_t count, mlc_dtype_t d, int seed)
{
    for (size_t i = 0; i < count; i++) {
        if (get(b.p, i, d) != value(i, seed, d)) {
            CHECK(0, "%s %s: input [%zu] modified", shape, mlc_dtype_name(d), i);
            return;
        }
    }
}

static void test_matrix(void)
{
    for (mlc_dtype_t d = 0; d < MLC_DTYPE_COUNT; d++) {
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++) {
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                size_t n = counts[ci];
                buf_t a = buf_new(n, d), b = buf_new(n, d), o = buf_new(n, d);

                fill(a, n, d, 1), fill(b, n, d, 2);
                mlc_reduce_apply(a.p, b.p, n, d, op); /* b = a op b */
                expect("apply", b, n, d, op, 1, 2);
                expect_unchanged("apply", a, n, d, 1);

                fill(b, n, d, 2);
                mlc_reduce_apply3(a.p, b.p, o.p, n, d, op);
                expect("apply3", o, n, d, op, 1, 2);
                expect_unchanged("apply3 a", a, n, d, 1);
                expect_unchanged("apply3 b", b, n, d, 2);

                mlc_reduce_apply3(a.p, b.p, b.p, n, d, op); /* out aliases b */
                expect("apply3 out=b", b, n, d, op, 1, 2);

                fill(b, n, d, 2);
                mlc_reduce_apply3(a.p, b.p, a.p, n, d, op); /* out aliases a */
                expect("apply3 out=a", a, n, d, op, 1, 2);

                fill(a, n, d, 1);
                mlc_reduce_apply(a.p, a.p, n, d, op); /* in == inout */
                expect("apply in=inout", a, n, d, op, 1, 1);

                fill(a, n, d, 1);
                mlc_reduce_apply3(a.p, a.p, o.p, n, d, op); /* a == b */
                expect("apply3 a=b", o, n, d, op, 1, 1);
                mlc_reduce_apply3(a.p, a.p, a.p, n, d, op); /* all three */
                expect("apply3 a=b=out", a, n, d, op, 1, 1);

                fill(a, n, d, 1), fill(b, n, d, 2);
                CHECK_OK(mlc_reduce_local(a.p, b.p, n, d, op));
                expect("mlc_reduce_local", b, n, d, op, 1, 2);
                free(a.p), free(b.p), free(o.p);
            }
        }
    }
}

/* ---- float specials: NaN and signed zeros in max/min ------------------- */
static const mlc_dtype_t float_types[] = {MLC_FLOAT16, MLC_BFLOAT16, MLC_FLOAT32, MLC_FLOAT64};

static void put_any(void *buf, size_t i, mlc_dtype_t d, double v)
{
    if (d == MLC_FLOAT16) ((uint16_t *)buf)[i] = mlc_float_to_half((float)v);
    else if (d == MLC_BFLOAT16) ((uint16_t *)buf)[i] = mlc_float_to_bf16((float)v);
    else if (d == MLC_FLOAT32) ((float *)buf)[i] = (float)v;
    else ((double *)buf)[i] = v;
}

static void test_float_minmax(void)
{
    static const struct {
        mlc_op_t op;
        double a, b, want; /* NaN want: any NaN */
    } cases[] = {
        {MLC_MAX, 0.0, -0.0, 0.0},  {MLC_MAX, -0.0, 0.0, 0.0},  {MLC_MAX, -0.0, -0.0, -0.0},
        {MLC_MAX, 0.0, 0.0, 0.0},   {MLC_MIN, 0.0, -0.0, -0.0}, {MLC_MIN, -0.0, 0.0, -0.0},
        {MLC_MIN, 0.0, 0.0, 0.0},   {MLC_MIN, -0.0, -0.0, -0.0}, {MLC_MAX, NAN, 1.0, 1.0},
        {MLC_MAX, 1.0, NAN, 1.0},   {MLC_MIN, NAN, -2.0, -2.0}, {MLC_MIN, -2.0, NAN, -2.0},
        {MLC_MAX, NAN, NAN, NAN},   {MLC_MIN, NAN, NAN, NAN},   {MLC_MAX, -INFINITY, 3.0, 3.0},
        {MLC_MIN, INFINITY, 3.0, 3.0}, {MLC_MAX, 2.0, 3.0, 3.0}, {MLC_MIN, 2.0, 3.0, 2.0},
        {MLC_MAX, -2.5, -3.0, -2.5}, {MLC_MIN, 5.0, 5.0, 5.0},  {MLC_MAX, NAN, -INFINITY, -INFINITY},
        {MLC_SUM, INFINITY, -INFINITY, NAN}, {MLC_PROD, 0.0, INFINITY, NAN},
        {MLC_PROD, -0.0, 3.0, -0.0}, {MLC_SUM, -0.0, -0.0, -0.0}, {MLC_SUM, INFINITY, 1.0, INFINITY},
    };
    const size_t n = sizeof cases / sizeof cases[0];
    for (size_t t = 0; t < sizeof float_types / sizeof float_types[0]; t++) {
        mlc_dtype_t d = float_types[t];
        size_t es = mlc_dtype_size(d);
        for (size_t k = 0; k < n; k++) {
            /* Each case runs as element 0 of 1 and as element 40 of 41 (vector path). */
            for (size_t len = 1; len <= 41; len += 40) {
                unsigned char a[41 * 8], b[41 * 8], o[41 * 8];
                memset(a, 0, sizeof a), memset(b, 0, sizeof b);
                put_any(a, len - 1, d, cases[k].a);
                put_any(b, len - 1, d, cases[k].b);
                unsigned char b2[sizeof b], a2[sizeof a];
                memcpy(b2, b, sizeof b), memcpy(a2, a, sizeof a);
                mlc_reduce_apply(a, b2, len, d, cases[k].op);
                mlc_reduce_apply3(a, b, o, len, d, cases[k].op);
                mlc_reduce_apply3(a2, b, a2, len, d, cases[k].op);
                const unsigned char *res[3] = {b2, o, a2};
                for (int r = 0; r < 3; r++) {
                    double g = get(res[r], len - 1, d);
                    double w = cases[k].want;
                    bool ok = isnan(w) ? isnan(g) : (g == w && !!signbit(g) == !!signbit(w));
                    CHECK(ok, "%s %s(%g, %g) shape %d len %zu = %g, expected %g",
                          mlc_dtype_name(d), mlc_op_name(cases[k].op), cases[k].a, cases[k].b, r,
                          len, g, w);
                }
                /* The three shapes agree bit for bit. */
                CHECK(memcmp(b2 + (len - 1) * es, o + (len - 1) * es, es) == 0 &&
                          memcmp(o + (len - 1) * es, a2 + (len - 1) * es, es) == 0,
                      "%s %s case %zu: shapes differ in bits", mlc_dtype_name(d),
                      mlc_op_name(cases[k].op), k);
            }
        }
    }
}

/* max/min of two NaNs: the left operand's NaN, bit for bit, in every shape
 * (so a reduction's result does not depend on which buffer is written). */
static void test_nan_operand_order(void)
{
    const uint64_t nan_a[] = {0x7e01, 0x7fc1, 0x7fc00001, 0x7ff8000000000001ull};
    const uint64_t nan_b[] = {0x7e02, 0x7fc2, 0x7fc00002, 0x7ff8000000000002ull};
    for (size_t t = 0; t < 4; t++) {
        mlc_dtype_t d = float_types[t];
        size_t es = mlc_dtype_size(d);
        for (mlc_op_t op = MLC_MAX; op <= MLC_MIN; op++) {
            unsigned char a[8], b[8], o[8], b2[8], a2[8];
            memcpy(a, &nan_a[t], es), memcpy(b, &nan_b[t], es); /* little-endian low bytes */
            memcpy(b2, b, es), memcpy(a2, a, es);
            mlc_reduce_apply(a, b2, 1, d, op);
            mlc_reduce_apply3(a, b, o, 1, d, op);
            mlc_reduce_apply3(a2, b, a2, 1, d, op);
            CHECK(memcmp(b2, a, es) == 0 && memcmp(o, a, es) == 0 && memcmp(a2, a, es) == 0,
                  "%s %s(NaN_a, NaN_b) is not NaN_a in every shape", mlc_dtype_name(d),
                  mlc_op_name(op));
        }
    }
}

/* ---- integer wrap-around (no UB: run under UBSan) ------------------------ */
static void test_integer_wrap(void)
{
    int8_t i8a[3] = {100, 16, -128}, i8b[3] = {100, 16, -1};
    int8_t s8[3], p8[3];
    mlc_reduce_apply3(i8a, i8b, s8, 3, MLC_INT8, MLC_SUM);
    mlc_reduce_apply3(i8a, i8b, p8, 3, MLC_INT8, MLC_PROD);
    CHECK(s8[0] == -56 && s8[1] == 32 && s8[2] == 127, "int8 sum %d %d %d", s8[0], s8[1], s8[2]);
    CHECK(p8[0] == 16 && p8[1] == 0 && p8[2] == -128, "int8 prod %d %d %d", p8[0], p8[1], p8[2]);

    int32_t i32a[2] = {INT32_MAX, INT32_MIN}, i32b[2] = {1, -1};
    int32_t s32[2], p32[2];
    mlc_reduce_apply3(i32a, i32b, s32, 2, MLC_INT32, MLC_SUM);
    mlc_reduce_apply3(i32a, i32b, p32, 2, MLC_INT32, MLC_PROD);
    CHECK(s32[0] == INT32_MIN && s32[1] == INT32_MAX, "int32 sum %d %d", s32[0], s32[1]);
    CHECK(p32[0] == INT32_MAX && p32[1] == INT32_MIN, "int32 prod %d %d", p32[0], p32[1]);

    int64_t i64a[2] = {INT64_MAX, INT64_MIN}, i64b[2] = {1, -1};
    int64_t s64[2], p64[2];
    mlc_reduce_apply3(i64a, i64b, s64, 2, MLC_INT64, MLC_SUM);
    mlc_reduce_apply3(i64a, i64b, p64, 2, MLC_INT64, MLC_PROD);
    CHECK(s64[0] == INT64_MIN && s64[1] == INT64_MAX, "int64 sum");
    CHECK(p64[0] == INT64_MAX && p64[1] == INT64_MIN, "int64 prod");

    uint8_t u8a[2] = {255, 16}, u8b[2] = {1, 16};
    uint8_t su8[2], pu8[2];
    mlc_reduce_apply3(u8a, u8b, su8, 2, MLC_UINT8, MLC_SUM);
    mlc_reduce_apply3(u8a, u8b, pu8, 2, MLC_UINT8, MLC_PROD);
    CHECK(su8[0] == 0 && su8[1] == 32, "uint8 sum %u %u", su8[0], su8[1]);
    CHECK(pu8[0] == 255 && pu8[1] == 0, "uint8 prod %u %u", pu8[0], pu8[1]);

    uint32_t u32a[1] = {UINT32_MAX}, u32b[1] = {UINT32_MAX};
    mlc_reduce_apply(u32a, u32b, 1, MLC_UINT32, MLC_PROD);
    CHECK(u32b[0] == 1, "uint32 prod %u", u32b[0]);
    uint64_t u64a[1] = {UINT64_MAX}, u64b[1] = {1};
    mlc_reduce_apply(u64a, u64b, 1, MLC_UINT64, MLC_SUM);
    CHECK(u64b[0] == 0, "uint64 sum");

    /* signed max/min use signed order */
    int8_t ma[2] = {-128, 127}, mb[2] = {127, -128}, mx[2], mn[2];
    mlc_reduce_apply3(ma, mb, mx, 2, MLC_INT8, MLC_MAX);
    mlc_reduce_apply3(ma, mb, mn, 2, MLC_INT8, MLC_MIN);
    CHECK(mx[0] == 127 && mx[1] == 127 && mn[0] == -128 && mn[1] == -128, "int8 max/min");
    uint64_t ua[1] = {UINT64_MAX}, ub[1] = {1};
    mlc_reduce_apply(ua, ub, 1, MLC_UINT64, MLC_MAX);
    CHECK(ub[0] == UINT64_MAX, "uint64 max uses unsigned order");
}

/* ---- avg: the division pass ------------------------------------------------ */
static void test_divide(void)
{
    int32_t i32[] = {-7, 7, -1, 0, 5, -5, INT32_MIN + 1, INT32_MIN};
    mlc_reduce_divide(i32, 8, MLC_INT32, 2);
    const int32_t i32e[] = {-3, 3, 0, 0, 2, -2, -1073741823, INT32_MIN / 2};
    for (int i = 0; i < 8; i++) CHECK(i32[i] == i32e[i], "int32 [%d] %d vs %d", i, i32[i], i32e[i]);

    int8_t i8[] = {-128, 127, -3, 100, -100};
    mlc_reduce_divide(i8, 3, MLC_INT8, 3);
    mlc_reduce_divide(i8 + 3, 2, MLC_INT8, 300); /* p beyond the dtype's range */
    CHECK(i8[0] == -42 && i8[1] == 42 && i8[2] == -1 && i8[3] == 0 && i8[4] == 0,
          "int8 %d %d %d %d %d", i8[0], i8[1], i8[2], i8[3], i8[4]);
    uint8_t u8[] = {255, 1};
    mlc_reduce_divide(u8, 2, MLC_UINT8, 2);
    CHECK(u8[0] == 127 && u8[1] == 0, "uint8 %u %u", u8[0], u8[1]);
    int64_t i64[] = {INT64_MIN, -9};
    mlc_reduce_divide(i64, 2, MLC_INT64, 7);
    CHECK(i64[0] == INT64_MIN / 7 && i64[1] == -1, "int64");
    uint64_t u64[] = {UINT64_MAX};
    mlc_reduce_divide(u64, 1, MLC_UINT64, 3);
    CHECK(u64[0] == UINT64_MAX / 3, "uint64");
    uint32_t u32[] = {7};
    mlc_reduce_divide(u32, 1, MLC_UINT32, 4);
    CHECK(u32[0] == 1, "uint32");

    float f32[] = {3, -3, 1};
    mlc_reduce_divide(f32, 3, MLC_FLOAT32, 2);
    CHECK(f32[0] == 1.5f && f32[1] == -1.5f && f32[2] == 0.5f, "float32");
    double f64[] = {1};
    mlc_reduce_divide(f64, 1, MLC_FLOAT64, 3);
    CHECK(f64[0] == 1.0 / 3.0, "float64");
    uint16_t h[] = {mlc_float_to_half(1.0f)}, bf[] = {mlc_float_to_bf16(1.0f)};
    mlc_reduce_divide(h, 1, MLC_FLOAT16, 3);
    mlc_reduce_divide(bf, 1, MLC_BFLOAT16, 3);
    CHECK(h[0] == 0x3555, "fp16 1/3 = 0x%04x", h[0]);
    CHECK(bf[0] == 0x3eab, "bf16 1/3 = 0x%04x", bf[0]);

    /* long half buffers cross the conversion chunks */
    uint16_t hs[1100];
    for (int i = 0; i < 1100; i++) hs[i] = mlc_float_to_half((float)(i % 9));
    mlc_reduce_divide(hs, 1100, MLC_FLOAT16, 4);
    int bad = 0;
    for (int i = 0; i < 1100; i++) bad += mlc_half_to_float(hs[i]) != (float)(i % 9) / 4.0f;
    CHECK(bad == 0, "fp16 divide over chunks: %d wrong", bad);

    int32_t same[] = {9};
    mlc_reduce_divide(same, 1, MLC_INT32, 1);
    CHECK(same[0] == 9, "p = 1 leaves data");
}

/* ---- user ops --------------------------------------------------------------- */
typedef struct user_ctx {
    mlc_dtype_t dtype;
    size_t elements; /* total count seen */
    int calls;
    bool bad_args;
} user_ctx_t;

/* Non-commutative: inout = in * 10 + inout, so operand order is visible. */
static void user_int32(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    user_ctx_t *c = ctx;
    c->calls++;
    c->elements += count;
    if (dtype != c->dtype || in == inout) c->bad_args = true;
    const int32_t *x = in;
    int32_t *y = inout;
    for (size_t i = 0; i < count; i++) y[i] = x[i] * 10 + y[i];
}

/* Records of N bytes: byte-wise inout = 3 * in + inout (mod 256). */
static void user_record(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    user_ctx_t *c = ctx;
    c->calls++;
    c->elements += count;
    if (dtype != c->dtype || in == inout) c->bad_args = true;
    const uint8_t *x = in;
    uint8_t *y = inout;
    size_t bytes = count * mlc_dtype_size(dtype);
    for (size_t i = 0; i < bytes; i++) y[i] = (uint8_t)(3u * x[i] + y[i]);
}

static void test_user_int32(void)
{
    user_ctx_t ctx = {MLC_INT32, 0, 0, false};
    mlc_op_t op;
    CHECK_OK(mlc_op_create(user_int32, 0, &ctx, &op));
    enum { N = 40000 }; /* more than the scratch holds: copies go in chunks */
    int32_t *a = malloc(N * 4), *b = malloc(N * 4), *o = malloc(N * 4);
#define FILL()                                         \
    for (int i = 0; i < N; i++) a[i] = i % 7 - 3, b[i] = i % 5
#define CHECK_USER_OP(buf, x, y, what)                                       \
    do {                                                                     \
        int bad_ = 0;                                                        \
        for (int i = 0; i < N; i++) bad_ += (buf)[i] != (x) * 10 + (y);      \
        CHECK(bad_ == 0, "user op %s: %d wrong", what, bad_);                \
    } while (0)
    FILL();
    mlc_reduce_apply(a, b, N, MLC_INT32, op);
    CHECK_USER_OP(b, i % 7 - 3, i % 5, "apply");
    FILL();
    mlc_reduce_apply3(a, b, o, N, MLC_INT32, op);
    CHECK_USER_OP(o, i % 7 - 3, i % 5, "apply3");
    CHECK_USER_OP(b, 0, i % 5, "apply3 leaves b");
    mlc_reduce_apply3(a, b, b, N, MLC_INT32, op);
    CHECK_USER_OP(b, i % 7 - 3, i % 5, "apply3 out=b");
    FILL();
    mlc_reduce_apply3(a, b, a, N, MLC_INT32, op);
    CHECK_USER_OP(a, i % 7 - 3, i % 5, "apply3 out=a (a stays the left operand)");
    FILL();
    mlc_reduce_apply(a, a, N, MLC_INT32, op);
    CHECK_USER_OP(a, i % 7 - 3, i % 7 - 3, "apply in=inout");
    FILL();
    mlc_reduce_apply3(a, a, o, N, MLC_INT32, op);
    CHECK_USER_OP(o, i % 7 - 3, i % 7 - 3, "apply3 a=b");
    FILL();
    CHECK_OK(mlc_reduce_local(a, b, N, MLC_INT32, op));
    CHECK_USER_OP(b, i % 7 - 3, i % 5, "mlc_reduce_local");
    CHECK(!ctx.bad_args, "user fn got its dtype and never aliased buffers");
    CHECK(ctx.calls >= 7, "calls %d", ctx.calls);
#undef FILL
#undef CHECK_USER_OP
    free(a), free(b), free(o);
    CHECK_OK(mlc_op_free(op));
}

static void test_user_records(void)
{
    const mlc_dtype_t d = MLC_RECORD(40000);
    const size_t n = 3, bytes = n * 40000;
    user_ctx_t ctx = {d, 0, 0, false};
    mlc_op_t op;
    CHECK_OK(mlc_op_create(user_record, 1, &ctx, &op));
    uint8_t *a = malloc(bytes), *b = malloc(bytes), *o = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) a[i] = (uint8_t)(i * 7), b[i] = (uint8_t)(i * 13 + 1);
    mlc_reduce_apply3(a, b, o, n, d, op);
    mlc_reduce_apply3(a, b, a, n, d, op); /* out = a: through the scratch, one record at a time */
    int bad = 0;
    for (size_t i = 0; i < bytes; i++) {
        uint8_t want = (uint8_t)(3u * (uint8_t)(i * 7) + (uint8_t)(i * 13 + 1));
        bad += o[i] != want;
        bad += a[i] != want;
    }
    CHECK(bad == 0, "record user op: %d bytes wrong", bad);
    CHECK(ctx.elements == 2 * n, "user fn saw %zu records", ctx.elements);
    CHECK(!ctx.bad_args, "record user op args");
    CHECK_ERR_MSG(mlc_reduce_local(a, b, n, d, MLC_SUM), MLC_ERR_INVALID_ARG, "record");
    CHECK_OK(mlc_reduce_local(a, b, n, d, op));
    free(a), free(b), free(o);
    CHECK_OK(mlc_op_free(op));
}

static void test_reduce_local_errors(void)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_ERR_MSG(mlc_reduce_local(NULL, x, 4, MLC_FLOAT32, MLC_SUM), MLC_ERR_INVALID_ARG, "in is NULL");
    CHECK_ERR_MSG(mlc_reduce_local(x, NULL, 4, MLC_FLOAT32, MLC_SUM), MLC_ERR_INVALID_ARG,
                  "inout is NULL");
    CHECK_OK(mlc_reduce_local(NULL, NULL, 0, MLC_FLOAT32, MLC_SUM));
    CHECK_ERR_MSG(mlc_reduce_local(x, x + 2, 4, MLC_FLOAT32, MLC_SUM), MLC_ERR_INVALID_ARG, "overlap");
    CHECK_ERR_MSG(mlc_reduce_local(x, x + 4, 4, 77, MLC_SUM), MLC_ERR_INVALID_ARG, "77");
    CHECK_ERR_MSG(mlc_reduce_local(x, x + 4, 4, MLC_FLOAT32, 1000), MLC_ERR_INVALID_ARG, "1000");
    CHECK_ERR_MSG(mlc_reduce_local(x, x + 4, SIZE_MAX / 2, MLC_FLOAT32, MLC_SUM), MLC_ERR_INVALID_ARG,
                  "overflows");
    CHECK_OK(mlc_reduce_local(x, x + 4, 4, MLC_FLOAT32, MLC_SUM));
    CHECK(x[4] == 6 && x[7] == 12, "adjacent buffers");
    CHECK_OK(mlc_reduce_local(x, x, 2, MLC_FLOAT32, MLC_PROD));
    CHECK(x[0] == 1 && x[1] == 4, "in == inout squares");
    CHECK_STR(mlc_last_error(), "");
}

int main(void)
{
    mlc_reduce_use_isa(NULL);
    const char *best = mlc_reduce_isa();
    /* the kernels, in every instruction set this CPU runs */
    const char *isas[] = {"base", "v3"};
    for (int i = 0; i < 2; i++) {
        if (!mlc_reduce_use_isa(isas[i])) {
            printf("kernel set %s: not available here\n", isas[i]);
            continue;
        }
        CHECK_STR(mlc_reduce_isa(), isas[i]);
        printf("kernel set %s\n", mlc_reduce_isa());
        test_matrix();
        test_float_minmax();
        test_nan_operand_order();
        test_integer_wrap();
        test_divide();
    }
    CHECK(!mlc_reduce_use_isa("sse9"), "unknown set refused");
    CHECK(mlc_reduce_use_isa(NULL), "back to the best set");
    CHECK_STR(mlc_reduce_isa(), best);
    test_user_int32();
    test_user_records();
    test_reduce_local_errors();
    return unit_result("unit_reduce");
}
