/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fp16 / bf16 <-> fp32 conversions, private to the reduction kernels.
 * Branch-free (every candidate is computed, then selected) so that loops
 * over arrays vectorize. Round to nearest, ties to even; NaN stays NaN
 * (quiet, sign and top payload bits kept); Inf, zeros and subnormals exact.
 * No floating-point input is ever subnormal, so results do not change when
 * a program runs with flush-to-zero / denormals-are-zero set.
 */
#ifndef MLC_BASE_HALF_H
#define MLC_BASE_HALF_H
#include <stdint.h>
#include <string.h>

static inline uint32_t mlc_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float mlc_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float mlc_half_to_float_inline(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu; /* exponent and mantissa */
    uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
    uint32_t infnan = (em << 13) | 0x7f800000u;
    /* subnormal (and zero): em * 2^-24, exact; the result is a normal float */
    uint32_t subnormal = mlc_f2u((float)(int32_t)em * 0x1p-24f);
    uint32_t bits = em >= 0x7c00u ? infnan : em >= 0x0400u ? normal : subnormal;
    return mlc_u2f(bits | sign);
}

static inline uint16_t mlc_float_to_half_inline(float f)
{
    uint32_t x = mlc_f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    /* normal half: rebias the exponent, round the 13 dropped bits to even
     * (a carry into the exponent is the right answer, up to Inf) */
    uint32_t normal = (a - ((uint32_t)(127 - 15) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    /* below 2^-14: adding 0.5 leaves an ulp of 2^-24 (the half subnormal
     * step), so the hardware rounds to nearest even for us */
    uint32_t subnormal = mlc_f2u(mlc_u2f(a) + 0.5f) - 0x3f000000u;
    uint32_t r = a > 0x7f800000u    ? nan
                 : a >= 0x477ff000u ? 0x7c00u /* >= 65520 rounds to Inf */
                 : a >= 0x38800000u ? normal
                                    : subnormal;
    return (uint16_t)(r | sign);
}

static inline float mlc_bf16_to_float_inline(uint16_t h) { return mlc_u2f((uint32_t)h << 16); }

static inline uint16_t mlc_float_to_bf16_inline(float f)
{
    uint32_t x = mlc_f2u(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x40u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}
#endif
