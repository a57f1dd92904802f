/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reduction kernels of one instruction set. reduce.c includes this file
 * once per set, with MLC_KSFX naming the set (every name gets it as a
 * suffix) and, for sets other than the baseline, a `#pragma GCC target`
 * around the inclusion. The element operations (mlc_op_<dtype>_<op>) and
 * the type lists come from reduce.c.
 *
 * Each (dtype, op) has three shapes, so no kernel ever sees aliased
 * restrict pointers:
 *   io(x, y):    y = x (op) y      (x is the left operand: lower rank)
 *   oi(x, y):    y = y (op) x
 *   k3(a, b, o): o = a (op) b      (o distinct from a and b)
 * fp16 / bf16 are widened to fp32 in chunks, combined with the fp32 kernel
 * and rounded once.
 */
#ifndef MLC_KSFX
#error "define MLC_KSFX before including reduce_kernels.h"
#endif

#ifndef MLC_REDUCE_KERNELS_MACROS
#define MLC_REDUCE_KERNELS_MACROS
#define MLC_KCAT2(a, b) a##_##b
#define MLC_KCAT(a, b) MLC_KCAT2(a, b)
#define MLC_KSTR2(a) #a
#define MLC_KSTR(a) MLC_KSTR2(a)
/* name -> name_<set> */
#define MLC_K(name) MLC_KCAT(name, MLC_KSFX)

#define MLC_GEN_SHAPES(NAME, T, EXPR)                                                   \
    static void MLC_K(mlc_io_##NAME)(const void *vx, void *vy, size_t n)                \
    {                                                                                   \
        const T *restrict x = vx;                                                       \
        T *restrict y = vy;                                                             \
        for (size_t i = 0; i < n; i++) y[i] = EXPR(x[i], y[i]);                         \
    }                                                                                   \
    static void MLC_K(mlc_oi_##NAME)(const void *vx, void *vy, size_t n)                \
    {                                                                                   \
        const T *restrict x = vx;                                                       \
        T *restrict y = vy;                                                             \
        for (size_t i = 0; i < n; i++) y[i] = EXPR(y[i], x[i]);                         \
    }                                                                                   \
    static void MLC_K(mlc_k3_##NAME)(const void *va, const void *vb, void *vo, size_t n) \
    {                                                                                   \
        const T *restrict a = va;                                                       \
        const T *restrict b = vb;                                                       \
        T *restrict o = vo;                                                             \
        for (size_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[i]);                         \
    }

#define MLC_KGEN_INT(E, T, U, W, OP) MLC_GEN_SHAPES(E##_##OP, T, mlc_op_##E##_##OP)
#define MLC_KGEN_FLOAT(E, T, OP) MLC_GEN_SHAPES(E##_##OP, T, mlc_op_##E##_##OP)

/* Widen a chunk of both operands, combine in fp32, narrow once. A chunk is
 * read completely before it is written, so o may alias a or b. */
#define MLC_KGEN_HALF(E, TO_F, FROM_F, OP)                                                    \
    static void MLC_K(mlc_k3_##E##_##OP)(const void *va, const void *vb, void *vo, size_t n) \
    {                                                                                         \
        const uint16_t *a = va, *b = vb;                                                      \
        uint16_t *o = vo;                                                                     \
        alignas(64) float fa[MLC_HALF_CHUNK];                                                 \
        alignas(64) float fb[MLC_HALF_CHUNK];                                                 \
        for (size_t off = 0; off < n; off += MLC_HALF_CHUNK) {                                \
            size_t m = n - off < MLC_HALF_CHUNK ? n - off : MLC_HALF_CHUNK;                   \
            MLC_K(TO_F##_n)(a + off, fa, m);                                                  \
            MLC_K(TO_F##_n)(b + off, fb, m);                                                  \
            MLC_K(mlc_io_MLC_FLOAT32_##OP)(fa, fb, m);                                        \
            MLC_K(FROM_F##_n)(fb, o + off, m);                                                \
        }                                                                                     \
    }                                                                                         \
    static void MLC_K(mlc_io_##E##_##OP)(const void *x, void *y, size_t n)                    \
    {                                                                                         \
        MLC_K(mlc_k3_##E##_##OP)(x, y, y, n);                                                 \
    }                                                                                         \
    static void MLC_K(mlc_oi_##E##_##OP)(const void *x, void *y, size_t n)                    \
    {                                                                                         \
        MLC_K(mlc_k3_##E##_##OP)(y, x, y, n);                                                 \
    }

#define MLC_KGEN_OP(OP, str)                \
    MLC_INT_TYPES(MLC_KGEN_INT, OP)         \
    MLC_FLOAT_TYPES(MLC_KGEN_FLOAT, OP)     \
    MLC_HALF_TYPES(MLC_KGEN_HALF, OP)

/* avg's division pass: integers divide in a wide type (p may exceed T's range). */
#define MLC_KGEN_DIV_INT(E, T, U, W, OP)                                        \
    static void MLC_K(mlc_div_##E)(void *vbuf, size_t n, int p)                 \
    {                                                                           \
        T *restrict buf = vbuf;                                                 \
        for (size_t i = 0; i < n; i++) buf[i] = (T)((W)buf[i] / (W)p);          \
    }
#define MLC_KGEN_DIV_FLOAT(E, T, OP)                                            \
    static void MLC_K(mlc_div_##E)(void *vbuf, size_t n, int p)                 \
    {                                                                           \
        T *restrict buf = vbuf;                                                 \
        const T d = (T)p;                                                       \
        for (size_t i = 0; i < n; i++) buf[i] = buf[i] / d;                     \
    }
#define MLC_KGEN_DIV_HALF(E, TO_F, FROM_F, OP)                                  \
    static void MLC_K(mlc_div_##E)(void *vbuf, size_t n, int p)                 \
    {                                                                           \
        uint16_t *buf = vbuf;                                                   \
        const float d = (float)p;                                               \
        alignas(64) float f[MLC_HALF_CHUNK];                                    \
        for (size_t off = 0; off < n; off += MLC_HALF_CHUNK) {                  \
            size_t m = n - off < MLC_HALF_CHUNK ? n - off : MLC_HALF_CHUNK;     \
            MLC_K(TO_F##_n)(buf + off, f, m);                                   \
            for (size_t i = 0; i < m; i++) f[i] = f[i] / d;                     \
            MLC_K(FROM_F##_n)(f, buf + off, m);                                 \
        }                                                                       \
    }

/* The dispatch table rows. */
#define MLC_KROW(E, OP) \
    [E][OP] = {MLC_K(mlc_io_##E##_##OP), MLC_K(mlc_oi_##E##_##OP), MLC_K(mlc_k3_##E##_##OP)},
#define MLC_KROW_INT(E, T, U, W, OP) MLC_KROW(E, OP)
#define MLC_KROW_FLOAT(E, T, OP) MLC_KROW(E, OP)
#define MLC_KROW_HALF(E, TO_F, FROM_F, OP) MLC_KROW(E, OP)
#define MLC_KROWS_OP(OP, str)                \
    MLC_INT_TYPES(MLC_KROW_INT, OP)          \
    MLC_FLOAT_TYPES(MLC_KROW_FLOAT, OP)      \
    MLC_HALF_TYPES(MLC_KROW_HALF, OP)
#define MLC_KDIV_ROW(E, ...) [E] = MLC_K(mlc_div_##E),
#endif /* MLC_REDUCE_KERNELS_MACROS */

/* ---- 16-bit float <-> fp32 array conversions -------------------------------- */
static void MLC_K(mlc_half_to_float_inline_n)(const uint16_t *restrict h, float *restrict f,
                                               size_t n)
{
    size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    /* vcvtph2ps: exact, and not affected by MXCSR.DAZ */
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
#endif
    for (; i < n; i++) f[i] = mlc_half_to_float_inline(h[i]);
}

static void MLC_K(mlc_float_to_half_inline_n)(const float *restrict f, uint16_t *restrict h,
                                               size_t n)
{
    size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    /* vcvtps2ph, round to nearest even: the same results as the software
     * conversion (NaN made quiet keeping its top payload bits) */
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(f + i),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) h[i] = mlc_float_to_half_inline(f[i]);
}

static void MLC_K(mlc_bf16_to_float_inline_n)(const uint16_t *restrict h, float *restrict f,
                                               size_t n)
{
    for (size_t i = 0; i < n; i++) f[i] = mlc_bf16_to_float_inline(h[i]);
}

static void MLC_K(mlc_float_to_bf16_inline_n)(const float *restrict f, uint16_t *restrict h,
                                               size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] = mlc_float_to_bf16_inline(f[i]);
}

/* ---- the kernels and their table ---------------------------------------------- */
MLC_OP_LIST(MLC_KGEN_OP)
MLC_INT_TYPES(MLC_KGEN_DIV_INT, _)
MLC_FLOAT_TYPES(MLC_KGEN_DIV_FLOAT, _)
MLC_HALF_TYPES(MLC_KGEN_DIV_HALF, _)

static const mlc_kernel_set_t MLC_K(mlc_kernel_set) = {
    .isa = MLC_KSTR(MLC_KSFX),
    .k = {MLC_OP_LIST(MLC_KROWS_OP)},
    .divide = {MLC_INT_TYPES(MLC_KDIV_ROW, _) MLC_FLOAT_TYPES(MLC_KDIV_ROW, _)
                   MLC_HALF_TYPES(MLC_KDIV_ROW, _)},
};
