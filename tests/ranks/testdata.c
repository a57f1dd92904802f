/* SPDX-License-Identifier: BSD-3-Clause */
#include "testdata.h"
#include <string.h>
#include "harness.h"

lane_t lane_of(mlc_dtype_t dt)
{
    switch (dt) {
    case MLC_INT8:
    case MLC_INT32:
    case MLC_INT64: return LANE_SIGNED;
    case MLC_UINT8:
    case MLC_UINT32:
    case MLC_UINT64: return LANE_UNSIGNED;
    default: return LANE_FLOAT;
    }
}

/* Rank r's element i hashes to mix(key(seed, r) ^ i). A fill computes the
 * keys of the first ranks once, not per element; the others on the way. */
#define KEPT_KEYS 64
typedef struct rank_keys {
    uint32_t seed;
    int kept; /* key[0..kept-1] */
    uint64_t key[KEPT_KEYS];
} rank_keys_t;

static uint64_t rank_key(uint32_t seed, int r)
{
    return mlc_test_mix(((uint64_t)seed << 20) ^ (uint64_t)(uint32_t)r);
}

static void keys_init(rank_keys_t *k, uint32_t seed, int p)
{
    k->seed = seed;
    k->kept = p < KEPT_KEYS ? p : KEPT_KEYS;
    for (int r = 0; r < k->kept; r++) k->key[r] = rank_key(seed, r);
}

static uint64_t hash_at(const rank_keys_t *k, int r, size_t i)
{
    uint64_t key = r >= 0 && r < k->kept ? k->key[r] : rank_key(k->seed, r);
    return mlc_test_mix(key ^ (uint64_t)i);
}

/* Full-range integers for MIN/MAX, truncated to the dtype's width. */
static int64_t signed_of_width(mlc_dtype_t dt, uint64_t h)
{
    switch (dt) {
    case MLC_INT8: return (int8_t)(uint8_t)h;
    case MLC_INT32: return (int32_t)(uint32_t)h;
    default: return (int64_t)h;
    }
}

static uint64_t unsigned_of_width(mlc_dtype_t dt, uint64_t h)
{
    switch (dt) {
    case MLC_UINT8: return (uint8_t)h;
    case MLC_UINT32: return (uint32_t)h;
    default: return h;
    }
}

/* Float MLC_AVG: the last rank's value makes the sum a multiple of p, so
 * sum / p is exact whichever way the library divides. */
static double float_avg_value(int p, int r, size_t i, const rank_keys_t *k)
{
    if (r < p - 1) return (double)((int)(hash_at(k, r, i) % 17) - 8);
    long long sum = 0;
    for (int q = 0; q < p - 1; q++) sum += (int)(hash_at(k, q, i) % 17) - 8;
    long long fix = ((-sum) % p + p) % p;
    long long m = (long long)(hash_at(k, r, i) % 5) - 2;
    return (double)(fix + (long long)p * m);
}

/* Rank r's contribution at element i. */
static mlc_tv_t value(mlc_dtype_t dt, mlc_op_t op, int p, int r, size_t i, const rank_keys_t *k)
{
    static const int64_t prod_signed[8] = {1, -1, 2, -2, 1, -1, 0, 1};
    static const uint64_t prod_unsigned[8] = {1, 2, 3, 0, 1, 2, 1, 1};
    static const double prod_float[8] = {1, -1, 2, -2, 0.5, -0.5, 1, 0};
    uint64_t h = hash_at(k, r, i);
    mlc_tv_t v = {0, 0, 0.0};
    switch (lane_of(dt)) {
    case LANE_SIGNED:
        if (op == MLC_PROD) v.i = prod_signed[h % 8];
        else if (op == MLC_MAX || op == MLC_MIN) v.i = signed_of_width(dt, h);
        else v.i = (int64_t)(h % 17) - 8; /* SUM, AVG: |sum| <= 32 fits int8 */
        break;
    case LANE_UNSIGNED:
        if (op == MLC_PROD) v.u = prod_unsigned[h % 8];
        else if (op == MLC_MAX || op == MLC_MIN) v.u = unsigned_of_width(dt, h);
        else v.u = h % 16;
        break;
    case LANE_FLOAT:
        if (op == MLC_PROD) v.f = prod_float[h % 8];
        else if (op == MLC_MAX || op == MLC_MIN) v.f = ((int)(h % 257) - 128) * 0.5;
        else if (op == MLC_AVG) v.f = float_avg_value(p, r, i, k);
        else v.f = (double)((int)(h % 17) - 8) + (((h >> 8) & 1) ? 0.5 : 0.0);
        break;
    }
    return v;
}

static mlc_tv_t combine(mlc_dtype_t dt, mlc_op_t op, mlc_tv_t a, mlc_tv_t b)
{
    mlc_tv_t v = a;
    switch (lane_of(dt)) {
    case LANE_SIGNED:
        if (op == MLC_PROD) v.i = a.i * b.i;
        else if (op == MLC_MAX) v.i = a.i > b.i ? a.i : b.i;
        else if (op == MLC_MIN) v.i = a.i < b.i ? a.i : b.i;
        else v.i = a.i + b.i;
        break;
    case LANE_UNSIGNED:
        if (op == MLC_PROD) v.u = a.u * b.u;
        else if (op == MLC_MAX) v.u = a.u > b.u ? a.u : b.u;
        else if (op == MLC_MIN) v.u = a.u < b.u ? a.u : b.u;
        else v.u = a.u + b.u;
        break;
    case LANE_FLOAT:
        if (op == MLC_PROD) v.f = a.f * b.f;
        else if (op == MLC_MAX) v.f = a.f > b.f ? a.f : b.f;
        else if (op == MLC_MIN) v.f = a.f < b.f ? a.f : b.f;
        else v.f = a.f + b.f;
        break;
    }
    return v;
}

/* The exact result at element i of reducing all p contributions with op. */
static mlc_tv_t expected(mlc_dtype_t dt, mlc_op_t op, int p, size_t i, const rank_keys_t *k)
{
    mlc_tv_t acc = value(dt, op, p, 0, i, k);
    for (int r = 1; r < p; r++) acc = combine(dt, op, acc, value(dt, op, p, r, i, k));
    if (op == MLC_AVG) {
        acc.i /= p; /* C division truncates toward zero, as MLC_AVG does */
        acc.u /= (uint64_t)p;
        acc.f /= p;
    }
    return acc;
}

uint16_t mlc_tv_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, bexp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (bexp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int32_t exp = (int32_t)bexp - 127 + 15;
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) { /* subnormal half (or zero) */
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into the exponent: right */
    return (uint16_t)(sign | h);
}

uint16_t mlc_tv_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void mlc_tv_store(mlc_dtype_t dt, void *buf, size_t i, mlc_tv_t v)
{
    switch (dt) {
    case MLC_INT8: ((int8_t *)buf)[i] = (int8_t)v.i; break;
    case MLC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v.u; break;
    case MLC_INT32: ((int32_t *)buf)[i] = (int32_t)v.i; break;
    case MLC_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v.u; break;
    case MLC_INT64: ((int64_t *)buf)[i] = v.i; break;
    case MLC_UINT64: ((uint64_t *)buf)[i] = v.u; break;
    case MLC_FLOAT16: ((uint16_t *)buf)[i] = mlc_tv_to_half((float)v.f); break;
    case MLC_BFLOAT16: ((uint16_t *)buf)[i] = mlc_tv_to_bf16((float)v.f); break;
    case MLC_FLOAT32: ((float *)buf)[i] = (float)v.f; break;
    case MLC_FLOAT64: ((double *)buf)[i] = v.f; break;
    default: break;
    }
}

void mlc_tv_fill(mlc_dtype_t dt, mlc_op_t op, int p, int r, uint32_t seed, void *buf,
                 size_t first, size_t count)
{
    rank_keys_t keys;
    keys_init(&keys, seed, p);
    for (size_t k = 0; k < count; k++) mlc_tv_store(dt, buf, k, value(dt, op, p, r, first + k, &keys));
}

void mlc_tv_fill_expected(mlc_dtype_t dt, mlc_op_t op, int p, uint32_t seed, void *buf,
                          size_t first, size_t count)
{
    rank_keys_t keys;
    keys_init(&keys, seed, p);
    for (size_t k = 0; k < count; k++) mlc_tv_store(dt, buf, k, expected(dt, op, p, first + k, &keys));
}
