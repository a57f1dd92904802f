/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction ops: built-in names (MLC_OP_LIST) and the process-wide table of
 * user ops. User op ids are MLC_OP_BUILTIN_COUNT + index; the lowest free index
 * is taken, so ranks that create and free ops in the same order get the same
 * ids (as MPI_Op_create).
 */
#include <pthread.h>
#include <strings.h>

#include "dtype.h"
#include "error.h"
#include "reduce_impl.h"

typedef struct mlc_user_op {
    mlc_user_fn_t fn; /* NULL = free entry */
    void *ctx;
    bool commutative;
} mlc_user_op_t;

static pthread_mutex_t mlc_op_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_user_op_t mlc_user_ops[MLC_OP_USER_MAX];

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
            mlc_user_ops[i] = (mlc_user_op_t){fn, ctx, commutative != 0};
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
        mlc_user_ops[index] = (mlc_user_op_t){NULL, NULL, false};
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
    mlc_user_op_t u = mlc_user_ops[index];
    for (int j = 0; u.fn && j <= index; j++) {
        if (mlc_user_ops[j].fn == u.fn && mlc_user_ops[j].commutative == u.commutative) {
            id = MLC_OP_BUILTIN_COUNT + j;
            break;
        }
    }
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
    if (name == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "op name is NULL");
    if (op == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "op output pointer is NULL");
    for (mlc_op_t i = 0; i < MLC_OP_BUILTIN_COUNT; i++) {
        if (strcasecmp(name, mlc_op_names[i]) == 0) {
            *op = i;
            return MLC_SUCCESS;
        }
    }
#define MLC_X_NAME(id, str) " " str
    return mlc_error(MLC_ERR_INVALID_ARG, "unknown op name '%s' (expected one of:" MLC_OP_LIST(MLC_X_NAME) ")",
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
