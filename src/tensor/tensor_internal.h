/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of the tensor layer (src/tensor): descriptor checks, strided
 * block copies (the layout changes behind gather/scatter along a non-zero
 * dimension), the tensor request wrapper and the cross-rank argument check.
 */
#ifndef MLC_TENSOR_INTERNAL_H
#define MLC_TENSOR_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlcomm_tensor.h"

/* ---- the tensor operations: X(id, public function name) ------------------ */
#define MLC_TOP_LIST(X)                                 \
    X(MLC_TOP_ALLGATHER, "mlc_tensor_allgather")        \
    X(MLC_TOP_REDUCE_SCATTER, "mlc_tensor_reduce_scatter") \
    X(MLC_TOP_ALLREDUCE, "mlc_tensor_allreduce")        \
    X(MLC_TOP_BROADCAST, "mlc_tensor_broadcast")

typedef enum mlc_top {
#define MLC_X_ENUM(id, name) id,
    MLC_TOP_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_TOP_COUNT
} mlc_top_t;

const char *mlc_top_name(int kind);

/* ---- descriptors ---------------------------------------------------------- */
/*
 * Check one descriptor on its own: non-NULL, ndim in range, known dtype,
 * element count fits size_t, data non-NULL when it has elements, device
 * >= MLC_DEVICE_HOST. `what` names the argument in the message.
 */
mlc_status_t mlc_tdesc_check(const mlc_tensor_t *t, const char *fn, const char *what);
/* Normalize dim (negative counts from the end) into [0, ndim); INVALID_ARG if out of range. */
mlc_status_t mlc_tdim_normalize(int dim, int ndim, const char *fn, int *out);
/* Does the tensor live where the communicator's memory kind says buffers live? */
mlc_status_t mlc_tdevice_check(const mlc_tensor_t *t, const mlc_comm_t *comm, const char *fn,
                               const char *what);
/* Product of shape[lo, hi) (1 for an empty range). */
size_t mlc_tshape_prod(const size_t *shape, int lo, int hi);
/* "float32[4, 3, 5]" (truncated to len). */
void mlc_tshape_format(char *buf, size_t len, mlc_dtype_t dtype, int ndim, const uint64_t *shape);
/* Do the byte ranges [a, a+na) and [b, b+nb) overlap? Empty ranges never do. */
bool mlc_tbytes_overlap(const void *a, size_t na, const void *b, size_t nb);

/* ---- strided block copies -------------------------------------------------- */
/*
 * For o in [0, outer), for each part j:
 *   copy len bytes from src + src_off + o*src_stride to dst + dst_off + o*dst_stride.
 * Gathering shards along dim d of a row-major tensor is this copy with
 * outer = prod(shape[0..d)), one part per rank.
 */
typedef struct mlc_tcopy_part {
    size_t src_off, src_stride, dst_off, dst_stride, len;
} mlc_tcopy_part_t;

typedef struct mlc_tcopy {
    size_t outer;
    int nparts;
    mlc_tcopy_part_t *parts; /* nparts entries */
} mlc_tcopy_t;

void mlc_tcopy_run(const mlc_tcopy_t *c, const void *src, void *dst);
/*
 * Rank r's shard [outer, d[r], inner_bytes] lies contiguous in src at
 * block_off[r] (bytes); place it at column offset sum(d[0..r)) of the
 * concatenation dst [outer, sum(d), inner_bytes]. parts has p entries.
 */
void mlc_tcopy_plan_concat(size_t outer, size_t inner_bytes, const size_t *d, const size_t *block_off,
                           int p, mlc_tcopy_part_t *parts, mlc_tcopy_t *c);
/*
 * The inverse: cut src [outer, sum(d), inner_bytes] into p contiguous blocks,
 * block r ([outer, d[r], inner_bytes]) at dst + block_off[r].
 */
void mlc_tcopy_plan_split(size_t outer, size_t inner_bytes, const size_t *d, const size_t *block_off,
                          int p, mlc_tcopy_part_t *parts, mlc_tcopy_t *c);

/* ---- tensor requests ------------------------------------------------------- */
#define MLC_TREQ_INLINE 4

/*
 * One tensor operation: up to `cap` core requests plus a finishing step (a
 * strided copy from the staging buffer into the output) run after every
 * inner request completed successfully. Everything it owns is freed when it
 * finishes. A blocking call keeps it on the stack; an asynchronous call
 * allocates it before the cross-rank check (so that no allocation can fail
 * after the ranks agreed to start).
 */
struct mlc_tensor_request {
    int ninner;                  /* inner requests started */
    int cap;                     /* room for inner requests */
    mlc_request_t *inline_inner[MLC_TREQ_INLINE];
    mlc_request_t **heap_inner;  /* used instead of inline_inner when cap > MLC_TREQ_INLINE */
    void *staging;               /* owned scratch (gather target or packed send) */
    size_t *vec;                 /* owned: per-rank counts, displacements, lengths, offsets */
    mlc_tcopy_t unpack;          /* run at completion when has_unpack */
    mlc_tcopy_part_t *parts;     /* owned storage for unpack.parts */
    bool has_unpack;
    const void *unpack_src;
    void *unpack_dst;
    bool async;
    mlc_status_t status;         /* first error among the inner requests */
    char errmsg[384];
    bool heap;                   /* the wrapper itself was malloc'd */
};

/* The wrapper of one call: `stack` when blocking, else a new heap one. NO_MEMORY. */
mlc_status_t mlc_treq_begin(mlc_tensor_request_t *stack, bool async, const char *fn,
                            mlc_tensor_request_t **out);
/* Make room for n inner requests (local phase: may fail with NO_MEMORY). */
mlc_status_t mlc_treq_reserve(mlc_tensor_request_t *r, int n, const char *fn);
/* Where the next inner operation's request goes: NULL for a blocking call. */
mlc_request_t **mlc_treq_out(mlc_tensor_request_t *r);
/* Record the result of starting (or, blocking, running) an inner operation. */
void mlc_treq_note(mlc_tensor_request_t *r, mlc_status_t st);
/*
 * End of a call that reached the start (or failed with `st` on the way):
 * on failure wait what was started, free everything and return st with its
 * message; blocking: complete and free; async: hand r over as *req.
 */
mlc_status_t mlc_treq_end(mlc_tensor_request_t *r, mlc_status_t st, mlc_tensor_request_t **req);

/* ---- the cross-rank argument check ---------------------------------------- */
/* What each rank contributes: exchanged with one all-gather before any data moves. */
typedef struct mlc_tmeta {
    int32_t kind;       /* mlc_top_t */
    int32_t status;     /* this rank's local check (0 = fine) */
    int32_t dtype, out_dtype;
    int32_t ndim, out_ndim;
    int32_t dim;        /* normalized; -1 when not used */
    int32_t arg;        /* reduce op or root; -1 when not used */
    uint64_t shape[MLC_TENSOR_MAX_DIMS];
    uint64_t out_shape[MLC_TENSOR_MAX_DIMS];
} mlc_tmeta_t;

/* Fill the shape fields of m from t (in) and o (out; may be NULL). */
void mlc_tmeta_shapes(mlc_tmeta_t *m, const mlc_tensor_t *t, const mlc_tensor_t *o);

/*
 * The local phase ended with `local_st` (its message in the thread's last
 * error when non-zero). Exchange every rank's record into all[0..p) and
 * reach the verdict every rank shares: a rank whose local check failed
 * returns its own error, the others MISMATCH naming it; then kind, dtype,
 * ndim, dim and arg must agree (MISMATCH naming the first rank that
 * differs from rank 0). Returns MLC_SUCCESS when the operation may start.
 */
mlc_status_t mlc_tmeta_agree(mlc_comm_t *comm, mlc_tmeta_t *mine, mlc_status_t local_st,
                             mlc_tmeta_t *all);
/* Room for p records: `buf` (n_inline entries) or the heap (*heap set; free it). */
mlc_tmeta_t *mlc_tmeta_table(mlc_tmeta_t *buf, int n_inline, int p, mlc_tmeta_t **heap);


/* ---- one call of a tensor collective ---------------------------------------- */
#define MLC_TCALL_INLINE_RANKS 16

/*
 * The frame every tensor collective runs in:
 *   begin  -> local checks and allocations (their failure is carried, not returned)
 *   agree  -> the cross-rank check; every rank gets the same verdict
 *   start the core operation(s) into mlc_treq_out(c.r)
 *   end    -> blocking: wait + finish; async: hand the request over.
 */
typedef struct mlc_tcall {
    const char *fn;
    mlc_comm_t *comm;
    int p, rank;
    mlc_tmeta_t mine;
    mlc_tmeta_t *all; /* p records after agree */
    mlc_tmeta_t inline_all[MLC_TCALL_INLINE_RANKS];
    mlc_tmeta_t *heap_all;
    mlc_tensor_request_t stack;
    mlc_tensor_request_t *r;
    bool trusted;     /* MLC_TENSOR_CHECKS_LOCAL: no exchange, all == NULL */
} mlc_tcall_t;

/*
 * Begin a call. A non-zero return ends the call at once (NULL or failed
 * communicator: nothing can be exchanged). *local receives a failure of the
 * local phase to carry into the exchange (MLC_SUCCESS otherwise).
 */
mlc_status_t mlc_tcall_begin(mlc_tcall_t *c, int kind, mlc_comm_t *comm, bool async,
                             mlc_status_t *local);
/* The exchange and common verdict (see mlc_tmeta_agree); trusted: only `local`. */
mlc_status_t mlc_tcall_agree(mlc_tcall_t *c, mlc_status_t local);
/* End the call with start status st (see mlc_treq_end) and free the table. */
mlc_status_t mlc_tcall_end(mlc_tcall_t *c, mlc_status_t st, mlc_tensor_request_t **req);
/* Are shapes a and b (ndim entries) equal, ignoring dimension `skip` (-1: none)? */
bool mlc_tshape_equal(const uint64_t *a, const uint64_t *b, int ndim, int skip);
/*
 * Length along dim of rank q's part: from the exchanged table (`out_side`:
 * the outputs' shapes), or, trusted, rank q's part of `total` by
 * mlc_tensor_split.
 */
size_t mlc_tcall_part(const mlc_tcall_t *c, int q, int dim, bool out_side, size_t total);
/* Trusted calls: this rank's length along dim must be its mlc_tensor_split part of total. */
mlc_status_t mlc_tcall_check_split(const mlc_tcall_t *c, size_t mine, size_t total, int dim,
                                   const char *what);
/* Check that in and out have the same dtype and shape except along `skip` (-1: none). */
mlc_status_t mlc_tpair_check(const mlc_tensor_t *in, const mlc_tensor_t *out, int skip,
                             const char *fn, const char *in_name, const char *out_name);

#endif
