/* SPDX-License-Identifier: BSD-3-Clause */
/* Verifiable benchmark data: see bench_data.h. */
#include "bench_data.h"

#include <math.h>
#include <string.h>

size_t mlc_bench_dtype_size(mlc_dtype_t dtype)
{
    switch (dtype) {
#define MLC_X_SIZE(name, str, size) \
    case name:                      \
        return size;
        MLC_DTYPE_LIST(MLC_X_SIZE)
#undef MLC_X_SIZE
    default:
        return 0;
    }
}

/* Largest L such that every integer in [0, L] is exact in dtype (capped so
 * 32/64-bit values stay in a range every type shares), and never the
 * sentinel (uint8 255). */
static uint64_t exact_limit(mlc_dtype_t dtype)
{
    switch (dtype) {
    case MLC_INT8:
        return 127;
    case MLC_UINT8:
        return 254;
    case MLC_FLOAT16:
        return 2048;
    case MLC_BFLOAT16:
        return 256;
    default:
        return 1u << 20;
    }
}

void mlc_bench_gen_init(mlc_bench_gen_t *g, mlc_dtype_t dtype, mlc_op_t op, int nranks,
                        uint64_t seed)
{
    uint64_t L = exact_limit(dtype), p = (uint64_t)nranks;
    g->dtype = dtype;
    g->esize = mlc_bench_dtype_size(dtype);
    g->op = op;
    g->nranks = nranks;
    g->seed = seed;
    if (op == MLC_SUM || op == MLC_AVG) {
        /* sum = p*base + p(p-1)/2 <= L */
        uint64_t T = p * (p - 1) / 2;
        g->rank_term = T <= L / 2;
        g->bound = g->rank_term ? (L - T) / p : L / p;
    } else if (op == MLC_PROD) {
        g->rank_term = false;
        g->bound = 0;
    } else {
        /* max = base + p - 1 <= L */
        g->rank_term = p - 1 <= L / 2;
        g->bound = g->rank_term ? L - (p - 1) : L;
    }
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t base_of(const mlc_bench_gen_t *g, size_t i)
{
    return mix64(g->seed * 0x9e3779b97f4a7c15ull + i) % (g->bound + 1);
}

static inline uint64_t input_of(const mlc_bench_gen_t *g, int rank, size_t i)
{
    if (g->op == MLC_PROD) return (i + g->seed) % (uint64_t)g->nranks == (uint64_t)rank ? 2 : 1;
    return base_of(g, i) + (g->rank_term ? (uint64_t)rank : 0);
}

uint64_t mlc_bench_input(const mlc_bench_gen_t *g, int rank, size_t i)
{
    return input_of(g, rank, i);
}

static bool is_float(mlc_dtype_t d)
{
    return d == MLC_FLOAT16 || d == MLC_BFLOAT16 || d == MLC_FLOAT32 || d == MLC_FLOAT64;
}

double mlc_bench_reduced(const mlc_bench_gen_t *g, size_t i)
{
    uint64_t p = (uint64_t)g->nranks;
    if (g->op == MLC_PROD) return 2.0;
    uint64_t b = base_of(g, i);
    uint64_t sum = p * b + (g->rank_term ? p * (p - 1) / 2 : 0);
    switch (g->op) {
    case MLC_MAX:
        return (double)(b + (g->rank_term ? p - 1 : 0));
    case MLC_MIN:
        return (double)b;
    case MLC_AVG: /* integers truncate toward zero; floats give base + (p-1)/2 exactly */
        return is_float(g->dtype) ? (double)sum / (double)p : (double)(sum / p);
    default:
        return (double)sum;
    }
}

/* fp16 bits of a value that is exactly representable as a normal half (or
 * zero); anything else gives a NaN, which mlc_bench_store detects. */
static uint16_t half_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    uint32_t mag = b & 0x7fffffff;
    if (mag == 0) return sign;
    int e = (int)(mag >> 23) - 127 + 15;
    if (e <= 0 || e >= 31 || (mag & 0x1fff) != 0) return 0x7e00;
    return (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)((mag >> 13) & 0x3ff));
}

static double half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if (b & 0xffff) return 0x7fc0; /* not exact: NaN */
    return (uint16_t)(b >> 16);
}

static double bf16_value(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

void mlc_bench_fill(const mlc_bench_gen_t *g, int rank, size_t first, void *buf, size_t count)
{
#define MLC_FILL(T, conv)                                                     \
    do {                                                                      \
        T *out = buf;                                                         \
        for (size_t k = 0; k < count; k++) out[k] = conv(input_of(g, rank, first + k)); \
    } while (0)
#define MLC_AS_HALF(v) half_bits((float)(v))
#define MLC_AS_BF16(v) bf16_bits((float)(v))
    switch (g->dtype) {
    case MLC_INT8: MLC_FILL(int8_t, (int8_t)); break;
    case MLC_UINT8: MLC_FILL(uint8_t, (uint8_t)); break;
    case MLC_INT32: MLC_FILL(int32_t, (int32_t)); break;
    case MLC_UINT32: MLC_FILL(uint32_t, (uint32_t)); break;
    case MLC_INT64: MLC_FILL(int64_t, (int64_t)); break;
    case MLC_UINT64: MLC_FILL(uint64_t, (uint64_t)); break;
    case MLC_FLOAT16: MLC_FILL(uint16_t, MLC_AS_HALF); break;
    case MLC_BFLOAT16: MLC_FILL(uint16_t, MLC_AS_BF16); break;
    case MLC_FLOAT32: MLC_FILL(float, (float)); break;
    case MLC_FLOAT64: MLC_FILL(double, (double)); break;
    default: break;
    }
#undef MLC_FILL
#undef MLC_AS_HALF
#undef MLC_AS_BF16
}

double mlc_bench_load(mlc_dtype_t dtype, const void *buf, size_t k)
{
    switch (dtype) {
    case MLC_INT8: return ((const int8_t *)buf)[k];
    case MLC_UINT8: return ((const uint8_t *)buf)[k];
    case MLC_INT32: return ((const int32_t *)buf)[k];
    case MLC_UINT32: return ((const uint32_t *)buf)[k];
    case MLC_INT64: return (double)((const int64_t *)buf)[k];
    case MLC_UINT64: return (double)((const uint64_t *)buf)[k];
    case MLC_FLOAT16: return half_value(((const uint16_t *)buf)[k]);
    case MLC_BFLOAT16: return bf16_value(((const uint16_t *)buf)[k]);
    case MLC_FLOAT32: return ((const float *)buf)[k];
    case MLC_FLOAT64: return ((const double *)buf)[k];
    default: return NAN;
    }
}

static bool integral_in(double v, double lo, double hi)
{
    return v == floor(v) && v >= lo && v <= hi;
}

bool mlc_bench_store(mlc_dtype_t dtype, void *buf, size_t k, double v)
{
    switch (dtype) {
    case MLC_INT8:
        if (!integral_in(v, INT8_MIN, INT8_MAX)) return false;
        ((int8_t *)buf)[k] = (int8_t)v;
        return true;
    case MLC_UINT8:
        if (!integral_in(v, 0, UINT8_MAX)) return false;
        ((uint8_t *)buf)[k] = (uint8_t)v;
        return true;
    case MLC_INT32:
        if (!integral_in(v, INT32_MIN, INT32_MAX)) return false;
        ((int32_t *)buf)[k] = (int32_t)v;
        return true;
    case MLC_UINT32:
        if (!integral_in(v, 0, UINT32_MAX)) return false;
        ((uint32_t *)buf)[k] = (uint32_t)v;
        return true;
    case MLC_INT64: /* limits chosen exactly representable as doubles */
        if (!integral_in(v, -0x1p62, 0x1p62)) return false;
        ((int64_t *)buf)[k] = (int64_t)v;
        return true;
    case MLC_UINT64:
        if (!integral_in(v, 0, 0x1p63)) return false;
        ((uint64_t *)buf)[k] = (uint64_t)v;
        return true;
    case MLC_FLOAT16:
        ((uint16_t *)buf)[k] = half_bits((float)v);
        return (double)(float)v == v && half_value(((uint16_t *)buf)[k]) == v;
    case MLC_BFLOAT16:
        ((uint16_t *)buf)[k] = bf16_bits((float)v);
        return (double)(float)v == v && bf16_value(((uint16_t *)buf)[k]) == v;
    case MLC_FLOAT32:
        ((float *)buf)[k] = (float)v;
        return (double)(float)v == v;
    case MLC_FLOAT64:
        ((double *)buf)[k] = v;
        return true;
    default:
        return false;
    }
}
