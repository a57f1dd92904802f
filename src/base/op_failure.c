/* SPDX-License-Identifier: BSD-3-Clause */
/* A user op's failure: mlc_op_fail and the scopes that hear of it (op_failure.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include "op_failure.h"

static _Thread_local mlc_op_scope_t *scope_now;
static _Thread_local int in_user_fn;
static atomic_uint_fast64_t unscoped_failures;
static pthread_mutex_t unscoped_lock = PTHREAD_MUTEX_INITIALIZER;
static char unscoped_why[256];

uint64_t mlc_op_failures_unscoped(char *why, size_t len)
{
    pthread_mutex_lock(&unscoped_lock);
    uint64_t n = atomic_load(&unscoped_failures);
    if (len) snprintf(why, len, "%s", unscoped_why);
    pthread_mutex_unlock(&unscoped_lock);
    return n;
}

void mlc_op_scope_enter(mlc_op_scope_t *s)
{
    s->failed = false;
    s->why[0] = '\0';
    s->outer = scope_now;
    scope_now = s;
}

void mlc_op_scope_leave(mlc_op_scope_t *s) { scope_now = s->outer; }

void mlc_user_fn_call(mlc_user_fn_t fn, const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    if (scope_now && scope_now->failed) return;
    in_user_fn++;
    fn(in, inout, count, dtype, ctx);
    in_user_fn--;
}

void mlc_op_fail(const char *why)
{
    if (!in_user_fn) return;
    const char *reason = why && why[0] ? why : "(no reason given)";
    mlc_op_scope_t *s = scope_now;
    if (!s) {
        pthread_mutex_lock(&unscoped_lock);
        snprintf(unscoped_why, sizeof unscoped_why, "%s", reason);
        atomic_fetch_add(&unscoped_failures, 1);
        pthread_mutex_unlock(&unscoped_lock);
        return;
    }
    if (s->failed) return; /* the first reason stands */
    s->failed = true;
    snprintf(s->why, sizeof s->why, "%s", reason);
    if (s->fail) s->fail(s->arg, s->why);
}
