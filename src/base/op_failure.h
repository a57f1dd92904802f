/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A user op's failure (mlc_op_fail). Whoever runs reductions on a thread
 * opens a scope around them; a user op that fails inside it marks the
 * scope, and the scope's `fail` hears of it at once, still inside the op:
 * before the code that called the reduction can hand its output to anyone
 * (the engine posts the failure to the communicator's other members there,
 * so a member that reads the output later sees the failure first).
 * Without a scope (MPI runs the op) the failure is counted process-wide.
 */
#ifndef MLC_BASE_OP_FAILURE_H
#define MLC_BASE_OP_FAILURE_H
#include <stdbool.h>
#include "mlcomm.h"

typedef struct mlc_op_scope {
    void (*fail)(void *arg, const char *why); /* may be NULL */
    void *arg;
    bool failed; /* a user op called mlc_op_fail in this scope */
    char why[256];
    struct mlc_op_scope *outer;
} mlc_op_scope_t;

/* Open s (its fail and arg set by the caller) on this thread; close it
 * with mlc_op_scope_leave, innermost first. */
void mlc_op_scope_enter(mlc_op_scope_t *s);
void mlc_op_scope_leave(mlc_op_scope_t *s);

/* User ops that failed on this process where no scope was open: inside
 * MPI, which runs them on whatever thread drives it. Returns how many so
 * far (never decreases) and copies the latest reason into why (if len). */
uint64_t mlc_op_failures_unscoped(char *why, size_t len);

/* Run a user op's function (reduce.c): once its scope failed, the rest of
 * the reduction is not worth computing and the function is not called. */
void mlc_user_fn_call(mlc_user_fn_t fn, const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx);
#endif
