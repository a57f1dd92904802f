/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fp16 / bf16 conversions against an independent reference (every
 * representable value listed, nearest found by search, ties to even), and
 * the round-once behaviour of the 16-bit reductions.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "base/dtype.h"
#include "base/reduce_impl.h"
#include "unit.h"

/* Reference decoders from the bit layout. */
static double ref_half(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

static double ref_bf16(uint16_t h)
{
    int sign = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return sign ? -v : v;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every non-negative finite value of a 16-bit format, in increasing order. */
typedef struct table {
    double v[0x8000];
    int n; /* finite non-negative encodings: 0 .. n-1 */
    double overflow; /* values >= this round to Inf */
} table_t;
static table_t half_table, bf16_table;

static void build(table_t *t, double (*dec)(uint16_t))
{
    t->n = 0;
    for (uint32_t h = 0; h < 0x8000 && isfinite(dec((uint16_t)h)); h++) t->v[t->n++] = dec((uint16_t)h);
    /* Inf takes over at the midpoint between the largest value and the next
     * power of two (its ulp step), a tie that goes to the even encoding: Inf */
    double max = t->v[t->n - 1], ulp = max - t->v[t->n - 2];
    t->overflow = max + ulp / 2;
}

/* Round-to-nearest-even of a double into the format, by search. */
static uint16_t ref_round(const table_t *t, double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a >= t->overflow) return sign | (uint16_t)t->n; /* Inf */
    int lo = 0, hi = t->n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (t->v[mid] <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - t->v[lo], dh = t->v[hi] - a;
    int pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    if (a < t->v[lo]) pick = lo; /* a == 0 */
    return sign | (uint16_t)pick;
}

static void test_decode_all(void)
{
    int bad_h = 0, bad_b = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        double rh = ref_half((uint16_t)h), gh = mlc_half_to_float((uint16_t)h);
        double rb = ref_bf16((uint16_t)h), gb = mlc_bf16_to_float((uint16_t)h);
        bad_h += isnan(rh) ? !isnan(gh) : (gh != rh || signbit(gh) != signbit(rh));
        bad_b += isnan(rb) ? !isnan(gb) : (gb != rb || signbit(gb) != signbit(rb));
    }
    CHECK(bad_h == 0, "fp16 -> fp32: %d of 65536 wrong", bad_h);
    CHECK(bad_b == 0, "bf16 -> fp32: %d of 65536 wrong", bad_b);
}

static void test_roundtrip_all(void)
{
    int bad_h = 0, bad_b = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        uint16_t rh = mlc_float_to_half(mlc_half_to_float((uint16_t)h));
        uint16_t rb = mlc_float_to_bf16(mlc_bf16_to_float((uint16_t)h));
        bool nan_h = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        bool nan_b = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        /* NaN stays NaN of the same sign, made quiet; payload top bits kept */
        bad_h += nan_h ? rh != (h | 0x200) : rh != h;
        bad_b += nan_b ? rb != (h | 0x40) : rb != h;
    }
    CHECK(bad_h == 0, "fp16 round trip: %d wrong", bad_h);
    CHECK(bad_b == 0, "bf16 round trip: %d wrong", bad_b);
}

/* Midpoints between neighbours (ties), and one fp32 ulp either side. */
static void test_midpoints(const table_t *t, uint16_t (*conv)(float), const char *name)
{
    int bad = 0;
    for (int i = 0; i + 1 < t->n; i++) {
        float mid = (float)((t->v[i] + t->v[i + 1]) / 2); /* exact in fp32 */
        float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            for (int s = 0; s < 2; s++) {
                float f = s ? -probes[k] : probes[k];
                uint16_t want = ref_round(t, f), got = conv(f);
                if (got != want && bad++ < 5)
                    fprintf(stderr, "%s(%a) = 0x%04x, expected 0x%04x\n", name, f, got, want);
            }
        }
    }
    CHECK(bad == 0, "%s at midpoints: %d wrong", name, bad);
}

static void test_random(const table_t *t, uint16_t (*conv)(float), const char *name)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float f = float_of((uint32_t)(s >> 32));
        if (isnan(f)) continue;
        uint16_t want = ref_round(t, f), got = conv(f);
        if (got != want && bad++ < 5)
            fprintf(stderr, "%s(%a) = 0x%04x, expected 0x%04x\n", name, f, got, want);
    }
    CHECK(bad == 0, "%s on random floats: %d wrong", name, bad);
}

static void test_edges(void)
{
    CHECK(mlc_float_to_half(65504.0f) == 0x7bff, "max half");
    CHECK(mlc_float_to_half(65519.99f) == 0x7bff, "below the Inf threshold");
    CHECK(mlc_float_to_half(65520.0f) == 0x7c00, "65520 ties to Inf");
    CHECK(mlc_float_to_half(1e10f) == 0x7c00, "overflow");
    CHECK(mlc_float_to_half(-INFINITY) == 0xfc00, "-Inf");
    CHECK(mlc_float_to_half(0x1p-24f) == 0x0001, "smallest subnormal");
    CHECK(mlc_float_to_half(0x1p-25f) == 0x0000, "half of it ties to 0");
    CHECK(mlc_float_to_half(nextafterf(0x1p-25f, 1)) == 0x0001, "just above rounds up");
    CHECK(mlc_float_to_half(0x3p-25f) == 0x0002, "1.5 ulp ties to even 2");
    CHECK(mlc_float_to_half(-0.0f) == 0x8000, "-0");
    CHECK(mlc_float_to_half(0x1p-14f) == 0x0400, "smallest normal");
    CHECK(mlc_float_to_half(nextafterf(0x1p-14f, 0)) == 0x0400, "rounds up into the normals");
    CHECK(mlc_float_to_half(1e-30f) == 0, "tiny -> 0");
    CHECK(mlc_float_to_half(float_of(0x00000001)) == 0, "fp32 subnormal -> 0");
    uint16_t n = mlc_float_to_half(float_of(0xffc00001));
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff) && (n & 0x8000), "-NaN stays -NaN: 0x%04x", n);
    n = mlc_float_to_half(float_of(0x7f800001)); /* signalling NaN, payload only in low bits */
    CHECK((n & 0x7c00) == 0x7c00 && (n & 0x3ff), "NaN with a low payload stays NaN: 0x%04x", n);

    CHECK(mlc_float_to_bf16(float_of(0x7f7fffff)) == 0x7f80, "FLT_MAX rounds to Inf in bf16");
    CHECK(mlc_float_to_bf16(float_of(0x3f808000)) == 0x3f80, "tie to even (down)");
    CHECK(mlc_float_to_bf16(float_of(0x3f818000)) == 0x3f82, "tie to even (up)");
    CHECK(mlc_float_to_bf16(float_of(0x3f808001)) == 0x3f81, "above the tie");
    uint16_t b = mlc_float_to_bf16(float_of(0x7f800001));
    CHECK((b & 0x7f80) == 0x7f80 && (b & 0x7f), "bf16 NaN with a low payload stays NaN: 0x%04x", b);
    CHECK(mlc_float_to_bf16(float_of(0x00000001)) == 0x0000, "fp32 subnormal rounds to 0");
    CHECK(mlc_float_to_bf16(float_of(0x00008000)) == 0x0000, "subnormal tie to even 0");
    CHECK(mlc_float_to_bf16(float_of(0x00018000)) == 0x0002, "subnormal tie to even 2");
    CHECK(bits_of(mlc_bf16_to_float(0x0001)) == 0x00010000, "bf16 subnormal decodes exactly");
}

/* Each pairwise operation is computed in fp32 and rounded once to 16 bits. */
static void test_round_once(void)
{
    struct {
        mlc_dtype_t d;
        mlc_op_t op;
        float a, b, want;
    } cases[] = {
        {MLC_FLOAT16, MLC_SUM, 2048, 1, 2048},          /* tie 2049 -> even 2048 */
        {MLC_FLOAT16, MLC_SUM, 2050, 1, 2052},          /* tie 2051 -> even 2052 */
        {MLC_FLOAT16, MLC_SUM, 1, 0x1p-11f, 1},         /* tie -> 1 */
        {MLC_FLOAT16, MLC_SUM, 1, 0x1p-11f + 0x1p-21f, 1 + 0x1p-10f}, /* just above the tie */
        {MLC_FLOAT16, MLC_PROD, 3, 1 + 0x1p-10f, 3 + 0x1p-8f}, /* 3 + 1.5 ulp: tie -> even */
        {MLC_FLOAT16, MLC_SUM, 65504, 16, INFINITY},    /* 65520 ties to Inf */
        {MLC_FLOAT16, MLC_SUM, 65504, 15.5f, 65504},
        {MLC_FLOAT16, MLC_SUM, 0x1p-24f, 0x1p-24f, 0x1p-23f}, /* subnormals exact */
        {MLC_FLOAT16, MLC_PROD, 0x1p-12f, 0x1p-12f, 0x1p-24f},
        {MLC_FLOAT16, MLC_PROD, 0x1p-12f, 0x1p-13f, 0},   /* 2^-25 ties to even: 0 */
        {MLC_FLOAT16, MLC_PROD, 0x3p-13f, 0x1p-12f, 0x1p-23f}, /* 1.5 * 2^-24 ties to 2 * 2^-24 */
        {MLC_FLOAT16, MLC_PROD, 0x1p-12f, 0x1p-14f, 0},  /* 2^-26 underflows to 0 */
        {MLC_BFLOAT16, MLC_SUM, 256, 1, 256},           /* tie 257 -> even 256 */
        {MLC_BFLOAT16, MLC_SUM, 258, 1, 260},           /* tie 259 -> even 260 */
        {MLC_BFLOAT16, MLC_SUM, 256, 1.0078125f, 258},  /* above the tie */
        {MLC_BFLOAT16, MLC_PROD, 1.0078125f, 1.0078125f, 1.015625f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint16_t (*enc)(float) = cases[k].d == MLC_FLOAT16 ? mlc_float_to_half : mlc_float_to_bf16;
        float (*dec)(uint16_t) = cases[k].d == MLC_FLOAT16 ? mlc_half_to_float : mlc_bf16_to_float;
        uint16_t a = enc(cases[k].a), b = enc(cases[k].b), o;
        CHECK(dec(a) == cases[k].a && dec(b) == cases[k].b, "case %zu operands exact", k);
        mlc_reduce_apply3(&a, &b, &o, 1, cases[k].d, cases[k].op);
        CHECK(dec(o) == cases[k].want, "%s %s(%a, %a) = %a, expected %a", mlc_dtype_name(cases[k].d),
              mlc_op_name(cases[k].op), cases[k].a, cases[k].b, dec(o), cases[k].want);
    }

    /* Summing three values rounds after each pairwise step, not once at the
     * end: (2048 + 1) -> 2048, then + 1 -> 2048 (an fp32 accumulator would give 2050). */
    uint16_t x = mlc_float_to_half(2048), one = mlc_float_to_half(1);
    mlc_reduce_apply(&one, &x, 1, MLC_FLOAT16, MLC_SUM);
    mlc_reduce_apply(&one, &x, 1, MLC_FLOAT16, MLC_SUM);
    CHECK(mlc_half_to_float(x) == 2048, "pairwise rounding: %g", mlc_half_to_float(x));
}

/* Every 16-bit value through the kernels' array conversions (hardware ones
 * where the kernel set has them): max(x, x) round-trips, x / p rounds once. */
static void test_kernel_conversions(const table_t *t, mlc_dtype_t d, double (*dec)(uint16_t))
{
    static uint16_t all[65536], out[65536];
    for (uint32_t h = 0; h <= 0xffff; h++) all[h] = (uint16_t)h;
    uint16_t quiet = d == MLC_FLOAT16 ? 0x200 : 0x40;
    mlc_reduce_apply3(all, all, out, 65536, d, MLC_MAX);
    int bad = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        bool nan = isnan(dec((uint16_t)h));
        bad += out[h] != (nan ? (h | quiet) : h);
    }
    CHECK(bad == 0, "%s max(x, x) != x for %d values", mlc_dtype_name(d), bad);

    for (int p = 3; p <= 7; p += 4) {
        memcpy(out, all, sizeof out);
        mlc_reduce_divide(out, 65536, d, p);
        bad = 0;
        for (uint32_t h = 0; h <= 0xffff; h++) {
            double x = dec((uint16_t)h);
            if (isnan(x)) {
                bad += !isnan(dec(out[h]));
                continue;
            }
            uint16_t want = ref_round(t, x / p);
            if (out[h] != want && bad++ < 5)
                fprintf(stderr, "%s 0x%04x / %d = 0x%04x, expected 0x%04x\n", mlc_dtype_name(d),
                        h, p, out[h], want);
        }
        CHECK(bad == 0, "%s x / %d: %d wrong", mlc_dtype_name(d), p, bad);
    }
}

/* The conversions never take a subnormal fp32 input, so flush-to-zero and
 * denormals-are-zero modes (common in ML programs) change nothing. */
static void test_ftz_daz(void)
{
#if defined(__SSE2__)
    unsigned int saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040); /* FTZ | DAZ */
    int bad = 0;
    for (uint32_t h = 0; h < 0x400; h++) {
        float f = mlc_half_to_float((uint16_t)h);
        bad += f != (float)ldexp(h, -24);
        bad += mlc_float_to_half(f) != h;
    }
    uint16_t a = 0x0001, b = 0x0003, o;
    mlc_reduce_apply3(&a, &b, &o, 1, MLC_FLOAT16, MLC_SUM);
    bad += o != 0x0004;
    _mm_setcsr(saved);
    CHECK(bad == 0, "fp16 subnormals under FTZ/DAZ: %d wrong", bad);
#else
    printf("FTZ/DAZ check skipped (not x86)\n");
#endif
}

int main(void)
{
    build(&half_table, ref_half);
    build(&bf16_table, ref_bf16);
    CHECK(half_table.n == 0x7c00 && bf16_table.n == 0x7f80, "tables %d %d", half_table.n,
          bf16_table.n);
    test_decode_all();
    test_roundtrip_all();
    test_midpoints(&half_table, mlc_float_to_half, "fp16");
    test_midpoints(&bf16_table, mlc_float_to_bf16, "bf16");
    test_random(&half_table, mlc_float_to_half, "fp16");
    test_random(&bf16_table, mlc_float_to_bf16, "bf16");
    test_edges();
    /* the kernels, in every instruction set this CPU runs */
    const char *isas[] = {"base", "v3"};
    for (int i = 0; i < 2; i++) {
        if (!mlc_reduce_use_isa(isas[i])) {
            printf("kernel set %s: not available here\n", isas[i]);
            continue;
        }
        printf("kernel set %s\n", mlc_reduce_isa());
        test_kernel_conversions(&half_table, MLC_FLOAT16, ref_half);
        test_kernel_conversions(&bf16_table, MLC_BFLOAT16, ref_bf16);
        test_round_once();
        test_ftz_daz();
    }
    mlc_reduce_use_isa(NULL);
    return unit_result("unit_half");
}
