/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Local reduction: one tight loop per dtype x op x call shape, generated
 * (reduce_kernels.h) from the op list (MLC_OP_LIST) and the type lists
 * below, written for the vectorizer (restrict pointers, branch-free bodies;
 * the library is built with -O3), once per instruction set. Integer sum and
 * prod wrap in the unsigned type; fp16/bf16 are computed in fp32 and
 * rounded once. This file holds the element operations, the dispatch, the
 * aliasing rules of apply/apply3 and mlc_reduce_local.
 */
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A second kernel set for x86-64-v3 (AVX2, F16C), chosen at run time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define MLC_HAVE_ISA_V3 1
#include <immintrin.h>
#else
#define MLC_HAVE_ISA_V3 0
#endif

/*
 * The kernels compute every candidate and select (NaN and zero cases of
 * max/min, the ranges of the fp16 conversion). Under the default
 * -ftrapping-math GCC will not execute a floating-point operation that the
 * source made conditional, and gives up on vectorizing. Results are
 * identical either way (this only concerns exception flags), so relax it
 * here. Nothing reassociates, and contraction (FMA in the x86-64-v3 set)
 * stays off, so every set gives the same bits.
 */
#pragma GCC optimize("no-trapping-math", "fp-contract=off")

#include "dtype.h"
#include "error.h"
#include "half.h"
#include "op_failure.h"
#include "reduce_impl.h"

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
typedef struct mlc_kernel_set {
    const char *isa;
    mlc_kernel_t k[MLC_DTYPE_COUNT][MLC_OP_BUILTIN_COUNT];
    void (*divide[MLC_DTYPE_COUNT])(void *buf, size_t n, int p);
} mlc_kernel_set_t;

/* The element operations, shared by every instruction set (inlined). */
#define MLC_GEN_ELEM_INT(E, T, U, W, OP) \
    static inline T mlc_op_##E##_##OP(T a, T b) { return (T)MLC_IOP_##OP(U, a, b); }
#define MLC_GEN_ELEM_FLOAT(E, T, OP) \
    static inline T mlc_op_##E##_##OP(T a, T b) { return MLC_FOP_##OP(T, a, b); }
#define MLC_GEN_ELEM_OP(OP, str)               \
    MLC_INT_TYPES(MLC_GEN_ELEM_INT, OP)        \
    MLC_FLOAT_TYPES(MLC_GEN_ELEM_FLOAT, OP)
MLC_OP_LIST(MLC_GEN_ELEM_OP)

/* Elements per chunk when 16-bit floats are widened to fp32 on the stack. */
#define MLC_HALF_CHUNK 512

/* The kernels, once per instruction set. */
#define MLC_KSFX base
#include "reduce_kernels.h"
#undef MLC_KSFX
#if MLC_HAVE_ISA_V3
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define MLC_KSFX v3
#include "reduce_kernels.h"
#undef MLC_KSFX
#pragma GCC pop_options
#endif

/* Every set compiled in, best first; the first one the CPU runs is used. */
static const mlc_kernel_set_t *const mlc_kernel_sets[] = {
#if MLC_HAVE_ISA_V3
    &mlc_kernel_set_v3,
#endif
    &mlc_kernel_set_base,
};
#define MLC_NSETS (sizeof mlc_kernel_sets / sizeof mlc_kernel_sets[0])

static bool mlc_isa_runs(const mlc_kernel_set_t *ks)
{
#if MLC_HAVE_ISA_V3
    if (ks == &mlc_kernel_set_v3) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("x86-64-v3");
    }
#endif
    return ks == &mlc_kernel_set_base;
}

static _Atomic(const mlc_kernel_set_t *) mlc_kset;

static const mlc_kernel_set_t *mlc_kernels(void)
{
    const mlc_kernel_set_t *ks = atomic_load_explicit(&mlc_kset, memory_order_acquire);
    if (ks == NULL) { /* racing threads pick the same set */
        for (size_t i = 0; i < MLC_NSETS && ks == NULL; i++)
            if (mlc_isa_runs(mlc_kernel_sets[i])) ks = mlc_kernel_sets[i];
        atomic_store_explicit(&mlc_kset, ks, memory_order_release);
    }
    return ks;
}

const char *mlc_reduce_isa(void) { return mlc_kernels()->isa; }

bool mlc_reduce_use_isa(const char *name)
{
    if (name == NULL) {
        atomic_store(&mlc_kset, NULL);
        mlc_kernels();
        return true;
    }
    for (size_t i = 0; i < MLC_NSETS; i++) {
        if (strcmp(mlc_kernel_sets[i]->isa, name) == 0 && mlc_isa_runs(mlc_kernel_sets[i])) {
            atomic_store(&mlc_kset, mlc_kernel_sets[i]);
            return true;
        }
    }
    return false;
}

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
            mlc_user_fn_call(fn, tmp, p + off * esize, m, dtype, ctx);
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
        mlc_user_fn_call(fn, tmp, po + off * esize, m, dtype, ctx);
    }
}

static const mlc_kernel_t *mlc_kernel_for(mlc_dtype_t dtype, mlc_op_t op)
{
    if (dtype < 0 || dtype >= MLC_DTYPE_COUNT || op < 0 || op >= MLC_OP_BUILTIN_COUNT) return NULL;
    return &mlc_kernels()->k[dtype][op];
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
        mlc_user_fn_call(fn, in, inout, count, dtype, ctx);
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
        mlc_user_fn_call(fn, a, out, count, dtype, ctx);
    }
}

void mlc_reduce_divide(void *buf, size_t count, mlc_dtype_t dtype, int p)
{
    if (p <= 1 || count == 0 || dtype < 0 || dtype >= MLC_DTYPE_COUNT)
        return; /* records: a user op's average is the user's business */
    mlc_kernels()->divide[dtype](buf, count, p);
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
    if (st != MLC_SUCCESS) return mlc_error_in("mlc_reduce_local", st);
    if (count == 0) return MLC_SUCCESS;
    if (in == NULL)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_reduce_local: in is NULL with count %zu", count);
    if (inout == NULL)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_reduce_local: inout is NULL with count %zu",
                         count);
    size_t esize = mlc_dtype_size(dtype);
    if (count > (size_t)PTRDIFF_MAX / esize)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "mlc_reduce_local: count %zu of %zu-byte elements overflows the largest "
                         "possible buffer (PTRDIFF_MAX bytes)",
                         count, esize);
    uintptr_t pi = (uintptr_t)in, po = (uintptr_t)inout, bytes = count * esize;
    if (pi != po && pi < po + bytes && po < pi + bytes)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "mlc_reduce_local: in [%p, +%zu) and inout [%p, +%zu) overlap without "
                         "being the same buffer",
                         in, (size_t)bytes, inout, (size_t)bytes);
    mlc_op_scope_t scope = {0};
    mlc_op_scope_enter(&scope);
    mlc_reduce_apply(in, inout, count, dtype, op);
    mlc_op_scope_leave(&scope);
    if (scope.failed) return mlc_error(MLC_ERR_USER_OP, "mlc_reduce_local: the user op failed: %s", scope.why);
    return MLC_SUCCESS;
}
