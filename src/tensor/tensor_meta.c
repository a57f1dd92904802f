/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cross-rank argument check. Before any data moves, every rank
 * contributes a fixed-size description of its call (operation, dtype,
 * shapes, dim, op/root, and whether its own arguments passed the local
 * check) with one all-gather. Every rank then holds the same table and
 * reaches the same verdict, so either all ranks start the operation or all
 * return an error: a rank with a bad argument never leaves its peers
 * waiting in a collective it will not join.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/comm.h"
#include "base/error.h"
#include "tensor_internal.h"

void mlc_tmeta_shapes(mlc_tmeta_t *m, const mlc_tensor_t *t, const mlc_tensor_t *o)
{
    if (t && t->ndim >= 0 && t->ndim <= MLC_TENSOR_MAX_DIMS) {
        m->dtype = t->dtype;
        m->ndim = t->ndim;
        for (int i = 0; i < t->ndim; i++) m->shape[i] = t->shape[i];
    }
    if (o && o->ndim >= 0 && o->ndim <= MLC_TENSOR_MAX_DIMS) {
        m->out_dtype = o->dtype;
        m->out_ndim = o->ndim;
        for (int i = 0; i < o->ndim; i++) m->out_shape[i] = o->shape[i];
    }
}

mlc_tmeta_t *mlc_tmeta_table(mlc_tmeta_t *buf, int n_inline, int p, mlc_tmeta_t **heap)
{
    *heap = NULL;
    if (p <= n_inline) return buf;
    *heap = calloc((size_t)p, sizeof **heap);
    return *heap;
}

/* "op sum" / "root 2": what the kind's `arg` means. */
static void format_arg(char *buf, size_t len, int kind, int32_t arg)
{
    if (kind == MLC_TOP_BROADCAST) {
        snprintf(buf, len, "root %d", (int)arg);
    } else {
        const char *name = mlc_op_name(arg);
        snprintf(buf, len, "op %s", name ? name : "?");
    }
}

/* The first rank whose call differs from rank 0's in a field every rank must share. */
static mlc_status_t check_agreement(const mlc_tmeta_t *all, int p)
{
    const mlc_tmeta_t *a = &all[0];
    const char *fn = mlc_top_name(a->kind);
    char sa[160], sb[160];
    for (int r = 1; r < p; r++) {
        const mlc_tmeta_t *b = &all[r];
        if (b->kind != a->kind)
            return mlc_error(MLC_ERR_MISMATCH, "%s: rank 0 called %s but rank %d called %s", fn, fn,
                             r, mlc_top_name(b->kind));
        if (b->dtype != a->dtype) {
            const char *na = mlc_dtype_name(a->dtype), *nb = mlc_dtype_name(b->dtype);
            return mlc_error(MLC_ERR_MISMATCH, "%s: dtypes differ: rank 0 passes %s, rank %d passes %s",
                             fn, na ? na : "?", r, nb ? nb : "?");
        }
        if (b->ndim != a->ndim) {
            mlc_tshape_format(sa, sizeof sa, a->dtype, a->ndim, a->shape);
            mlc_tshape_format(sb, sizeof sb, b->dtype, b->ndim, b->shape);
            return mlc_error(MLC_ERR_MISMATCH,
                             "%s: shapes do not fit: rank 0 has %s, rank %d has %s (%d vs %d "
                             "dimensions)",
                             fn, sa, r, sb, a->ndim, b->ndim);
        }
        if (b->dim != a->dim)
            return mlc_error(MLC_ERR_MISMATCH, "%s: rank 0 passes dim %d, rank %d passes dim %d", fn,
                             a->dim, r, b->dim);
        if (b->arg != a->arg) {
            format_arg(sa, sizeof sa, a->kind, a->arg);
            format_arg(sb, sizeof sb, b->kind, b->arg);
            return mlc_error(MLC_ERR_MISMATCH, "%s: rank 0 passes %s, rank %d passes %s", fn, sa, r,
                             sb);
        }
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_tmeta_agree(mlc_comm_t *comm, mlc_tmeta_t *mine, mlc_status_t local_st,
                             mlc_tmeta_t *all)
{
    char local_msg[384] = "";
    if (local_st != MLC_SUCCESS) snprintf(local_msg, sizeof local_msg, "%s", mlc_last_error());
    mine->status = local_st;
    int p = mlc_comm_size(comm);
    /* mlcomm's own collective, named so in a mismatch with a user's call */
    int outer = mlc_comm_own_begin(comm, MLC_COMM_CALL_TENSOR_CHECK);
    mlc_status_t st = mlc_allgather(mine, all, sizeof *mine, MLC_UINT8, comm, NULL);
    mlc_comm_own_end(comm, outer);
    if (st != MLC_SUCCESS) { /* the user's call first, then the collective's own message */
        char why[384];
        snprintf(why, sizeof why, "%s", mlc_last_error());
        return mlc_error(st, "%s: comparing the ranks' arguments failed: %s", mlc_top_name(mine->kind), why);
    }
    if (local_st != MLC_SUCCESS) return mlc_error(local_st, "%s", local_msg);
    for (int r = 0; r < p; r++) {
        if (all[r].status != MLC_SUCCESS)
            return mlc_error(MLC_ERR_MISMATCH,
                             "%s: rank %d's arguments failed its own check (%s; see that rank's "
                             "message); no data was moved",
                             mlc_top_name(mine->kind), r, mlc_status_name((mlc_status_t)all[r].status));
    }
    return check_agreement(all, p);
}
