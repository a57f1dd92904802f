/* SPDX-License-Identifier: BSD-3-Clause */
/* The frame of one tensor collective call: begin, agree, end. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/comm.h"
#include "base/error.h"
#include "tensor_internal.h"

/* The tensor layer's per-communicator value: its checks level (absent: full). */
static pthread_once_t checks_once = PTHREAD_ONCE_INIT;
static int checks_key = -1;
static void make_checks_key(void) { checks_key = mlc_comm_key_create(NULL); }

static mlc_tensor_checks_t checks_of(const mlc_comm_t *comm)
{
    pthread_once(&checks_once, make_checks_key);
    return (mlc_tensor_checks_t)(intptr_t)mlc_comm_value(comm, checks_key);
}

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
    mlc_status_t st = mlc_group_refuse(c->fn);
    if (st != MLC_SUCCESS) return st;
    st = mlc_comm_check(comm);
    if (st != MLC_SUCCESS) return st;
    c->p = mlc_comm_size(comm);
    c->rank = mlc_comm_rank(comm);
    c->trusted = checks_of(comm) == MLC_TENSOR_CHECKS_LOCAL;
    if (!c->trusted)
        c->all = mlc_tmeta_table(c->inline_all, MLC_TCALL_INLINE_RANKS, c->p, &c->heap_all);
    if (!c->trusted && !c->all)
        return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for the argument table of %d ranks",
                         c->fn, c->p);
    *local = mlc_treq_begin(&c->stack, async, c->fn, &c->r);
    if (*local != MLC_SUCCESS) mlc_treq_begin(&c->stack, false, c->fn, &c->r); /* cannot fail */
    return MLC_SUCCESS;
}

mlc_status_t mlc_tcall_agree(mlc_tcall_t *c, mlc_status_t local)
{
    if (c->trusted) return local; /* its message is already set */
    return mlc_tmeta_agree(c->comm, &c->mine, local, c->all);
}

size_t mlc_tcall_part(const mlc_tcall_t *c, int q, int dim, bool out_side, size_t total)
{
    if (!c->trusted) return (size_t)(out_side ? c->all[q].out_shape[dim] : c->all[q].shape[dim]);
    size_t off, len;
    mlc_tensor_split(total, c->p, q, &off, &len);
    return len;
}

mlc_status_t mlc_tcall_check_split(const mlc_tcall_t *c, size_t mine, size_t total, int dim,
                                   const char *what)
{
    size_t off, len;
    mlc_tensor_split(total, c->p, c->rank, &off, &len);
    if (mine == len) return MLC_SUCCESS;
    return mlc_error(MLC_ERR_INVALID_ARG,
                     "%s: with checks \"local\" parts follow mlc_tensor_split: rank %d's %s has "
                     "length %zu along dim %d, its part of %zu is %zu",
                     c->fn, c->rank, what, mine, dim, total, len);
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

static const char *const check_names[] = {
#define MLC_X_NAME(name, str) str,
    MLC_TENSOR_CHECKS_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};

MLC_API mlc_status_t mlc_tensor_set_checks(mlc_comm_t *comm, mlc_tensor_checks_t level)
{
    const char *fn = "mlc_tensor_set_checks";
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    mlc_status_t st = mlc_comm_check(comm);
    if (st != MLC_SUCCESS) return st;
    int p = mlc_comm_size(comm);
    bool valid = level >= 0 && level < MLC_TENSOR_CHECKS_COUNT;
    int32_t mine = valid ? level : -1;
    int32_t *all = malloc((size_t)p * sizeof *all);
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d levels", fn, p);
    /* every rank must switch together, or their calls would not match */
    int outer = mlc_comm_own_begin(comm, MLC_COMM_CALL_TENSOR_SET_CHECKS); /* named in a mismatch or timeout */
    st = mlc_allgather(&mine, all, 1, MLC_INT32, comm, NULL);
    mlc_comm_own_end(comm, outer);
    if (st == MLC_SUCCESS && !valid)
        st = mlc_error(MLC_ERR_INVALID_ARG, "%s: level %d is not one of 0 (full), 1 (local)", fn,
                       (int)level);
    for (int q = 1; st == MLC_SUCCESS && q < p; q++) {
        if (all[q] == all[0]) continue;
        st = mlc_error(MLC_ERR_MISMATCH, "%s: rank 0 asks for \"%s\", rank %d for %s%s%s", fn,
                       all[0] >= 0 ? check_names[all[0]] : "an unknown level", q,
                       all[q] >= 0 ? "\"" : "", all[q] >= 0 ? check_names[all[q]] : "an unknown level",
                       all[q] >= 0 ? "\"" : "");
    }
    free(all);
    pthread_once(&checks_once, make_checks_key);
    if (st == MLC_SUCCESS && checks_key < 0)
        st = mlc_error(MLC_ERR_NO_MEMORY, "%s: no per-communicator key left for the tensor layer", fn);
    if (st == MLC_SUCCESS) mlc_comm_set_value(comm, checks_key, (void *)(intptr_t)level);
    return st;
}

MLC_API mlc_tensor_checks_t mlc_tensor_get_checks(const mlc_comm_t *comm)
{
    return comm ? checks_of(comm) : MLC_TENSOR_CHECKS_FULL;
}
