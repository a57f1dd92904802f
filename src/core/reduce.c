/*
 * Local reduction kernels: one tight loop per dtype x op, generated from the
 * op list (MLC_OP_LIST) and the type lists below, written for the vectorizer
 * (restrict pointers, branch-free bodies; the library is built with -O3).
 *
 * Each (dtype, op) has three shapes, so no kernel ever sees aliased
 * restrict pointers:
 *   io(x, y):    y = x (op) y      (x is the left operand: lower rank)
 *   oi(x, y):    y = y (op) x
 *   k3(a, b, o): o = a (op) b      (o distinct from a and b)
 * fp16 / bf16 are converted to fp32 in chunks, combined with the fp32
 * kernel and rounded once; integer sum/prod wrap in the unsigned type.
 */
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

/*
 * The kernels compute every candidate and select (NaN and zero cases of
 * max/min, the ranges of the fp16 conversion). Under the default
 * -ftrapping-math GCC will not execute a floating-point operation that the
 * source made conditional, and gives up on vectorizing. Results are
 * identical either way (this only concerns exception flags), so relax it
 * here; nothing reassociates or contracts.
 */
#pragma GCC optimize("no-trapping-math")

#include "dtype.h"
#include "error.h"
#include "half.h"
#include "op_user.h"

/* Integer dtypes: X(enumerator, type, unsigned type, type avg divides in, OP) */
#define MLC_INT_TYPES(X, OP)                           \
    X(MLC_INT8, int8_t, uint8_t, int64_t, OP)          \
    X(MLC_UINT8, uint8_t, uint8_t, uint64_t, OP)       \
    X(MLC_INT32, int32_t, uint32_t, int64_t, OP)       \
    X(MLC_UINT32, uint32_t, uint32_t, uint64_t, OP)    \
    X(MLC_INT64, int64_t, uint64_t, int64_t, OP)       \
    X(MLC_UINT64, uint64_t, uint64_t, uint64_t, OP)
/* Floating dtypes computed natively: X(enumerator, type, OP) */
#define MLC_FLOAT_TYPES(X, OP) \
    X(MLC_FLOAT32, float, OP)  \
    X(MLC_FLOAT64, double, OP)
/* 16-bit floats computed in fp32: X(enumerator, to-float, from-float, OP) */
#define MLC_HALF_TYPES(X, OP)                                                  \
    X(MLC_FLOAT16, mlc_half_to_float_inline, mlc_float_to_half_inline, OP)     \
    X(MLC_BFLOAT16, mlc_bf16_to_float_inline, mlc_float_to_bf16_inline, OP)

/* Integer ops. Sum and prod are done in unsigned arithmetic (1u * promotes
 * narrow types to unsigned int), so overflow wraps instead of being UB. */
#define MLC_IOP_MLC_SUM(U, a, b) ((U)(1u * (U)(a) + (U)(b)))
#define MLC_IOP_MLC_PROD(U, a, b) ((U)(1u * (U)(a) * (U)(b)))
#define MLC_IOP_MLC_MAX(U, a, b) ((a) > (b) ? (a) : (b))
#define MLC_IOP_MLC_MIN(U, a, b) ((a) < (b) ? (a) : (b))
#define MLC_IOP_MLC_AVG MLC_IOP_MLC_SUM /* the division is a separate pass */

/* Floating ops. */
#define MLC_FOP_MLC_SUM(T, a, b) ((a) + (b))
#define MLC_FOP_MLC_PROD(T, a, b) ((a) * (b))
#define MLC_FOP_MLC_MAX(T, a, b) mlc_fmax_##T(a, b)
#define MLC_FOP_MLC_MIN(T, a, b) mlc_fmin_##T(a, b)
#define MLC_FOP_MLC_AVG MLC_FOP_MLC_SUM

/*
 * max/min as fmax/fmin (a NaN operand loses to a number; NaN only if both
 * are NaN, then the left one) but deterministic where fmax is not: the
 * signed zeros order as -0 < +0. Selects only, so loops vectorize.
 */
#define MLC_GEN_FMINMAX(T)                                                      \
    static inline T mlc_fmax_##T(T a, T b)                                      \
    {                                                                           \
        T zeros = a + b; /* max of two zeros: +0 unless both are -0 */          \
        T r = a > b ? a : b;                                                    \
        r = ((a == b) & (a == 0)) ? zeros : r;                                  \
        return b != b ? a : r;                                                  \
    }                                                                           \
    static inline T mlc_fmin_##T(T a, T b)                                      \
    {                                                                           \
        T zeros = -(-a + -b); /* min of two zeros: -0 unless both are +0 */     \
        T r = a < b ? a : b;                                                    \
        r = ((a == b) & (a == 0)) ? zeros : r;                                  \
        return b != b ? a : r;                                                  \
    }
MLC_GEN_FMINMAX(float)
MLC_GEN_FMINMAX(double)

typedef void (*mlc_k2_fn)(const void *x, void *y, size_t n);
typedef void (*mlc_k3_fn)(const void *a, const void *b, void *o, size_t n);
typedef struct mlc_kernel {
    mlc_k2_fn io, oi;
    mlc_k3_fn k3;
} mlc_kernel_t;

/* The three shapes of one kernel, given the element expression EXPR(a, b). */
#define MLC_GEN_SHAPES(NAME, T, EXPR)                                              \
    static void mlc_io_##NAME(const void *vx, void *vy, size_t n)                  \
    {                                                                              \
        const T *restrict x = vx;                                                  \
        T *restrict y = vy;                                                        \
        for (size_t i = 0; i < n; i++) y[i] = EXPR(x[i], y[i]);                    \
    }                                                                              \
    static void mlc_oi_##NAME(const void *vx, void *vy, size_t n)                  \
    {                                                                              \
        const T *restrict x = vx;                                                  \
        T *restrict y = vy;                                                        \
        for (size_t i = 0; i < n; i++) y[i] = EXPR(y[i], x[i]);                    \
    }                                                                              \
    static void mlc_k3_##NAME(const void *va, const void *vb, void *vo, size_t n)  \
    {                                                                              \
        const T *restrict a = va;                                                  \
        const T *restrict b = vb;                                                  \
        T *restrict o = vo;                                                        \
        for (size_t i = 0; i < n; i++) o[i] = EXPR(a[i], b[i]);                    \
    }

#define MLC_GEN_INT(E, T, U, W, OP)                                   \
    static inline T mlc_op_##E##_##OP(T a, T b) { return (T)MLC_IOP_##OP(U, a, b); } \
    MLC_GEN_SHAPES(E##_##OP, T, mlc_op_##E##_##OP)
#define MLC_GEN_FLOAT(E, T, OP)                                                     \
    static inline T mlc_op_##E##_##OP(T a, T b) { return MLC_FOP_##OP(T, a, b); }  \
    MLC_GEN_SHAPES(E##_##OP, T, mlc_op_##E##_##OP)

/* Elements per chunk when 16-bit floats are widened to fp32 on the stack. */
#define MLC_HALF_CHUNK 512

/* Widen a chunk of both operands, combine with the fp32 kernel, narrow once.
 * A chunk is read completely before it is written: o may alias a or b. */
#define MLC_GEN_HALF(E, TO_F, FROM_F, OP)                                                  \
    static void mlc_k3_##E##_##OP(const void *va, const void *vb, void *vo, size_t n)      \
    {                                                                                      \
        const uint16_t *a = va, *b = vb;                                                   \
        uint16_t *o = vo;                                                                  \
        alignas(64) float fa[MLC_HALF_CHUNK];                                              \
        alignas(64) float fb[MLC_HALF_CHUNK];                                              \
        for (size_t off = 0; off < n; off += MLC_HALF_CHUNK) {                             \
            size_t m = n - off < MLC_HALF_CHUNK ? n - off : MLC_HALF_CHUNK;                \
            for (size_t i = 0; i < m; i++) fa[i] = TO_F(a[off + i]);                       \
            for (size_t i = 0; i < m; i++) fb[i] = TO_F(b[off + i]);                       \
            mlc_io_MLC_FLOAT32_##OP(fa, fb, m);                                            \
            for (size_t i = 0; i < m; i++) o[off + i] = FROM_F(fb[i]);                     \
        }                                                                                  \
    }                                                                                      \
    static void mlc_io_##E##_##OP(const void *x, void *y, size_t n) { mlc_k3_##E##_##OP(x, y, y, n); } \
    static void mlc_oi_##E##_##OP(const void *x, void *y, size_t n) { mlc_k3_##E##_##OP(y, x, y, n); }

#define MLC_GEN_OP(OP, str)                     \
    MLC_INT_TYPES(MLC_GEN_INT, OP)              \
    MLC_FLOAT_TYPES(MLC_GEN_FLOAT, OP)          \
    MLC_HALF_TYPES(MLC_GEN_HALF, OP)
MLC_OP_LIST(MLC_GEN_OP)

/* The dispatch table [dtype][op]. */
#define MLC_ROW_INT(E, T, U, W, OP) [E][OP] = {mlc_io_##E##_##OP, mlc_oi_##E##_##OP, mlc_k3_##E##_##OP},
#define MLC_ROW_FLOAT(E, T, OP) [E][OP] = {mlc_io_##E##_##OP, mlc_oi_##E##_##OP, mlc_k3_##E##_##OP},
#define MLC_ROW_HALF(E, TO_F, FROM_F, OP) \
    [E][OP] = {mlc_io_##E##_##OP, mlc_oi_##E##_##OP, mlc_k3_##E##_##OP},
#define MLC_ROWS_OP(OP, str)                   \
    MLC_INT_TYPES(MLC_ROW_INT, OP)             \
    MLC_FLOAT_TYPES(MLC_ROW_FLOAT, OP)         \
    MLC_HALF_TYPES(MLC_ROW_HALF, OP)
static const mlc_kernel_t mlc_kernels[MLC_DTYPE_COUNT][MLC_OP_BUILTIN_COUNT] = {
    MLC_OP_LIST(MLC_ROWS_OP)};

/* Scratch for the rare paths that must copy an operand first. It holds at
 * least one element of any dtype (records are at most 65535 bytes). */
#define MLC_SCRATCH_BYTES 65536

/* inout = inout (op) inout, through a copy (kernels take no aliased pointers). */
static __attribute__((noinline)) void mlc_apply_self(void *inout, size_t count, size_t esize,
                                                     const mlc_kernel_t *k, mlc_user_fn_t fn,
                                                     void *ctx, mlc_dtype_t dtype)
{
    alignas(64) unsigned char tmp[MLC_SCRATCH_BYTES];
    size_t per = MLC_SCRATCH_BYTES / esize;
    unsigned char *p = inout;
    for (size_t off = 0; off < count; off += per) {
        size_t m = count - off < per ? count - off : per;
        memcpy(tmp, p + off * esize, m * esize);
        if (k != NULL)
            k->io(tmp, p + off * esize, m);
        else
            fn(tmp, p + off * esize, m, dtype, ctx);
    }
}

/* User op, out = a (op) b with out == a != b: save a, put b in out, combine. */
static __attribute__((noinline)) void mlc_user_apply_left(const void *b, void *out, size_t count,
                                                          size_t esize, mlc_user_fn_t fn,
                                                          void *ctx, mlc_dtype_t dtype)
{
    alignas(64) unsigned char tmp[MLC_SCRATCH_BYTES];
    size_t per = MLC_SCRATCH_BYTES / esize;
    const unsigned char *pb = b;
    unsigned char *po = out;
    for (size_t off = 0; off < count; off += per) {
        size_t m = count - off < per ? count - off : per;
        memcpy(tmp, po + off * esize, m * esize);
        memcpy(po + off * esize, pb + off * esize, m * esize);
        fn(tmp, po + off * esize, m, dtype, ctx);
    }
}

static const mlc_kernel_t *mlc_kernel_for(mlc_dtype_t dtype, mlc_op_t op)
{
    if (dtype < 0 || dtype >= MLC_DTYPE_COUNT || op < 0 || op >= MLC_OP_BUILTIN_COUNT) return NULL;
    return &mlc_kernels[dtype][op];
}

void mlc_reduce_apply(const void *in, void *inout, size_t count, mlc_dtype_t dtype, mlc_op_t op)
{
    size_t esize = mlc_dtype_size(dtype);
    if (count == 0 || esize == 0) return;
    if (op >= 0 && op < MLC_OP_BUILTIN_COUNT) {
        const mlc_kernel_t *k = mlc_kernel_for(dtype, op);
        if (k == NULL) return; /* records take user ops only (core validated) */
        if (in == inout)
            mlc_apply_self(inout, count, esize, k, NULL, NULL, dtype);
        else
            k->io(in, inout, count);
        return;
    }
    mlc_user_fn_t fn;
    void *ctx;
    if (!mlc_op_user_lookup(op, &fn, &ctx)) return;
    if (in == inout)
        mlc_apply_self(inout, count, esize, NULL, fn, ctx, dtype);
    else
        fn(in, inout, count, dtype, ctx);
}

void mlc_reduce_apply3(const void *a, const void *b, void *out, size_t count, mlc_dtype_t dtype,
                       mlc_op_t op)
{
    size_t esize = mlc_dtype_size(dtype);
    if (count == 0 || esize == 0) return;
    if (out == b) { /* also covers a == b == out */
        mlc_reduce_apply(a, out, count, dtype, op);
        return;
    }
    if (op >= 0 && op < MLC_OP_BUILTIN_COUNT) {
        const mlc_kernel_t *k = mlc_kernel_for(dtype, op);
        if (k == NULL) return;
        if (out == a)
            k->oi(b, out, count);
        else
            k->k3(a, b, out, count); /* a == b is fine: both only read */
        return;
    }
    mlc_user_fn_t fn;
    void *ctx;
    if (!mlc_op_user_lookup(op, &fn, &ctx)) return;
    if (out == a) {
        mlc_user_apply_left(b, out, count, esize, fn, ctx, dtype);
    } else {
        memcpy(out, b, count * esize);
        fn(a, out, count, dtype, ctx);
    }
}

/* ---- avg: divide by p ---------------------------------------------------- */
#define MLC_GEN_DIV_INT(E, T, U, W, OP)                                       \
    static void mlc_div_##E(void *vbuf, size_t n, int p)                      \
    {                                                                         \
        T *restrict buf = vbuf;                                               \
        for (size_t i = 0; i < n; i++) buf[i] = (T)((W)buf[i] / (W)p);        \
    }
#define MLC_GEN_DIV_FLOAT(E, T, OP)                                           \
    static void mlc_div_##E(void *vbuf, size_t n, int p)                      \
    {                                                                         \
        T *restrict buf = vbuf;                                               \
        const T d = (T)p;                                                     \
        for (size_t i = 0; i < n; i++) buf[i] = buf[i] / d;                   \
    }
#define MLC_GEN_DIV_HALF(E, TO_F, FROM_F, OP)                                 \
    static void mlc_div_##E(void *vbuf, size_t n, int p)                      \
    {                                                                         \
        uint16_t *buf = vbuf;                                                 \
        const float d = (float)p;                                             \
        alignas(64) float f[MLC_HALF_CHUNK];                                  \
        for (size_t off = 0; off < n; off += MLC_HALF_CHUNK) {                \
            size_t m = n - off < MLC_HALF_CHUNK ? n - off : MLC_HALF_CHUNK;   \
            for (size_t i = 0; i < m; i++) f[i] = TO_F(buf[off + i]) / d;     \
            for (size_t i = 0; i < m; i++) buf[off + i] = FROM_F(f[i]);       \
        }                                                                     \
    }
MLC_INT_TYPES(MLC_GEN_DIV_INT, _)
MLC_FLOAT_TYPES(MLC_GEN_DIV_FLOAT, _)
MLC_HALF_TYPES(MLC_GEN_DIV_HALF, _)

void mlc_reduce_divide(void *buf, size_t count, mlc_dtype_t dtype, int p)
{
    if (p <= 1 || count == 0) return;
    switch (dtype) {
#define MLC_X_CASE(E, ...)           \
    case E:                          \
        mlc_div_##E(buf, count, p);  \
        break;
        MLC_INT_TYPES(MLC_X_CASE, _)
        MLC_FLOAT_TYPES(MLC_X_CASE, _)
        MLC_HALF_TYPES(MLC_X_CASE, _)
#undef MLC_X_CASE
    default:
        break; /* records: a user op's average is the user's business */
    }
}

/* ---- public pieces --------------------------------------------------------- */
float mlc_half_to_float(uint16_t h) { return mlc_half_to_float_inline(h); }
uint16_t mlc_float_to_half(float f) { return mlc_float_to_half_inline(f); }
float mlc_bf16_to_float(uint16_t h) { return mlc_bf16_to_float_inline(h); }
uint16_t mlc_float_to_bf16(float f) { return mlc_float_to_bf16_inline(f); }

mlc_status_t mlc_reduce_local(const void *in, void *inout, size_t count, mlc_dtype_t dtype,
                              mlc_op_t op)
{
    mlc_error_clear();
    mlc_status_t st = mlc_op_check(dtype, op);
    if (st != MLC_SUCCESS) return st;
    if (count == 0) return MLC_SUCCESS;
    if (in == NULL)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_reduce_local: in is NULL with count %zu", count);
    if (inout == NULL)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_reduce_local: inout is NULL with count %zu",
                         count);
    size_t esize = mlc_dtype_size(dtype);
    if (count > SIZE_MAX / esize)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "mlc_reduce_local: count %zu of %zu-byte elements overflows size_t",
                         count, esize);
    uintptr_t pi = (uintptr_t)in, po = (uintptr_t)inout, bytes = count * esize;
    if (pi != po && pi < po + bytes && po < pi + bytes)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "mlc_reduce_local: in [%p, +%zu) and inout [%p, +%zu) overlap without "
                         "being the same buffer",
                         in, (size_t)bytes, inout, (size_t)bytes);
    mlc_reduce_apply(in, inout, count, dtype, op);
    return MLC_SUCCESS;
}
