/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inputs and the reference: what every member contributes and what an exact
 * reduction of it is, computed here without the library.
 *
 * Integers take any value of their type and wrap as two's complement (sum,
 * prod, avg = wrapped sum / p truncated toward zero). Floats take small
 * integers, halves or powers of two, so every partial result is exact in the
 * dtype (fp16 and bf16 included) and the result does not depend on the order
 * of the reduction: results compare bitwise. For float avg the last member's
 * value makes the sum a multiple of p. User ops: a bytewise xor
 * (commutative, any dtype) and affine-map composition on 8-byte records
 * (non-commutative: applied in rank order).
 */
#include <string.h>
#include "diff.h"
#include "testdata.h"

mlc_op_t diff_user_op[2];

static void xor_fn(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    const unsigned char *a = in;
    unsigned char *b = inout;
    size_t n = count * mlc_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) b[i] ^= a[i];
}

typedef struct affine {
    uint32_t a, b;
} affine_t;

/* Apply lo first, then hi. */
static affine_t compose(affine_t lo, affine_t hi) { return (affine_t){hi.a * lo.a, hi.a * lo.b + hi.b}; }

static void affine_fn(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    const affine_t *a = in;
    affine_t *b = inout;
    for (size_t i = 0; i < count; i++) b[i] = compose(a[i], b[i]);
}

int diff_create_user_ops(void)
{
    if (mlc_op_create(xor_fn, 1, NULL, &diff_user_op[0]) != MLC_SUCCESS) return 1;
    if (mlc_op_create(affine_fn, 0, NULL, &diff_user_op[1]) != MLC_SUCCESS) return 1;
    return 0;
}

void diff_free_user_ops(void)
{
    mlc_op_free(diff_user_op[0]);
    mlc_op_free(diff_user_op[1]);
}

mlc_op_t diff_mlc_op(int rop) { return rop == R_XOR ? diff_user_op[0] : rop == R_AFFINE ? diff_user_op[1] : rop; }

void diff_fill_bytes(const diff_op_t *op, int w, uint64_t part, size_t first, size_t n, void *buf)
{
    size_t es = mlc_dtype_size(op->dtype);
    unsigned char *p = buf;
    for (size_t e = 0; e < n; e++) {
        for (size_t off = 0; off < es; off += 8) {
            uint64_t x = diff_hash3(op->h ^ (part * 0x100000001b3ull), (uint64_t)w, (first + e) * 64 + off / 8);
            size_t k = es - off < 8 ? es - off : 8;
            for (size_t b = 0; b < k; b++) p[e * es + off + b] = (unsigned char)(x >> (8 * b));
        }
    }
}

static unsigned width_of(mlc_dtype_t dt) { return (unsigned)mlc_dtype_size(dt) * 8; }

/* Keep the low `bits` bits: unsigned, or sign-extended. */
static uint64_t trunc_u(uint64_t x, unsigned bits) { return bits == 64 ? x : x & ((1ull << bits) - 1); }
static int64_t trunc_s(uint64_t x, unsigned bits)
{
    if (bits == 64) return (int64_t)x;
    uint64_t m = 1ull << (bits - 1);
    x = trunc_u(x, bits);
    return (int64_t)((x ^ m) - m);
}

typedef struct lv {
    uint64_t u; /* integers: the bits (sign-extended for signed types) */
    double f;
} lv_t;

static double small_float(uint64_t x, int op)
{
    static const double prod[16] = {1, -1, 2, -2, 0.5, -0.5, 1, -1, 2, 0.5, -2, 1, -0.5, 1, -1, 0};
    if (op == MLC_PROD) return prod[x % 16];
    if (op == MLC_MAX || op == MLC_MIN) return ((double)(x % 257) - 128) * 0.5;
    if (op == MLC_AVG) return (double)(x % 17) - 8;
    return ((double)(x % 33) - 16) * 0.5; /* sum */
}

static lv_t contrib(const diff_op_t *op, const diff_comm_t *c, int m, size_t gi)
{
    lv_t v = {0, 0};
    uint64_t x = diff_hash3(op->h, (uint64_t)c->world[m], gi);
    unsigned bits = width_of(op->dtype);
    switch (lane_of(op->dtype)) {
    case LANE_SIGNED:
    case LANE_UNSIGNED:
        if (op->rop == MLC_PROD && (x >> 62) != 0) x |= 1; /* mostly odd: products stay non-zero */
        v.u = lane_of(op->dtype) == LANE_SIGNED ? (uint64_t)trunc_s(x, bits) : trunc_u(x, bits);
        break;
    case LANE_FLOAT:
        v.f = small_float(x, op->rop);
        if (op->rop == MLC_AVG && m == c->size - 1) { /* make the sum a multiple of p */
            long long sum = 0, p = c->size;
            for (int q = 0; q < c->size - 1; q++) sum += (long long)small_float(diff_hash3(op->h, (uint64_t)c->world[q], gi), MLC_AVG);
            v.f = (double)((((-sum) % p) + p) % p + p * (long long)(x % 5) - 2 * p);
        }
        break;
    }
    return v;
}

static lv_t combine(const diff_op_t *op, lv_t a, lv_t b)
{
    unsigned bits = width_of(op->dtype);
    lv_t v = a;
    switch (lane_of(op->dtype)) {
    case LANE_SIGNED: {
        int64_t x = (int64_t)a.u, y = (int64_t)b.u;
        if (op->rop == MLC_MAX) v.u = (uint64_t)(x > y ? x : y);
        else if (op->rop == MLC_MIN) v.u = (uint64_t)(x < y ? x : y);
        else if (op->rop == MLC_PROD) v.u = (uint64_t)trunc_s(a.u * b.u, bits);
        else v.u = (uint64_t)trunc_s(a.u + b.u, bits);
        break;
    }
    case LANE_UNSIGNED:
        if (op->rop == MLC_MAX) v.u = a.u > b.u ? a.u : b.u;
        else if (op->rop == MLC_MIN) v.u = a.u < b.u ? a.u : b.u;
        else if (op->rop == MLC_PROD) v.u = trunc_u(a.u * b.u, bits);
        else v.u = trunc_u(a.u + b.u, bits);
        break;
    case LANE_FLOAT:
        if (op->rop == MLC_MAX) v.f = a.f > b.f ? a.f : b.f;
        else if (op->rop == MLC_MIN) v.f = a.f < b.f ? a.f : b.f;
        else if (op->rop == MLC_PROD) v.f = a.f * b.f;
        else v.f = a.f + b.f;
        break;
    }
    return v;
}

/* Integers carry their bits in u (sign-extended), which mlc_tv_store
 * truncates the same way whether it takes them as signed or unsigned. */
static void store(mlc_dtype_t dt, void *buf, size_t i, lv_t v)
{
    mlc_tv_store(dt, buf, i, (mlc_tv_t){(int64_t)v.u, v.u, v.f});
}

static affine_t affine_of(const diff_op_t *op, int w, size_t gi)
{
    uint64_t x = diff_hash3(op->h, (uint64_t)w, gi);
    return (affine_t){(uint32_t)x | 1u, (uint32_t)(x >> 32)};
}

void diff_fill_contrib(const diff_op_t *op, const diff_comm_t *c, int m, size_t first, size_t n, void *buf)
{
    if (op->rop == R_XOR) {
        diff_fill_bytes(op, c->world[m], 0, first, n, buf);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (op->rop == R_AFFINE) ((affine_t *)buf)[k] = affine_of(op, c->world[m], first + k);
        else store(op->dtype, buf, k, contrib(op, c, m, first + k));
    }
}

void diff_fill_reduced(const diff_op_t *op, const diff_comm_t *c, size_t first, size_t n, void *buf)
{
    size_t es = mlc_dtype_size(op->dtype);
    if (op->rop == R_XOR) {
        unsigned char tmp[4096];
        memset(buf, 0, n * es);
        for (int m = 0; m < c->size; m++)
            for (size_t k = 0; k < n; k += sizeof tmp / es) {
                size_t take = n - k < sizeof tmp / es ? n - k : sizeof tmp / es;
                diff_fill_bytes(op, c->world[m], 0, first + k, take, tmp);
                for (size_t b = 0; b < take * es; b++) ((unsigned char *)buf)[k * es + b] ^= tmp[b];
            }
        return;
    }
    for (size_t k = 0; k < n; k++) {
        size_t gi = first + k;
        if (op->rop == R_AFFINE) {
            affine_t acc = affine_of(op, c->world[0], gi);
            for (int m = 1; m < c->size; m++) acc = compose(acc, affine_of(op, c->world[m], gi));
            ((affine_t *)buf)[k] = acc;
            continue;
        }
        lv_t acc = contrib(op, c, 0, gi);
        for (int m = 1; m < c->size; m++) acc = combine(op, acc, contrib(op, c, m, gi));
        if (op->rop == MLC_AVG) {
            if (lane_of(op->dtype) == LANE_SIGNED) acc.u = (uint64_t)((int64_t)acc.u / c->size);
            else acc.u /= (uint64_t)c->size;
            acc.f /= c->size;
        }
        store(op->dtype, buf, k, acc);
    }
}
