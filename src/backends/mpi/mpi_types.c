/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm dtypes and ops as MPI datatypes and MPI_Ops.
 *
 * MPI has the integer and float types and sum/prod/max/min. What it lacks
 * (float16, bfloat16, records, user ops) is reduced by two user-defined
 * MPI_Ops (commutative or not) whose function calls mlc_reduce_apply. MPI
 * hands that function only the datatype, so each (dtype, op) pair gets its
 * own datatype (a contiguous run of esize bytes), and the function looks the
 * pair up by datatype handle: no MPI call inside the reduction function.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_impl.h"

mlc_mpi_limits_t mlc_mpi_limits = {INT_MAX, INT_MAX, true};

void mlc_mpi_set_limits(size_t count, size_t displ, int large_count_calls)
{
    mlc_mpi_limits.count = count >= 1 && count <= INT_MAX ? count : INT_MAX;
    mlc_mpi_limits.displ = displ >= 1 && displ <= INT_MAX ? displ : INT_MAX;
    mlc_mpi_limits.large_count_calls = large_count_calls != 0;
}

/* ---- element types ----------------------------------------------------------- */

/* MPI type per mlcomm dtype, in MLC_DTYPE_LIST order; fp16/bf16 are module
 * types (2 contiguous bytes), created by mlc_mpi_types_start. */
static MPI_Datatype dtype_types[MLC_DTYPE_COUNT];

/* MPI's own op agrees with mlcomm's kernel on (dtype, op), checked once at
 * start: MPICH 4.0's unsigned max and min compare as signed. */
static bool native_ok[MLC_DTYPE_COUNT][MLC_OP_BUILTIN_COUNT];
static const MPI_Op *const native_ops[MLC_OP_BUILTIN_COUNT] = {
    [MLC_SUM] = &(const MPI_Op){MPI_SUM}, [MLC_PROD] = &(const MPI_Op){MPI_PROD},
    [MLC_MAX] = &(const MPI_Op){MPI_MAX}, [MLC_MIN] = &(const MPI_Op){MPI_MIN},
    [MLC_AVG] = &(const MPI_Op){MPI_SUM}};

/* ---- keyed reduction types ------------------------------------------------------ */

#define MLC_MPI_KEYED_MAX 512

typedef struct keyed_type {
    MPI_Datatype type;
    mlc_dtype_t dtype;
    mlc_op_t op;
} keyed_type_t;

/* Append-only: entries are written before `nkeyed` publishes them, so the
 * reduction function reads without a lock. */
static keyed_type_t keyed[MLC_MPI_KEYED_MAX];
static atomic_int nkeyed;
static pthread_mutex_t keyed_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Op user_op_commute, user_op_ordered;
/* The agreement after a user op's collective (mpi_op.c): the entry of the
 * highest rank whose op failed wins. */
static MPI_Op verdict_op;
static MPI_Datatype verdict_type;

static void verdict_pick(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const mlc_mpi_verdict_t *a = in;
    mlc_mpi_verdict_t *b = inout;
    for (int i = 0; i < *len; i++)
        if (a[i].rank1 > b[i].rank1) b[i] = a[i];
}

MPI_Op mlc_mpi_verdict_op(void) { return verdict_op; }
MPI_Datatype mlc_mpi_verdict_type(void) { return verdict_type; }

static void keyed_reduce(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int n = atomic_load_explicit(&nkeyed, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (keyed[i].type == *dt) {
            mlc_core->reduce_apply(in, inout, (size_t)*len, keyed[i].dtype, keyed[i].op);
            return;
        }
    }
    /* Unreachable: every type handed to these ops is registered first. */
    MPI_Abort(MPI_COMM_WORLD, 70);
}

static mlc_status_t keyed_type(mlc_dtype_t dtype, mlc_op_t op, MPI_Datatype *out)
{
    /* avg reduces as sum; the division happens once the reduction is done */
    if (op == MLC_AVG) op = MLC_SUM;
    int n = atomic_load_explicit(&nkeyed, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        if (keyed[i].dtype == dtype && keyed[i].op == op) {
            *out = keyed[i].type;
            return MLC_SUCCESS;
        }
    }
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&keyed_lock);
    n = atomic_load_explicit(&nkeyed, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        if (keyed[i].dtype == dtype && keyed[i].op == op) {
            *out = keyed[i].type;
            goto out;
        }
    }
    if (n == MLC_MPI_KEYED_MAX) {
        st = mlc_core->error(MLC_ERR_NO_MEMORY, "backend 'mpi': more than %d distinct (dtype, op) pairs reduced "
                       "through user-defined MPI ops", MLC_MPI_KEYED_MAX);
        goto out;
    }
    MPI_Datatype t;
    int rc = MPI_Type_contiguous((int)mlc_core->dtype_size(dtype), MPI_BYTE, &t);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&t);
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "backend 'mpi': MPI_Type_contiguous for %s", mlc_core->dtype_name(dtype));
        goto out;
    }
    keyed[n] = (keyed_type_t){t, dtype, op};
    atomic_store_explicit(&nkeyed, n + 1, memory_order_release);
    *out = t;
out:
    pthread_mutex_unlock(&keyed_lock);
    return st;
}

/* ---- setup ----------------------------------------------------------------------- */

/* MPI_Finalize has begun (the one hook the module has there): fail the
 * communicators still alive, free the receive types kept, then free the
 * module's datatypes and ops. */
static int types_stop(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)attr;
    (void)extra;
    mlc_mpi_progress_fail_all(); /* MPI_Finalize is starting */
    mlc_mpi_recv_size_stop();
    const mlc_dtype_t halves[] = {MLC_FLOAT16, MLC_BFLOAT16};
    for (size_t i = 0; i < 2; i++)
        if (dtype_types[halves[i]] != MPI_DATATYPE_NULL) MPI_Type_free(&dtype_types[halves[i]]);
    pthread_mutex_lock(&keyed_lock);
    int n = atomic_load(&nkeyed);
    for (int i = 0; i < n; i++) MPI_Type_free(&keyed[i].type);
    atomic_store(&nkeyed, 0);
    pthread_mutex_unlock(&keyed_lock);
    MPI_Op_free(&user_op_commute);
    MPI_Op_free(&user_op_ordered);
    MPI_Op_free(&verdict_op);
    MPI_Type_free(&verdict_type);
    MPI_Comm_free_keyval(&keyval);
    return MPI_SUCCESS;
}

/*
 * Does MPI's own op give exactly what mlcomm's kernel gives? MPI libraries
 * reduce long vectors with SIMD code that may differ from their scalar loop
 * (Open MPI 4.1's AVX component saturates int8/uint8 sums; MPICH 4.0 compares
 * unsigned max/min as signed), so each pair is compared on lengths around
 * every vector width, aligned and one element off, before MPI's op is used.
 */
enum { PROBE_MAX = 1100 };
static const size_t probe_lengths[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1025};

/* Element k of a probe vector: integers take every bit pattern (signed and
 * unsigned extremes, so saturation and signedness show); floats take values
 * of mixed sign and magnitude, signed zeros at every k % 7 == 3 (mlcomm
 * orders -0 < +0 in max/min) and, where `nan`, a NaN at every k % 11 == 6
 * (max/min keep the number). Both vectors of a probe have their zeros at the
 * same places; only one has NaNs, so which NaN a sum keeps is never asked. */
static void probe_value(mlc_dtype_t d, size_t k, uint64_t *state, unsigned char *out, bool nan)
{
    *state = *state * 6364136223846793005u + 1442695040888963407u;
    uint64_t bits = *state >> 11;
    double sign = bits & 1 ? -1.0 : 1.0;
    if (d == MLC_FLOAT32) {
        float f = (float)((int64_t)(bits % 20001) - 10000) * (k % 3 ? 0.25f : 3e4f);
        if (k % 7 == 3) f = (float)(sign * 0.0);
        if (nan && k % 11 == 6) f = __builtin_nanf("");
        memcpy(out, &f, 4);
    } else if (d == MLC_FLOAT64) {
        double f = (double)((int64_t)(bits % 20001) - 10000) * (k % 3 ? 0.125 : 1e150);
        if (k % 7 == 3) f = sign * 0.0;
        if (nan && k % 11 == 6) f = __builtin_nan("");
        memcpy(out, &f, 8);
    } else {
        /* every 4th element is an extreme (0x7f.., 0x80.., 0xff.., 0x00..) */
        static const unsigned char tops[4] = {0x7f, 0x80, 0xff, 0x00};
        for (size_t b = 0; b < 8; b++) out[b] = (unsigned char)(bits >> (8 * (b % 6)));
        if (k % 4 == 0) {
            memset(out, tops[(k / 4) % 4] == 0x80 ? 0x00 : tops[(k / 4) % 4], 8);
            out[mlc_core->dtype_size(d) - 1] = tops[(k / 4) % 4];
        }
    }
}

static bool native_agrees(mlc_dtype_t d, mlc_op_t op, unsigned char *in, unsigned char *mine, unsigned char *want,
                          unsigned char *theirs)
{
    size_t e = mlc_core->dtype_size(d);
    for (size_t l = 0; l < sizeof probe_lengths / sizeof probe_lengths[0]; l++) {
        for (size_t skew = 0; skew < 2; skew++) {
            size_t n = probe_lengths[l], at = skew * e;
            memcpy(want + at, mine, n * e);
            memcpy(theirs + at, mine, n * e);
            mlc_core->reduce_apply(in + at, want + at, n, d, op);
            int rc = MPI_Reduce_local(in + at, theirs + at, (int)n, dtype_types[d], *native_ops[op]);
            if (rc != MPI_SUCCESS || memcmp(theirs + at, want + at, n * e) != 0) return false;
        }
    }
    return true;
}

static void check_native_ops(void)
{
    size_t bytes = (PROBE_MAX + 1) * 8;
    unsigned char *in = malloc(bytes), *mine = malloc(bytes), *want = malloc(bytes), *theirs = malloc(bytes);
    for (mlc_dtype_t d = 0; d < MLC_DTYPE_COUNT; d++) {
        if (d == MLC_FLOAT16 || d == MLC_BFLOAT16) continue;
        size_t e = mlc_core->dtype_size(d);
        uint64_t state = 0x9e3779b97f4a7c15u + (uint64_t)d;
        if (in && mine && want && theirs)
            for (size_t k = 0; k < PROBE_MAX + 1; k++) {
                probe_value(d, k, &state, in + k * e, true);
                /* integers: extremes meet other values; floats: zeros meet zeros */
                probe_value(d, d == MLC_FLOAT32 || d == MLC_FLOAT64 ? k : k + 2, &state, mine + k * e, false);
            }
        for (mlc_op_t op = MLC_SUM; op <= MLC_MIN; op++) {
            /* without memory to compare, trust nothing: mlcomm's kernels reduce */
            native_ok[d][op] = in && mine && want && theirs && native_agrees(d, op, in, mine, want, theirs);
            if (!native_ok[d][op])
                MLC_INFO("MPI's %s on %s disagrees with mlcomm's; it is reduced with a user-defined MPI op",
                         mlc_core->op_name(op), mlc_core->dtype_name(d));
        }
        native_ok[d][MLC_AVG] = native_ok[d][MLC_SUM];
    }
    free(in);
    free(mine);
    free(want);
    free(theirs);
}

mlc_status_t mlc_mpi_types_start(void)
{
    const MPI_Datatype basic[MLC_DTYPE_COUNT] = {
        [MLC_INT8] = MPI_INT8_T,     [MLC_UINT8] = MPI_UINT8_T,   [MLC_INT32] = MPI_INT32_T,
        [MLC_UINT32] = MPI_UINT32_T, [MLC_INT64] = MPI_INT64_T,   [MLC_UINT64] = MPI_UINT64_T,
        [MLC_FLOAT32] = MPI_FLOAT,   [MLC_FLOAT64] = MPI_DOUBLE,
    };
    for (int d = 0; d < MLC_DTYPE_COUNT; d++) dtype_types[d] = basic[d];
    int rc = MPI_SUCCESS;
    const mlc_dtype_t halves[] = {MLC_FLOAT16, MLC_BFLOAT16};
    for (size_t i = 0; i < 2 && rc == MPI_SUCCESS; i++) {
        rc = MPI_Type_contiguous(2, MPI_BYTE, &dtype_types[halves[i]]);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&dtype_types[halves[i]]);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(keyed_reduce, 1, &user_op_commute);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(keyed_reduce, 0, &user_op_ordered);
    if (rc == MPI_SUCCESS) rc = MPI_Op_create(verdict_pick, 1, &verdict_op);
    if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous((int)sizeof(mlc_mpi_verdict_t), MPI_BYTE, &verdict_type);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&verdict_type);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "backend 'mpi': creating its datatypes and ops");
    /* Freed when MPI_Finalize deletes MPI_COMM_SELF's attributes, whoever calls it. */
    int keyval;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, types_stop, &keyval, NULL) == MPI_SUCCESS)
        MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL);
    check_native_ops();
    return MLC_SUCCESS;
}

mlc_status_t mlc_mpi_elem_type(mlc_dtype_t dtype, MPI_Datatype *type, bool *owned)
{
    if (dtype >= 0 && dtype < MLC_DTYPE_COUNT) {
        *type = dtype_types[dtype];
        *owned = false;
        return MLC_SUCCESS;
    }
    MPI_Datatype t;
    int rc = MPI_Type_contiguous((int)mlc_core->dtype_size(dtype), MPI_BYTE, &t);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "backend 'mpi': MPI_Type_contiguous for a record");
    *type = t;
    *owned = true;
    return MLC_SUCCESS;
}

bool mlc_mpi_reduce_is_native(mlc_dtype_t dtype, mlc_op_t op)
{
    return dtype >= 0 && dtype < MLC_DTYPE_COUNT && op >= 0 && op < MLC_OP_BUILTIN_COUNT && op != MLC_AVG &&
           native_ok[dtype][op];
}

mlc_status_t mlc_mpi_reduce_type(mlc_dtype_t dtype, mlc_op_t op, MPI_Datatype *type, MPI_Op *mop)
{
    if (dtype >= 0 && dtype < MLC_DTYPE_COUNT && op >= 0 && op < MLC_OP_BUILTIN_COUNT && native_ok[dtype][op]) {
        *type = dtype_types[dtype];
        *mop = *native_ops[op]; /* avg: sum, divided at the end */
        return MLC_SUCCESS;
    }
    mlc_status_t st = keyed_type(dtype, op, type);
    if (st != MLC_SUCCESS) return st;
    *mop = mlc_core->op_commutative(op) ? user_op_commute : user_op_ordered;
    return MLC_SUCCESS;
}

/* ---- large counts ----------------------------------------------------------------- */

int mlc_mpi_big_type(size_t n, MPI_Datatype elem, size_t es, MPI_Datatype *out)
{
    /* n = q * L + r elements: q blocks of an L-element type, then r more. */
    size_t L = mlc_mpi_limits.count, q = n / L, r = n % L;
    MPI_Datatype chunk = MPI_DATATYPE_NULL, body = MPI_DATATYPE_NULL, rest = MPI_DATATYPE_NULL,
                 joined = MPI_DATATYPE_NULL;
    int rc = MPI_Type_contiguous((int)L, elem, &chunk);
    if (rc == MPI_SUCCESS) rc = MPI_Type_contiguous((int)q, chunk, &body);
    if (rc == MPI_SUCCESS && r) {
        rc = MPI_Type_contiguous((int)r, elem, &rest);
        int lens[2] = {1, 1};
        MPI_Aint disp[2] = {0, (MPI_Aint)(q * L * es)};
        MPI_Datatype parts[2] = {body, rest};
        if (rc == MPI_SUCCESS) rc = MPI_Type_create_struct(2, lens, disp, parts, &joined);
    } else if (rc == MPI_SUCCESS) {
        rc = MPI_Type_dup(body, &joined);
    }
    /* The extent is exactly n elements, so block i of an alltoall starts at i*n. */
    if (rc == MPI_SUCCESS) rc = MPI_Type_create_resized(joined, 0, (MPI_Aint)(n * es), out);
    MPI_Datatype *tmp[] = {&chunk, &body, &rest, &joined};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
        if (*tmp[i] != MPI_DATATYPE_NULL) MPI_Type_free(tmp[i]);
    return rc;
}
