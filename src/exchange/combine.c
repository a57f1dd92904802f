/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_combine: a global reduction of values of any size with a user binary
 * op (the ReduceStage combine step of the C# specification). Values that fit a record dtype
 * go through mlc_op_create + mlc_allreduce, so the backend's algorithm runs
 * it (in rank order for non-commutative ops); larger values are all-gathered
 * and folded in rank order on every rank (same bits everywhere).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"
#include "mlcomm_exchange.h"

#define MLC_RECORD_MAX 65535

typedef struct combine_closure {
    mlc_combine_fn_t fn;
    void *ctx;
    size_t value_bytes;
} combine_closure_t;

/* mlc_user_fn_t over records: apply the user's op value by value. */
static void combine_records(const void *in, void *inout, size_t count, mlc_dtype_t dtype,
                            void *ctx)
{
    const combine_closure_t *c = ctx;
    const unsigned char *a = in;
    unsigned char *b = inout;
    for (size_t i = 0; i < count; i++)
        c->fn(a + i * c->value_bytes, b + i * c->value_bytes, c->ctx);
}

static mlc_status_t combine_allreduce(const void *value, void *result, size_t count,
                                      combine_closure_t *c, int commutative, mlc_comm_t *comm)
{
    mlc_op_t op;
    mlc_status_t st = mlc_op_create(combine_records, commutative, c, &op);
    if (st) return st;
    st = mlc_allreduce(value, result, count, MLC_RECORD((int)c->value_bytes), op, comm, NULL);
    /* mlc_op_free clears the thread's message: keep the allreduce's. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    mlc_op_free(op);
    if (st) mlc_error_set_text(msg);
    return st;
}

/* Fold right to left: acc = v_r (op) acc, so the lower rank is always `in`. */
static mlc_status_t combine_gather(const void *value, void *result, size_t count,
                                   const combine_closure_t *c, mlc_comm_t *comm)
{
    const int p = mlc_comm_size(comm);
    const size_t bytes = count * c->value_bytes;
    if (bytes / c->value_bytes != count || bytes > SIZE_MAX / (size_t)p)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_combine: %zu values of %zu bytes from %d ranks "
                         "overflow size_t", count, c->value_bytes, p);
    unsigned char *all = malloc(bytes * (size_t)p);
    if (!all)
        return mlc_error(MLC_ERR_NO_MEMORY, "mlc_combine: %zu bytes to gather values of %zu bytes",
                         bytes * (size_t)p, c->value_bytes);
    mlc_status_t st = mlc_allgather(value, all, bytes, MLC_UINT8, comm, NULL);
    if (!st) {
        unsigned char *acc = all + (size_t)(p - 1) * bytes;
        for (int r = p - 2; r >= 0; r--)
            for (size_t i = 0; i < count; i++)
                c->fn(all + (size_t)r * bytes + i * c->value_bytes, acc + i * c->value_bytes,
                      c->ctx);
        memcpy(result, acc, bytes);
    }
    free(all);
    return st;
}

mlc_status_t mlc_combine(const void *value, void *result, size_t count, size_t value_bytes,
                         mlc_combine_fn_t fn, int commutative, void *ctx, mlc_comm_t *comm)
{
    mlc_error_clear();
    if (!comm || !fn || (count && (!value || !result)) || value_bytes == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_combine: %s",
                         !comm ? "NULL comm" : !fn ? "NULL fn"
                         : value_bytes == 0 ? "value_bytes is 0"
                         : !value ? "NULL value" : "NULL result");
    if (count == 0) return MLC_SUCCESS;
    if (count > (size_t)PTRDIFF_MAX / value_bytes)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_combine: count %zu of %zu-byte values is larger than any "
                         "buffer can be (PTRDIFF_MAX bytes)", count, value_bytes);
    combine_closure_t c = {fn, ctx, value_bytes};
    if (value_bytes <= MLC_RECORD_MAX) return combine_allreduce(value, result, count, &c, commutative, comm);
    /* The fold below reads `value` from the gathered copy, so in place is fine. */
    return combine_gather(value, result, count, &c, comm);
}
