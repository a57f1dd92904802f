/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The data-moving API: every argument validated once, here; then the request
 * is created, numbered, given its algorithm and handed to the backend table's start entry.
 */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "algos/select.h"
#include "base/copy_fields.h"
#include "backend.h"
#include "base/clock.h"
#include "base/wait.h"
#include "base/dtype.h"
#include "base/error.h"
#include "signature.h"
#include "base/log.h"

static const char *const coll_names[] = {
#define MLC_X_NAME(name, str, env) str,
    MLC_COLL_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};

const char *mlc_coll_name(mlc_coll_t coll)
{
    return coll >= 0 && coll < MLC_COLL_COUNT ? coll_names[coll] : NULL;
}

/* fn: the public function's name without "mlc_" (coll_names[coll], or "probe"). */
static mlc_status_t check_comm(const mlc_comm_t *comm, const char *fn)
{
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: comm is NULL", fn);
    mlc_status_t st = mlc_comm_check(comm);
    if (__builtin_expect(st == MLC_SUCCESS, 1)) return st;
    char name[128]; /* name the call that found it, and the user's call it ran inside */
    if (comm->comm_call)
        snprintf(name, sizeof name, "mlc_%s inside %s", fn, mlc_comm_call_name(comm->comm_call));
    else
        snprintf(name, sizeof name, "mlc_%s", fn);
    return mlc_error_in(name, st);
}

static mlc_status_t check_dtype(mlc_coll_t coll, mlc_dtype_t dtype)
{
    if (mlc_dtype_size(dtype) > 0) return MLC_SUCCESS;
    if (mlc_dtype_is_record(dtype) && (dtype & ~0x3ffff) == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: a record dtype whose size is not 1..65535 bytes "
                         "(MLC_RECORD(n) takes n from 1 to 65535)", coll_names[coll]);
    return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: unknown dtype %d", coll_names[coll], (int)dtype);
}

static mlc_status_t check_op(mlc_coll_t coll, mlc_dtype_t dtype, mlc_op_t op)
{
    mlc_status_t st = mlc_op_check(dtype, op);
    if (st == MLC_SUCCESS) return st;
    char fn[48];
    snprintf(fn, sizeof fn, "mlc_%s", coll_names[coll]);
    return mlc_error_in(fn, st);
}

static mlc_status_t check_buf(mlc_coll_t coll, const char *what, const void *buf, size_t count)
{
    if (!(buf || count == 0))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s is NULL with count %zu", coll_names[coll], what, count);
    return MLC_SUCCESS;
}

static mlc_status_t check_rank(mlc_coll_t coll, const char *what, int r, const mlc_comm_t *comm)
{
    if (!(r >= 0 && r < comm->size))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s %d is out of range (communicator of %d ranks)",
              coll_names[coll], what, r, comm->size);
    return MLC_SUCCESS;
}

/* No buffer is larger than PTRDIFF_MAX bytes (the largest object C allows). */
#define MLC_MAX_BYTES ((size_t)PTRDIFF_MAX)

/* Bytes = count * esize, a size some buffer can have (no division: this is on every call's path). */
static mlc_status_t bytes_of(mlc_coll_t coll, size_t count, size_t esize, size_t *out)
{
    if (!(!__builtin_mul_overflow(count, esize, out) && *out <= MLC_MAX_BYTES))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: count %zu of %zu-byte elements is larger than any buffer can be (PTRDIFF_MAX bytes)",
              coll_names[coll], count, esize);
    return MLC_SUCCESS;
}

/* Bytes = count * p * esize (a whole-communicator buffer), without overflow. */
static mlc_status_t total_of(mlc_coll_t coll, size_t count, int p, size_t esize, size_t *out)
{
    size_t n;
    if (!(!__builtin_mul_overflow(count, (size_t)p, &n) && !__builtin_mul_overflow(n, esize, out) &&
                  *out <= MLC_MAX_BYTES))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: count %zu for each of %d ranks (%zu-byte elements) is larger than any buffer can be "
              "(PTRDIFF_MAX bytes)",
              coll_names[coll], count, p, esize);
    return MLC_SUCCESS;
}

static bool overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    if (!a || !b || alen == 0 || blen == 0) return false;
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + blen && b0 < a0 + alen;
}

/* Send and receive ranges may only overlap in the exact in-place form. */
static mlc_status_t check_overlap(mlc_coll_t coll, const void *s, size_t sbytes, const void *r,
                                  size_t rbytes, const void *inplace_send, bool *inplace)
{
    *inplace = false;
    if (s && s == inplace_send) {
        *inplace = true;
        return MLC_SUCCESS;
    }
    if (!(!overlap(s, sbytes, r, rbytes)))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: send buffer %p (%zu bytes) and receive buffer %p (%zu bytes) overlap "
              "without being the in-place form",
              coll_names[coll], s, sbytes, r, rbytes);
    return MLC_SUCCESS;
}

/*
 * A v-layout: counts[i] elements at element offset displs[i], for each of p
 * ranks. Every end displs[i] + counts[i], in bytes, must be an offset some
 * buffer can have (no overflow, at most PTRDIFF_MAX), also where counts[i]
 * is 0 (backends form the address). *ext = the extent in elements, the
 * largest end of a non-empty block. A backend trusts what passes here.
 */
static mlc_status_t check_vlayout(mlc_coll_t coll, const char *cname, const size_t *counts,
                                  const char *dname, const size_t *displs, int p, size_t esize,
                                  size_t *ext)
{
    if (!(counts))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s is NULL", coll_names[coll], cname);
    if (!(displs))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s is NULL", coll_names[coll], dname);
    size_t e = 0;
    for (int i = 0; i < p; i++) {
        size_t end, bytes;
        if (!(!__builtin_add_overflow(displs[i], counts[i], &end) &&
                      !__builtin_mul_overflow(end, esize, &bytes) && bytes <= MLC_MAX_BYTES))
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s[%d] = %zu and %s[%d] = %zu (%zu-byte elements) reach past any buffer "
                  "(the end overflows or exceeds PTRDIFF_MAX bytes)",
                  coll_names[coll], dname, i, displs[i], cname, i, counts[i], esize);
        if (counts[i] && end > e) e = end;
    }
    *ext = e;
    return MLC_SUCCESS;
}

typedef struct vblock {
    size_t displ, count;
    int rank;
} vblock_t;

static int vblock_cmp(const void *a, const void *b)
{
    const vblock_t *x = a, *y = b;
    return x->displ < y->displ ? -1 : x->displ > y->displ;
}

/*
 * The blocks of a receive layout (checked by check_vlayout) must not
 * overlap: an element written twice holds whichever block came last, not
 * the same on every rank (MPI: no location is written more than once).
 * One pass while the non-empty blocks come in order of displacement (prefix
 * sums, the usual layout); else their sorted copy.
 */
static mlc_status_t check_disjoint(mlc_coll_t coll, const char *cname, const size_t *counts, const char *dname,
                                   const size_t *displs, int p)
{
    int a = -1, b = -1; /* a and b overlap, a the earlier block */
    bool sorted = true;
    for (int i = 0; i < p && sorted && b < 0; i++) {
        if (!counts[i]) continue;
        if (a >= 0 && displs[i] < displs[a]) sorted = false;
        else if (a >= 0 && displs[i] < displs[a] + counts[a]) b = i;
        else a = i;
    }
    if (!sorted) {
        vblock_t *v = malloc(sizeof *v * (size_t)p);
        if (!v) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory to check %d blocks", coll_names[coll], p);
        int n = 0;
        for (int i = 0; i < p; i++)
            if (counts[i]) v[n++] = (vblock_t){displs[i], counts[i], i};
        qsort(v, (size_t)n, sizeof *v, vblock_cmp);
        for (int k = 1; k < n && b < 0; k++)
            if (v[k].displ < v[k - 1].displ + v[k - 1].count) a = v[k - 1].rank, b = v[k].rank;
        free(v);
    }
    if (b < 0) return MLC_SUCCESS;
    return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: the receive blocks of ranks %d (%s %zu, %s %zu) and %d (%s %zu, %s %zu) "
                     "overlap: each element may be written once", coll_names[coll], a, dname, displs[a], cname,
                     counts[a], b, dname, displs[b], cname, counts[b]);
}

/* Extent in elements of a v-layout: max(displs[i] + counts[i]); 0 when counts is NULL. */
size_t mlc_vextent(const size_t *counts, const size_t *displs, int p)
{
    size_t e = 0;
    for (int i = 0; counts && i < p; i++)
        if (counts[i] && displs[i] + counts[i] > e) e = displs[i] + counts[i];
    return e;
}

void mlc_request_desc(const mlc_request_t *req, mlc_coll_desc_t *d)
{
    const mlc_args_t *a = &req->args;
    memset(d, 0, sizeof *d);
    d->coll = req->coll;
    d->rank = req->comm->rank;
    d->size = req->comm->size;
    d->root = a->root;
    d->count = a->count;
    d->esize = a->esize;
    d->counts = a->counts;
    d->displs = a->displs;
    d->counts2 = a->counts2;
    d->displs2 = a->displs2;
    d->inplace = a->inplace;
    d->commutative = mlc_op_commutative(a->op);
    d->has_send = a->sendbuf != NULL;
    d->has_recv = a->recvbuf != NULL;
}

/* The selector's choice, ignoring any forced algorithm. */
const char *mlc_request_default_algo(const mlc_request_t *req)
{
    const mlc_comm_t *comm = req->comm;
    if (req->coll >= MLC_COLL_SEND || !comm->algo_selects[req->coll]) return NULL;
    if (comm->be->choose_algo) {
        const char *own = comm->be->choose_algo(req);
        if (own) return own;
    }
    mlc_coll_desc_t d;
    mlc_request_desc(req, &d);
    const mlc_algo_t *a = mlc_algo_select(&d, &comm->model);
    return a ? a->name : NULL;
}

/* A name, or NULL for "native" (the backend's own collective). */
static const char *unless_native(const char *name) { return name && strcmp(name, "native") == 0 ? NULL : name; }

/* The algorithm every rank will run: forced, else the selector's choice. */
const char *mlc_request_algo(const mlc_request_t *req)
{
    const mlc_comm_t *comm = req->comm;
    if (req->coll >= MLC_COLL_SEND) return NULL;
    if (comm->no_own_algos) return NULL;
    const char *forced = comm->algo_forced[req->coll];
    if (forced) return unless_native(forced);
    return comm->algo_selects[req->coll] ? unless_native(mlc_request_default_algo(req)) : NULL;
}

/* *dst = *src, just after the caller stored src's fields (base/copy_fields.h). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(mlc_args_t) == 112, "a field added to mlc_args_t is copied in args_copy too");
#endif
static void args_copy(mlc_args_t *dst, const mlc_args_t *src)
{
    MLC_COPY_FIELD(dst, src, sendbuf);
    MLC_COPY_FIELD(dst, src, recvbuf);
    MLC_COPY_FIELD(dst, src, count);
    MLC_COPY_FIELD(dst, src, count2);
    MLC_COPY_FIELD(dst, src, counts);
    MLC_COPY_FIELD(dst, src, displs);
    MLC_COPY_FIELD(dst, src, counts2);
    MLC_COPY_FIELD(dst, src, displs2);
    MLC_COPY_FIELD(dst, src, dtype);
    MLC_COPY_FIELD(dst, src, esize);
    MLC_COPY_FIELD(dst, src, op);
    MLC_COPY_FIELD(dst, src, root);
    MLC_COPY_FIELD(dst, src, peer2);
    MLC_COPY_FIELD(dst, src, tag);
    MLC_COPY_FIELD(dst, src, tag2);
    MLC_COPY_FIELD(dst, src, inplace);
    MLC_COPY_FIELD(dst, src, msg_status);
}

/* Whether MLC_CHECK compares this call first: a user's collective, or the
 * collective a communicator call (split, a tensor layer's) runs itself, which
 * another rank's user collective must not match either. Not the check's own
 * (one level deeper), nor creation's: it decides whether MLC_CHECK is on. */
static bool compared_first(const mlc_comm_t *comm, mlc_coll_t coll)
{
    if (!comm->cfg.check || coll >= MLC_COLL_SEND || comm->size < 2 || comm->be->signs_calls) return false;
    if (comm->internal_depth == 0) return true;
    return comm->internal_depth == 1 && comm->comm_call != MLC_COMM_CALL_NONE &&
           comm->comm_call != MLC_COMM_CALL_INIT;
}

/* Start the request; block on it when the caller passed no request pointer. */
mlc_status_t mlc_submit_plain(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out)
{
    if (compared_first(comm, coll)) {
        mlc_status_t st = mlc_check_call(comm, coll, args);
        if (st != MLC_SUCCESS) return st;
    }
    mlc_request_t *req = mlc_request_alloc(comm);
    if (!req) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for a request", coll_names[coll]);
    req->coll = coll;
    args_copy(&req->args, args);
    req->bytes = bytes;
    req->blocking = out == NULL;
    req->internal = comm->internal_depth > 0;
    req->inside_call = comm->comm_call;
    req->grouped = comm->group_submitting && !req->internal;
    if (coll < MLC_COLL_SEND) req->seq = comm->coll_seq++;
    req->algo = mlc_request_algo(req);
    if (comm->prof) req->t_start = mlc_now();
    MLC_DEBUG("rank %d: %s #%llu %zu bytes algo %s", comm->rank, coll_names[coll],
              (unsigned long long)req->seq, bytes, req->algo ? req->algo : "native");
    mlc_status_t st = comm->be->start[coll](req);
    if (st != MLC_SUCCESS) {
        mlc_request_release(req);
        return st;
    }
    if (out) {
        *out = req;
        return MLC_SUCCESS;
    }
    st = mlc_request_wait_internal(req);
    mlc_request_release(req);
    return st;
}

/* A decorator takes whole calls (the staged backend: device buffers on a host backend). */
mlc_status_t mlc_submit_now(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                            mlc_request_t **out)
{
    if (comm->be->submit) return comm->be->submit(comm, coll, args, bytes, out);
    return mlc_submit_plain(comm, coll, args, bytes, out);
}

/* Collectives whose count every rank passes alike move nothing at count 0:
 * they return at once, as MPI's do, and take no call number, so no rank
 * waits for another (the v-forms, whose counts differ per rank, still run). */
static bool moves_nothing(mlc_coll_t coll, const mlc_args_t *a)
{
    if (a->count != 0) return false;
    switch (coll) {
    case MLC_COLL_BROADCAST:
    case MLC_COLL_REDUCE:
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_ALLGATHER:
    case MLC_COLL_REDUCE_SCATTER:
    case MLC_COLL_ALLTOALL:
    case MLC_COLL_GATHER:
    case MLC_COLL_SCATTER: return true;
    default: return false;
    }
}

/* The request form of a call that moved nothing: complete from the start. */
static mlc_status_t completed_request(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args,
                                      mlc_request_t **out)
{
    mlc_request_t *req = mlc_request_alloc(comm);
    if (!req) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for a request", coll_names[coll]);
    req->coll = coll;
    req->args = *args;
    atomic_store_explicit(&req->done, 1, memory_order_release);
    *out = req;
    return MLC_SUCCESS;
}

/* A user's call inside an open group joins it (mlcomm's own traffic never does). */
static mlc_status_t submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                           mlc_request_t **out)
{
    if (__builtin_expect(args->count == 0, 0) && moves_nothing(coll, args)) {
        /* No wait will check the communicator: a failure a peer posted (its
         * abort, a death it found) and not seen here yet is found now. Peers
         * are not probed: a call that moves nothing costs next to nothing. */
        mlc_status_t health = comm->be->posted_failure ? comm->be->posted_failure(comm) : comm->be->health(comm);
        if (health != MLC_SUCCESS) {
            mlc_status_t st = mlc_comm_check(comm);
            return st ? st : mlc_error(health, "mlc_%s: the communicator has failed", coll_names[coll]);
        }
        return out ? completed_request(comm, coll, args, out) : MLC_SUCCESS;
    }
    if (__builtin_expect(atomic_load_explicit(&mlc_groups_open, memory_order_relaxed) > 0, 0) &&
        comm->internal_depth == 0 && mlc_group_is_open())
        return mlc_group_submit(comm, coll, args, bytes, out);
    return mlc_submit_now(comm, coll, args, bytes, out);
}

/*
 * a = the operation's arguments, every field named: a compound literal that
 * names only some fields makes the compiler clear the whole ~110 bytes first
 * (rep stos, ~15 ns on the 8-byte path) before storing them. The defaults
 * are then overridden by the operation's own fields (hence the pragma). A
 * field added to mlc_args_t (comm.h) is added here too.
 */
#define MLC_SET_ARGS(dst, ...)                                                                     \
    do {                                                                                           \
        _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Woverride-init\"")     \
        (dst) = (mlc_args_t){.sendbuf = NULL, .recvbuf = NULL, .count = 0, .count2 = 0,           \
                             .counts = NULL, .displs = NULL, .counts2 = NULL, .displs2 = NULL,   \
                             .dtype = (mlc_dtype_t)0, .esize = 0, .op = (mlc_op_t)0, .root = 0,  \
                             .peer2 = 0, .tag = 0, .tag2 = 0, .inplace = false,                  \
                             .msg_status = NULL, __VA_ARGS__};                                    \
        _Pragma("GCC diagnostic pop")                                                              \
    } while (0)

/* Validation: every check returns its status, and each call returns the first failure. */

mlc_status_t mlc_broadcast(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype,
                           int root, mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_BROADCAST]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_BROADCAST, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_BROADCAST, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t n = 0;
    if ((st = bytes_of(MLC_COLL_BROADCAST, count, mlc_dtype_size(dtype), &n)) != MLC_SUCCESS) return st;
    if (comm->rank == root && (st = check_buf(MLC_COLL_BROADCAST, "sendbuf (root)", sendbuf, count)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_BROADCAST, "recvbuf", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace = false;
    if (comm->rank == root)
        if ((st = check_overlap(MLC_COLL_BROADCAST, sendbuf, n, recvbuf, n, recvbuf, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = comm->rank == root ? sendbuf : NULL, .recvbuf = recvbuf, .count = count,
                    .dtype = dtype, .esize = mlc_dtype_size(dtype), .root = root, .inplace = inplace);
    return submit(comm, MLC_COLL_BROADCAST, &a, n, req);
}

mlc_status_t mlc_reduce(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype,
                        mlc_op_t op, int root, mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_REDUCE]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_REDUCE, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_op(MLC_COLL_REDUCE, dtype, op)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_REDUCE, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t n = 0;
    if ((st = bytes_of(MLC_COLL_REDUCE, count, mlc_dtype_size(dtype), &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_REDUCE, "sendbuf", sendbuf, count)) != MLC_SUCCESS) return st;
    if (comm->rank == root && (st = check_buf(MLC_COLL_REDUCE, "recvbuf (root)", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace = false;
    if (comm->rank == root && (st = check_overlap(MLC_COLL_REDUCE, sendbuf, n, recvbuf, n, recvbuf, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = comm->rank == root ? recvbuf : NULL, .count = count,
                    .dtype = dtype, .esize = mlc_dtype_size(dtype), .op = op, .root = root,
                    .inplace = inplace);
    return submit(comm, MLC_COLL_REDUCE, &a, n, req);
}

mlc_status_t mlc_allreduce(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype,
                           mlc_op_t op, mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_ALLREDUCE]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_ALLREDUCE, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_op(MLC_COLL_ALLREDUCE, dtype, op)) != MLC_SUCCESS) return st;
    size_t n = 0;
    if ((st = bytes_of(MLC_COLL_ALLREDUCE, count, mlc_dtype_size(dtype), &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLREDUCE, "sendbuf", sendbuf, count)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLREDUCE, "recvbuf", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace;
    if ((st = check_overlap(MLC_COLL_ALLREDUCE, sendbuf, n, recvbuf, n, recvbuf, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype,
                    .esize = mlc_dtype_size(dtype), .op = op, .inplace = inplace);
    return submit(comm, MLC_COLL_ALLREDUCE, &a, n, req);
}

mlc_status_t mlc_allgather(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype,
                           mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_ALLGATHER]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_ALLGATHER, dtype)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, total = 0;
    if ((st = bytes_of(MLC_COLL_ALLGATHER, count, es, &n)) != MLC_SUCCESS) return st;
    if ((st = total_of(MLC_COLL_ALLGATHER, count, comm->size, es, &total)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLGATHER, "sendbuf", sendbuf, count)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLGATHER, "recvbuf", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace;
    const void *ip = recvbuf ? (const char *)recvbuf + (size_t)comm->rank * n : NULL;
    if ((st = check_overlap(MLC_COLL_ALLGATHER, sendbuf, n, recvbuf, total, ip, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype, .esize = es,
                    .inplace = inplace);
    return submit(comm, MLC_COLL_ALLGATHER, &a, n, req);
}

mlc_status_t mlc_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                            const size_t *recvcounts, const size_t *displs, mlc_dtype_t dtype,
                            mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_ALLGATHERV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_ALLGATHERV, dtype)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, ext = 0;
    if ((st = bytes_of(MLC_COLL_ALLGATHERV, sendcount, es, &n)) != MLC_SUCCESS) return st;
    if ((st = check_vlayout(MLC_COLL_ALLGATHERV, "recvcounts", recvcounts, "displs", displs, comm->size, es, &ext)) != MLC_SUCCESS) return st;
    if ((st = check_disjoint(MLC_COLL_ALLGATHERV, "recvcounts", recvcounts, "displs", displs, comm->size)) != MLC_SUCCESS) return st;
    if (!(recvcounts[comm->rank] == sendcount))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_allgatherv: sendcount %zu differs from recvcounts[%d] = %zu", sendcount, comm->rank,
              recvcounts[comm->rank]);
    if ((st = check_buf(MLC_COLL_ALLGATHERV, "sendbuf", sendbuf, sendcount)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLGATHERV, "recvbuf", recvbuf, ext)) != MLC_SUCCESS) return st;
    bool inplace;
    const void *ip = recvbuf ? (const char *)recvbuf + displs[comm->rank] * es : NULL;
    if ((st = check_overlap(MLC_COLL_ALLGATHERV, sendbuf, n, recvbuf, ext * es, ip, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount, .counts = recvcounts,
                    .displs = displs, .dtype = dtype, .esize = es, .inplace = inplace);
    return submit(comm, MLC_COLL_ALLGATHERV, &a, n, req);
}

mlc_status_t mlc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                mlc_dtype_t dtype, mlc_op_t op, mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_REDUCE_SCATTER]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_REDUCE_SCATTER, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_op(MLC_COLL_REDUCE_SCATTER, dtype, op)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, total = 0;
    if ((st = bytes_of(MLC_COLL_REDUCE_SCATTER, recvcount, es, &n)) != MLC_SUCCESS) return st;
    if ((st = total_of(MLC_COLL_REDUCE_SCATTER, recvcount, comm->size, es, &total)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_REDUCE_SCATTER, "sendbuf", sendbuf, recvcount)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_REDUCE_SCATTER, "recvbuf", recvbuf, recvcount)) != MLC_SUCCESS) return st;
    bool inplace;
    const void *ip_recv = sendbuf ? (const char *)sendbuf + (size_t)comm->rank * n : NULL;
    /* in place: recvbuf == sendbuf + rank*recvcount */
    inplace = recvbuf && recvbuf == ip_recv;
    if (!inplace)
        if (!(!overlap(sendbuf, total, recvbuf, n)))
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_reduce_scatter: send buffer %p (%zu bytes) and receive buffer %p (%zu bytes) "
                  "overlap without being the in-place form (recvbuf == sendbuf + rank*recvcount)",
                  sendbuf, total, recvbuf, n);
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount, .dtype = dtype,
                    .esize = es, .op = op, .inplace = inplace);
    return submit(comm, MLC_COLL_REDUCE_SCATTER, &a, n, req);
}

mlc_status_t mlc_alltoall(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype,
                          mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_ALLTOALL]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_ALLTOALL, dtype)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, total = 0;
    if ((st = bytes_of(MLC_COLL_ALLTOALL, count, es, &n)) != MLC_SUCCESS) return st;
    if ((st = total_of(MLC_COLL_ALLTOALL, count, comm->size, es, &total)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLTOALL, "sendbuf", sendbuf, count)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLTOALL, "recvbuf", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace;
    if ((st = check_overlap(MLC_COLL_ALLTOALL, sendbuf, total, recvbuf, total, recvbuf, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count, .dtype = dtype, .esize = es,
                    .inplace = inplace);
    return submit(comm, MLC_COLL_ALLTOALL, &a, total, req);
}

mlc_status_t mlc_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                           void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                           mlc_dtype_t dtype, mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_ALLTOALLV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_ALLTOALLV, dtype)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), sext = 0, rext = 0;
    if ((st = check_vlayout(MLC_COLL_ALLTOALLV, "sendcounts", sendcounts, "sdispls", sdispls, comm->size, es, &sext)) != MLC_SUCCESS) return st;
    if ((st = check_vlayout(MLC_COLL_ALLTOALLV, "recvcounts", recvcounts, "rdispls", rdispls, comm->size, es, &rext)) != MLC_SUCCESS) return st;
    if ((st = check_disjoint(MLC_COLL_ALLTOALLV, "recvcounts", recvcounts, "rdispls", rdispls, comm->size)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLTOALLV, "sendbuf", sendbuf, sext)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_ALLTOALLV, "recvbuf", recvbuf, rext)) != MLC_SUCCESS) return st;
    bool inplace;
    if ((st = check_overlap(MLC_COLL_ALLTOALLV, sendbuf, sext * es, recvbuf, rext * es, NULL, &inplace)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .counts = sendcounts, .displs = sdispls,
                    .counts2 = recvcounts, .displs2 = rdispls, .dtype = dtype, .esize = es);
    return submit(comm, MLC_COLL_ALLTOALLV, &a, sext * es, req);
}

mlc_status_t mlc_gather(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype, int root,
                        mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_GATHER]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_GATHER, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_GATHER, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, total = 0;
    if ((st = bytes_of(MLC_COLL_GATHER, count, es, &n)) != MLC_SUCCESS) return st;
    if ((st = total_of(MLC_COLL_GATHER, count, comm->size, es, &total)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_GATHER, "sendbuf", sendbuf, count)) != MLC_SUCCESS) return st;
    bool inplace = false, am_root = comm->rank == root;
    if (am_root) {
        if ((st = check_buf(MLC_COLL_GATHER, "recvbuf (root)", recvbuf, count)) != MLC_SUCCESS) return st;
        const void *ip = recvbuf ? (const char *)recvbuf + (size_t)root * n : NULL;
        if ((st = check_overlap(MLC_COLL_GATHER, sendbuf, n, recvbuf, total, ip, &inplace)) != MLC_SUCCESS) return st;
    }
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = am_root ? recvbuf : NULL, .count = count,
                    .dtype = dtype, .esize = es, .root = root, .inplace = inplace);
    return submit(comm, MLC_COLL_GATHER, &a, n, req);
}

mlc_status_t mlc_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                         const size_t *recvcounts, const size_t *displs, mlc_dtype_t dtype, int root,
                         mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_GATHERV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_GATHERV, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_GATHERV, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0;
    if ((st = bytes_of(MLC_COLL_GATHERV, sendcount, es, &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_GATHERV, "sendbuf", sendbuf, sendcount)) != MLC_SUCCESS) return st;
    bool inplace = false, am_root = comm->rank == root;
    if (am_root) {
        size_t ext = 0;
        if ((st = check_vlayout(MLC_COLL_GATHERV, "recvcounts", recvcounts, "displs", displs, comm->size, es, &ext)) != MLC_SUCCESS) return st;
        if ((st = check_disjoint(MLC_COLL_GATHERV, "recvcounts", recvcounts, "displs", displs, comm->size)) != MLC_SUCCESS) return st;
        if (!(recvcounts[root] == sendcount))
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_gatherv: root's sendcount %zu differs from recvcounts[%d] = %zu",
                  sendcount, root, recvcounts[root]);
        if ((st = check_buf(MLC_COLL_GATHERV, "recvbuf (root)", recvbuf, ext)) != MLC_SUCCESS) return st;
        const void *ip = recvbuf ? (const char *)recvbuf + displs[root] * es : NULL;
        if ((st = check_overlap(MLC_COLL_GATHERV, sendbuf, n, recvbuf, ext * es, ip, &inplace)) != MLC_SUCCESS) return st;
    }
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = am_root ? recvbuf : NULL, .count = sendcount,
                    .counts = am_root ? recvcounts : NULL, .displs = am_root ? displs : NULL,
                    .dtype = dtype, .esize = es, .root = root, .inplace = inplace);
    return submit(comm, MLC_COLL_GATHERV, &a, n, req);
}

mlc_status_t mlc_scatter(const void *sendbuf, void *recvbuf, size_t count, mlc_dtype_t dtype, int root,
                         mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_SCATTER]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_SCATTER, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_SCATTER, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0, total = 0;
    if ((st = bytes_of(MLC_COLL_SCATTER, count, es, &n)) != MLC_SUCCESS) return st;
    if ((st = total_of(MLC_COLL_SCATTER, count, comm->size, es, &total)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_SCATTER, "recvbuf", recvbuf, count)) != MLC_SUCCESS) return st;
    bool inplace = false, am_root = comm->rank == root;
    if (am_root) {
        if ((st = check_buf(MLC_COLL_SCATTER, "sendbuf (root)", sendbuf, count)) != MLC_SUCCESS) return st;
        /* in place: recvbuf == sendbuf + root*count */
        const void *ip = sendbuf ? (const char *)sendbuf + (size_t)root * n : NULL;
        inplace = recvbuf && recvbuf == ip;
        if (!inplace)
            if (!(!overlap(sendbuf, total, recvbuf, n)))
                return mlc_error(MLC_ERR_INVALID_ARG, "mlc_scatter: send buffer and receive buffer overlap without being the in-place form");
    }
    MLC_SET_ARGS(a, .sendbuf = am_root ? sendbuf : NULL, .recvbuf = recvbuf, .count = count, .dtype = dtype,
                    .esize = es, .root = root, .inplace = inplace);
    return submit(comm, MLC_COLL_SCATTER, &a, n, req);
}

mlc_status_t mlc_scatterv(const void *sendbuf, const size_t *sendcounts, const size_t *displs,
                          void *recvbuf, size_t recvcount, mlc_dtype_t dtype, int root,
                          mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_SCATTERV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_SCATTERV, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_rank(MLC_COLL_SCATTERV, "root", root, comm)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), n = 0;
    if ((st = bytes_of(MLC_COLL_SCATTERV, recvcount, es, &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_SCATTERV, "recvbuf", recvbuf, recvcount)) != MLC_SUCCESS) return st;
    bool inplace = false, am_root = comm->rank == root;
    if (am_root) {
        size_t ext = 0;
        if ((st = check_vlayout(MLC_COLL_SCATTERV, "sendcounts", sendcounts, "displs", displs, comm->size, es, &ext)) != MLC_SUCCESS) return st;
        if (!(sendcounts[root] == recvcount))
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_scatterv: root's recvcount %zu differs from sendcounts[%d] = %zu",
                  recvcount, root, sendcounts[root]);
        if ((st = check_buf(MLC_COLL_SCATTERV, "sendbuf (root)", sendbuf, ext)) != MLC_SUCCESS) return st;
        const void *ip = sendbuf ? (const char *)sendbuf + displs[root] * es : NULL;
        inplace = recvbuf && recvbuf == ip;
        if (!inplace)
            if (!(!overlap(sendbuf, ext * es, recvbuf, n)))
                return mlc_error(MLC_ERR_INVALID_ARG, "mlc_scatterv: send buffer and receive buffer overlap without being the in-place form");
    }
    MLC_SET_ARGS(a, .sendbuf = am_root ? sendbuf : NULL, .recvbuf = recvbuf, .count = recvcount,
                    .counts = am_root ? sendcounts : NULL, .displs = am_root ? displs : NULL,
                    .dtype = dtype, .esize = es, .root = root, .inplace = inplace);
    return submit(comm, MLC_COLL_SCATTERV, &a, n, req);
}

mlc_status_t mlc_barrier(mlc_comm_t *comm, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_BARRIER]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    MLC_SET_ARGS(a, .dtype = MLC_UINT8, .esize = 1);
    return submit(comm, MLC_COLL_BARRIER, &a, 0, req);
}

/* ---- point-to-point ------------------------------------------------------ */

static mlc_status_t check_tag(const char *fn, const char *what, int tag, bool any_ok, const mlc_comm_t *comm)
{
    if (any_ok && tag == MLC_ANY_TAG) return MLC_SUCCESS;
    int tmax = mlc_comm_tag_max(comm);
    if (!(tag >= 0 && tag <= tmax))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s %d is out of range [0, %d]%s", fn, what, tag,
              tmax, any_ok ? " (or MLC_ANY_TAG)" : "");
    return MLC_SUCCESS;
}

static mlc_status_t check_peer(const char *fn, const char *what, int peer, bool any_ok, const mlc_comm_t *comm)
{
    if (any_ok && peer == MLC_ANY_SOURCE) return MLC_SUCCESS;
    if (!(peer >= 0 && peer < comm->size))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_%s: %s %d is out of range (communicator of %d ranks%s)",
              fn, what, peer, comm->size, any_ok ? ", or MLC_ANY_SOURCE" : "");
    return MLC_SUCCESS;
}

mlc_status_t mlc_send(const void *buf, size_t count, mlc_dtype_t dtype, int peer, int tag, mlc_comm_t *comm,
                      mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_SEND]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_SEND, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_peer(coll_names[MLC_COLL_SEND], "peer", peer, false, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag(coll_names[MLC_COLL_SEND], "tag", tag, false, comm)) != MLC_SUCCESS) return st;
    size_t n = 0;
    if ((st = bytes_of(MLC_COLL_SEND, count, mlc_dtype_size(dtype), &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_SEND, "buf", buf, count)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .sendbuf = buf, .count = count, .dtype = dtype, .esize = mlc_dtype_size(dtype),
                    .root = peer, .tag = tag);
    return submit(comm, MLC_COLL_SEND, &a, n, req);
}

mlc_status_t mlc_recv(void *buf, size_t count, mlc_dtype_t dtype, int peer, int tag, mlc_comm_t *comm,
                      mlc_msg_status_t *status, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_RECV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_RECV, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_peer(coll_names[MLC_COLL_RECV], "peer", peer, true, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag(coll_names[MLC_COLL_RECV], "tag", tag, true, comm)) != MLC_SUCCESS) return st;
    size_t n = 0;
    if ((st = bytes_of(MLC_COLL_RECV, count, mlc_dtype_size(dtype), &n)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_RECV, "buf", buf, count)) != MLC_SUCCESS) return st;
    MLC_SET_ARGS(a, .recvbuf = buf, .count = count, .dtype = dtype, .esize = mlc_dtype_size(dtype),
                    .root = peer, .tag = tag, .msg_status = status);
    return submit(comm, MLC_COLL_RECV, &a, n, req);
}

mlc_status_t mlc_sendrecv(const void *sendbuf, size_t sendcount, int dest, int sendtag, void *recvbuf,
                          size_t recvcount, int source, int recvtag, mlc_dtype_t dtype, mlc_comm_t *comm,
                          mlc_msg_status_t *status, mlc_request_t **req)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, coll_names[MLC_COLL_SENDRECV]);
    if (st != MLC_SUCCESS) return st;
    mlc_args_t a; /* each operation fills it whole, once */
    if ((st = check_dtype(MLC_COLL_SENDRECV, dtype)) != MLC_SUCCESS) return st;
    if ((st = check_peer(coll_names[MLC_COLL_SENDRECV], "dest", dest, false, comm)) != MLC_SUCCESS) return st;
    if ((st = check_peer(coll_names[MLC_COLL_SENDRECV], "source", source, true, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag(coll_names[MLC_COLL_SENDRECV], "sendtag", sendtag, false, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag(coll_names[MLC_COLL_SENDRECV], "recvtag", recvtag, true, comm)) != MLC_SUCCESS) return st;
    size_t es = mlc_dtype_size(dtype), sn = 0, rn = 0;
    if ((st = bytes_of(MLC_COLL_SENDRECV, sendcount, es, &sn)) != MLC_SUCCESS) return st;
    if ((st = bytes_of(MLC_COLL_SENDRECV, recvcount, es, &rn)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_SENDRECV, "sendbuf", sendbuf, sendcount)) != MLC_SUCCESS) return st;
    if ((st = check_buf(MLC_COLL_SENDRECV, "recvbuf", recvbuf, recvcount)) != MLC_SUCCESS) return st;
    if (!(!overlap(sendbuf, sn, recvbuf, rn)))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_sendrecv: send and receive buffers overlap");
    MLC_SET_ARGS(a, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = sendcount, .count2 = recvcount,
                    .dtype = dtype, .esize = es, .root = dest, .peer2 = source, .tag = sendtag,
                    .tag2 = recvtag, .msg_status = status);
    return submit(comm, MLC_COLL_SENDRECV, &a, sn, req);
}

mlc_status_t mlc_iprobe(int source, int tag, mlc_comm_t *comm, int *flag, mlc_msg_status_t *status)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, "iprobe");
    if (st != MLC_SUCCESS) return st;
    if (!(flag))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_iprobe: flag is NULL");
    if ((st = check_peer("iprobe", "source", source, true, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag("iprobe", "tag", tag, true, comm)) != MLC_SUCCESS) return st;
    mlc_msg_status_t tmp;
    int f = 0;
    st = comm->be->iprobe(comm, source, tag, &f, &tmp);
    if (st != MLC_SUCCESS) return st;
    *flag = f;
    if (f && status) *status = tmp;
    return MLC_SUCCESS;
}

/* mlc_probe as the shared wait loop sees it (base/wait.h). */
typedef struct probe_wait {
    mlc_comm_t *comm;
    int source, tag, flag;
    bool failed;          /* the communicator failed (mlc_comm_check reports it) */
    mlc_status_t st;      /* else an iprobe error */
    mlc_msg_status_t found;
} probe_wait_t;

static int probe_step(void *p)
{
    probe_wait_t *w = p;
    mlc_status_t st = w->comm->be->iprobe(w->comm, w->source, w->tag, &w->flag, &w->found);
    if (st != MLC_SUCCESS) {
        w->st = st;
        return MLC_WAIT_STOP;
    }
    if (w->flag) return MLC_WAIT_MOVED;
    int progressed = 0;
    st = w->comm->be->progress(w->comm, &progressed);
    if (st != MLC_SUCCESS) {
        w->st = st;
        w->failed = mlc_comm_check(w->comm) != MLC_SUCCESS;
        return MLC_WAIT_STOP;
    }
    return progressed ? MLC_WAIT_MOVED : mlc_request_idle_step(w->comm);
}

static int probe_done(void *p) { return ((probe_wait_t *)p)->flag; }

static int probe_check(void *p)
{
    probe_wait_t *w = p;
    if (w->comm->be->health(w->comm) == MLC_SUCCESS) return 0;
    w->failed = true;
    return 1;
}

static int probe_block(void *p, double max_s)
{
    probe_wait_t *w = p;
    if (!w->comm->be->idle) return 0;
    w->comm->be->idle(w->comm, max_s);
    return 1;
}

mlc_status_t mlc_probe(int source, int tag, mlc_comm_t *comm, mlc_msg_status_t *status)
{
    mlc_error_clear();
    mlc_status_t st = check_comm(comm, "probe");
    if (st != MLC_SUCCESS) return st;
    if ((st = check_peer("probe", "source", source, true, comm)) != MLC_SUCCESS) return st;
    if ((st = check_tag("probe", "tag", tag, true, comm)) != MLC_SUCCESS) return st;
    /* Probe polls iprobe under the same rules as every wait: timeout, abort, death. */
    probe_wait_t pw = {.comm = comm, .source = source, .tag = tag, .st = MLC_SUCCESS};
    mlc_wait_t w = {.step = probe_step, .done = probe_done, .check = probe_check, .block = probe_block,
                    .ctx = &pw, .timeout_s = comm->cfg.timeout_s, .what = "probe"};
    mlc_wait_status_t ws = mlc_wait_run(&w);
    if (ws == MLC_WAIT_DONE) {
        if (status) *status = pw.found;
        return MLC_SUCCESS;
    }
    if (ws == MLC_WAIT_STOPPED) return pw.failed ? mlc_comm_check(comm) : pw.st;
    double timeout = comm->cfg.timeout_s;
    char peers[160] = "", note[300];
    if (comm->be->silent_peers) comm->be->silent_peers(comm, source, peers, sizeof peers);
    char heard[180] = ""; /* a backend that cannot tell names nobody */
    if (peers[0]) snprintf(heard, sizeof heard, "; ranks not heard from: %s", peers);
    snprintf(note, sizeof note, "a probe (source %s, tag %s) on rank %d saw no message for %g s (MLC_TIMEOUT)%s",
             mlc_any_or(source).s, mlc_any_or(tag).s, comm->rank, timeout, heard);
    mlc_status_t fst = mlc_comm_fail(comm, MLC_ERR_TIMEOUT, "rank %d: probe (source %s, tag %s) saw no message "
                                     "for %g s (MLC_TIMEOUT)%s", comm->rank, mlc_any_or(source).s,
                                     mlc_any_or(tag).s, timeout, heard);
    if (comm->be->post_failure) comm->be->post_failure(comm, MLC_ERR_TIMEOUT, note);
    return mlc_error(fst, "%s", comm->fail_msg); /* this call's own failure, not an earlier one's */
}

mlc_status_t mlc_comm_get_algo(mlc_comm_t *comm, mlc_coll_t coll, size_t bytes, const char **name)
{
    mlc_error_clear();
    if (!comm || !name) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_algo: %s is NULL", comm ? "name" : "comm");
    if (coll < 0 || coll >= MLC_COLL_COUNT)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_algo: unknown collective %d", (int)coll);
    mlc_request_t probe;
    memset(&probe, 0, sizeof probe);
    probe.comm = comm;
    probe.coll = coll;
    probe.args.count = bytes;
    probe.args.esize = 1;
    probe.args.op = MLC_SUM;
    probe.args.sendbuf = probe.args.recvbuf = &probe; /* present, not in place */
    const char *a = mlc_request_algo(&probe);
    *name = a ? a : "native";
    return MLC_SUCCESS;
}
