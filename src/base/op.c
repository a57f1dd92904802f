/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction ops: built-in names (MLC_OP_LIST) and the process-wide table of
 * user ops. User op ids are MLC_OP_BUILTIN_COUNT + index; the lowest free index
 * is taken, so ranks that create and free ops in the same order get the same
 * ids (as MPI_Op_create).
 *
 * What calls compare across ranks is not the id but what the op does (its
 * signature id): ranks sharing a process (threads) may each create their own
 * op of one function, and ids then depend on who came first.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "dtype.h"
#include "error.h"
#include "reduce_impl.h"

typedef struct mlc_user_op {
    mlc_user_fn_t fn; /* NULL = free entry */
    void *ctx;
    bool commutative;
    int sig_id;       /* what calls compare across ranks (op_sig_id) */
} mlc_user_op_t;

static pthread_mutex_t mlc_op_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_user_op_t mlc_user_ops[MLC_OP_USER_MAX];

/* The same in every process and thread for one function and commutativity,
 * different for others: a function in a module (the program or a library)
 * is named by the module's file name and its offset there, the same in
 * every process of one program wherever the module was loaded. -2 (not
 * compared) for a function in no module: generated code, such as a Python
 * callback, which every rank (thread or process) makes anew. */
static int op_sig_id(mlc_user_fn_t fn, bool commutative)
{
    Dl_info info;
    if (dladdr((void *)(uintptr_t)fn, &info) && info.dli_fname && info.dli_fbase) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *c = base; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        h ^= ((uint64_t)(uintptr_t)fn - (uint64_t)(uintptr_t)info.dli_fbase) * 0x9e3779b97f4a7c15ull;
        h ^= (uint64_t)commutative * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        return (int)(0x40000000u | (uint32_t)(h & 0x3fffffffu));
    }
    return -2;
}

static const char *const mlc_op_names[] = {
#define MLC_X_NAME(id, str) [id] = str,
    MLC_OP_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};

static bool mlc_op_is_builtin(mlc_op_t op) { return op >= 0 && op < MLC_OP_BUILTIN_COUNT; }

/* Index of a user op id, or -1 when the id is outside the user range. */
static int mlc_op_index(mlc_op_t op)
{
    if (op < MLC_OP_BUILTIN_COUNT || op >= MLC_OP_BUILTIN_COUNT + MLC_OP_USER_MAX) return -1;
    return op - MLC_OP_BUILTIN_COUNT;
}

bool mlc_op_user_lookup(mlc_op_t op, mlc_user_fn_t *fn, void **ctx)
{
    int index = mlc_op_index(op);
    if (index < 0) return false;
    pthread_mutex_lock(&mlc_op_lock);
    mlc_user_op_t u = mlc_user_ops[index];
    pthread_mutex_unlock(&mlc_op_lock);
    if (u.fn == NULL) return false;
    *fn = u.fn;
    *ctx = u.ctx;
    return true;
}

mlc_status_t mlc_op_create(mlc_user_fn_t fn, int commutative, void *ctx, mlc_op_t *op)
{
    mlc_error_clear();
    if (fn == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_create: fn is NULL");
    if (op == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_create: op output pointer is NULL");
    int index = -1;
    pthread_mutex_lock(&mlc_op_lock);
    for (int i = 0; i < MLC_OP_USER_MAX; i++) {
        if (mlc_user_ops[i].fn == NULL) {
            mlc_user_ops[i] = (mlc_user_op_t){fn, ctx, commutative != 0, op_sig_id(fn, commutative != 0)};
            index = i;
            break;
        }
    }
    pthread_mutex_unlock(&mlc_op_lock);
    if (index < 0)
        return mlc_error(MLC_ERR_NO_MEMORY,
                         "mlc_op_create: the user op table is full (%d ops); free unused ops "
                         "with mlc_op_free",
                         MLC_OP_USER_MAX);
    *op = MLC_OP_BUILTIN_COUNT + index;
    return MLC_SUCCESS;
}

mlc_status_t mlc_op_free(mlc_op_t op)
{
    mlc_error_clear();
    if (mlc_op_is_builtin(op))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_free: op %d ('%s') is built-in", (int)op,
                         mlc_op_names[op]);
    int index = mlc_op_index(op);
    bool freed = false;
    if (index >= 0) {
        pthread_mutex_lock(&mlc_op_lock);
        freed = mlc_user_ops[index].fn != NULL;
        mlc_user_ops[index] = (mlc_user_op_t){NULL, NULL, false, 0};
        pthread_mutex_unlock(&mlc_op_lock);
    }
    if (!freed)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_free: op %d is not a live user op", (int)op);
    return MLC_SUCCESS;
}

int mlc_op_signature_id(mlc_op_t op)
{
    int index = mlc_op_index(op), id = -2;
    if (index < 0) return id;
    pthread_mutex_lock(&mlc_op_lock);
    if (mlc_user_ops[index].fn) id = mlc_user_ops[index].sig_id;
    pthread_mutex_unlock(&mlc_op_lock);
    return id;
}

bool mlc_op_valid(mlc_op_t op)
{
    mlc_user_fn_t fn;
    void *ctx;
    return mlc_op_is_builtin(op) || mlc_op_user_lookup(op, &fn, &ctx);
}

bool mlc_op_commutative(mlc_op_t op)
{
    if (mlc_op_is_builtin(op)) return true;
    int index = mlc_op_index(op);
    if (index < 0) return false;
    pthread_mutex_lock(&mlc_op_lock);
    bool c = mlc_user_ops[index].fn != NULL && mlc_user_ops[index].commutative;
    pthread_mutex_unlock(&mlc_op_lock);
    return c;
}

const char *mlc_op_name(mlc_op_t op)
{
    if (mlc_op_is_builtin(op)) return mlc_op_names[op];
    return mlc_op_valid(op) ? "user" : NULL;
}

mlc_status_t mlc_op_from_name(const char *name, mlc_op_t *op)
{
    mlc_error_clear();
    if (name == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_from_name: name is NULL");
    if (op == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_from_name: op is NULL");
    for (mlc_op_t i = 0; i < MLC_OP_BUILTIN_COUNT; i++) {
        if (strcasecmp(name, mlc_op_names[i]) == 0) {
            *op = i;
            return MLC_SUCCESS;
        }
    }
#define MLC_X_NAME(id, str) " " str
    return mlc_error(MLC_ERR_INVALID_ARG, "mlc_op_from_name: unknown op name '%s' (expected one of:" MLC_OP_LIST(MLC_X_NAME) ")",
                     name);
#undef MLC_X_NAME
}

mlc_status_t mlc_op_check(mlc_dtype_t dtype, mlc_op_t op)
{
    /* The common case first: every call of a reduction comes here. */
    if (mlc_op_is_builtin(op) && dtype >= 0 && dtype < MLC_DTYPE_COUNT) return MLC_SUCCESS;
    const char *dname = mlc_dtype_name(dtype);
    if (dname == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "unknown dtype %d", (int)dtype);
    if (!mlc_op_valid(op))
        return mlc_error(MLC_ERR_INVALID_ARG, "unknown op %d (neither built-in nor a live user op)",
                         (int)op);
    if (mlc_op_is_builtin(op) && mlc_dtype_is_record(dtype))
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "op '%s' cannot reduce dtype '%s' (%zu-byte record): records are "
                         "reduced only by user ops",
                         mlc_op_names[op], dname, mlc_dtype_size(dtype));
    return MLC_SUCCESS;
}
