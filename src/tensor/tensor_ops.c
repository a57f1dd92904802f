/* SPDX-License-Identifier: BSD-3-Clause */
/* Tensor all-reduce, broadcast and barrier: shape checks, then the core call. */
#include "core/comm.h"
#include "base/dtype.h"
#include "base/error.h"
#include "tensor_internal.h"

/* Every rank's input shape must equal `ref`'s; the message names both ranks. */
static mlc_status_t all_shapes_equal(const mlc_tcall_t *c, int ref, const char *ref_role)
{
    const mlc_tmeta_t *a = &c->all[ref];
    for (int r = 0; r < c->p; r++) {
        const mlc_tmeta_t *b = &c->all[r];
        if (mlc_tshape_equal(a->shape, b->shape, a->ndim, -1)) continue;
        char sa[160], sb[160];
        mlc_tshape_format(sa, sizeof sa, a->dtype, a->ndim, a->shape);
        mlc_tshape_format(sb, sizeof sb, b->dtype, b->ndim, b->shape);
        return mlc_error(MLC_ERR_MISMATCH,
                         "%s: shapes do not fit: %s %d has %s, rank %d has %s; every rank must "
                         "pass the same shape",
                         c->fn, ref_role, ref, sa, r, sb);
    }
    return MLC_SUCCESS;
}

static mlc_status_t allreduce_local(mlc_tcall_t *c, const mlc_tensor_t *in, const mlc_tensor_t *out,
                                    mlc_op_t op)
{
    mlc_status_t st;
    if ((st = mlc_tdesc_check(in, c->fn, "in")) || (st = mlc_tdesc_check(out, c->fn, "out")))
        return st;
    if ((st = mlc_tdevice_check(in, c->comm, c->fn, "in")) ||
        (st = mlc_tdevice_check(out, c->comm, c->fn, "out")))
        return st;
    if ((st = mlc_tpair_check(in, out, -1, c->fn, "in", "out"))) return st;
    if ((st = mlc_op_check(in->dtype, op))) return mlc_error_in(c->fn, st);
    size_t bytes = mlc_tensor_bytes(in);
    if (in->data != out->data && mlc_tbytes_overlap(in->data, bytes, out->data, bytes))
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s: in and out overlap without being the same buffer (in place is "
                         "out->data == in->data)",
                         c->fn);
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_tensor_allreduce(const mlc_tensor_t *in, mlc_tensor_t *out, mlc_op_t op,
                                          mlc_comm_t *comm, mlc_tensor_request_t **req)
{
    mlc_tcall_t c;
    mlc_status_t local = MLC_SUCCESS;
    mlc_status_t st = mlc_tcall_begin(&c, MLC_TOP_ALLREDUCE, comm, req != NULL, &local);
    if (st != MLC_SUCCESS) return st;
    if (local == MLC_SUCCESS) local = allreduce_local(&c, in, out, op);
    c.mine.arg = op;
    mlc_tmeta_shapes(&c.mine, in, out);
    st = mlc_tcall_agree(&c, local);
    if (st == MLC_SUCCESS && !c.trusted) st = all_shapes_equal(&c, 0, "rank");
    if (st == MLC_SUCCESS) {
        st = mlc_allreduce(in->data, out->data, mlc_tensor_numel(in), in->dtype, op, comm,
                           mlc_treq_out(c.r));
        mlc_treq_note(c.r, st);
    }
    return mlc_tcall_end(&c, st, req);
}

static mlc_status_t broadcast_local(mlc_tcall_t *c, const mlc_tensor_t *t, int root)
{
    mlc_status_t st;
    if ((st = mlc_tdesc_check(t, c->fn, "t"))) return st;
    if ((st = mlc_tdevice_check(t, c->comm, c->fn, "t"))) return st;
    if (root < 0 || root >= c->p)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: root %d is outside 0..%d", c->fn, root, c->p - 1);
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_tensor_broadcast(mlc_tensor_t *t, int root, mlc_comm_t *comm,
                                          mlc_tensor_request_t **req)
{
    mlc_tcall_t c;
    mlc_status_t local = MLC_SUCCESS;
    mlc_status_t st = mlc_tcall_begin(&c, MLC_TOP_BROADCAST, comm, req != NULL, &local);
    if (st != MLC_SUCCESS) return st;
    if (local == MLC_SUCCESS) local = broadcast_local(&c, t, root);
    c.mine.arg = root;
    mlc_tmeta_shapes(&c.mine, t, NULL);
    st = mlc_tcall_agree(&c, local);
    /* root agrees on every rank here, so all[root] is the reference */
    if (st == MLC_SUCCESS && !c.trusted) st = all_shapes_equal(&c, root, "root");
    if (st == MLC_SUCCESS) {
        st = mlc_broadcast(t->data, t->data, mlc_tensor_numel(t), t->dtype, root, comm,
                           mlc_treq_out(c.r));
        mlc_treq_note(c.r, st);
    }
    return mlc_tcall_end(&c, st, req);
}

MLC_API mlc_status_t mlc_tensor_barrier(mlc_comm_t *comm, mlc_tensor_request_t **req)
{
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_barrier: comm is NULL");
    mlc_status_t st = mlc_group_refuse("mlc_tensor_barrier");
    if (st != MLC_SUCCESS) return st;
    mlc_tensor_request_t stack, *r;
    st = mlc_treq_begin(&stack, req != NULL, "mlc_tensor_barrier", &r);
    if (st != MLC_SUCCESS) return st;
    st = mlc_barrier(comm, mlc_treq_out(r));
    mlc_treq_note(r, st);
    return mlc_treq_end(r, st, req);
}
