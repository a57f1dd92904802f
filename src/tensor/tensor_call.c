/* The frame of one tensor collective call: begin, agree, end. */
#include <stdlib.h>
#include <string.h>
#include "core/comm.h"
#include "core/error.h"
#include "tensor_internal.h"

mlc_status_t mlc_tcall_begin(mlc_tcall_t *c, int kind, mlc_comm_t *comm, bool async,
                             mlc_status_t *local)
{
    memset(c, 0, sizeof *c);
    c->fn = mlc_top_name(kind);
    c->comm = comm;
    c->mine.kind = kind;
    c->mine.dim = -1;
    c->mine.arg = -1;
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "%s: comm is NULL", c->fn);
    mlc_status_t st = mlc_comm_check(comm);
    if (st != MLC_SUCCESS) return st;
    c->p = mlc_comm_size(comm);
    c->rank = mlc_comm_rank(comm);
    c->all = mlc_tmeta_table(c->inline_all, MLC_TCALL_INLINE_RANKS, c->p, &c->heap_all);
    if (!c->all)
        return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for the argument table of %d ranks",
                         c->fn, c->p);
    *local = mlc_treq_begin(&c->stack, async, c->fn, &c->r);
    if (*local != MLC_SUCCESS) mlc_treq_begin(&c->stack, false, c->fn, &c->r); /* cannot fail */
    return MLC_SUCCESS;
}

mlc_status_t mlc_tcall_agree(mlc_tcall_t *c, mlc_status_t local)
{
    return mlc_tmeta_agree(c->comm, &c->mine, local, c->all);
}

mlc_status_t mlc_tcall_end(mlc_tcall_t *c, mlc_status_t st, mlc_tensor_request_t **req)
{
    free(c->heap_all);
    c->heap_all = NULL;
    return mlc_treq_end(c->r, st, req);
}

bool mlc_tshape_equal(const uint64_t *a, const uint64_t *b, int ndim, int skip)
{
    for (int i = 0; i < ndim; i++) {
        if (i != skip && a[i] != b[i]) return false;
    }
    return true;
}

mlc_status_t mlc_tpair_check(const mlc_tensor_t *in, const mlc_tensor_t *out, int skip,
                             const char *fn, const char *in_name, const char *out_name)
{
    bool same = in->dtype == out->dtype && in->ndim == out->ndim;
    for (int i = 0; same && i < in->ndim; i++) {
        if (i != skip && in->shape[i] != out->shape[i]) same = false;
    }
    if (same) return MLC_SUCCESS;
    uint64_t a[MLC_TENSOR_MAX_DIMS], b[MLC_TENSOR_MAX_DIMS];
    for (int i = 0; i < in->ndim; i++) a[i] = in->shape[i];
    for (int i = 0; i < out->ndim; i++) b[i] = out->shape[i];
    char sa[160], sb[160];
    mlc_tshape_format(sa, sizeof sa, in->dtype, in->ndim, a);
    mlc_tshape_format(sb, sizeof sb, out->dtype, out->ndim, b);
    if (skip >= 0)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s: %s is %s but %s is %s; they must agree in dtype and in every "
                         "dimension except dim %d",
                         fn, out_name, sb, in_name, sa, skip);
    return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s is %s but %s is %s; they must be the same", fn,
                     out_name, sb, in_name, sa);
}
