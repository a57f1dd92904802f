/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The exchange plan and the pure steps that build it (no communication, so
 * they are unit-tested by simulating ranks in one process):
 *
 *   1. every rank knows every published region (mlc_xpub_t, all-gathered);
 *      mlc_xindex_build validates them (inside the domain, disjoint) and
 *      sorts them for queries;
 *   2. each rank intersects its needs with them (periodic images included):
 *      mlc_xmatch_needs;
 *   3. mlc_xplan_recv_side turns the matches into receive segments, local
 *      copies and, per provider rank, the request records to send it;
 *   4. each provider turns the requests it got into send segments:
 *      mlc_xplan_send_side.
 *
 * The plan says what moves where; an executor (exec.h) moves it.
 */
#ifndef MLC_EXCHANGE_PLAN_H
#define MLC_EXCHANGE_PLAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "box.h"
#include "copy.h"

/* What every rank agrees on about the index space. */
typedef struct mlc_xgeom {
    int ndim;
    size_t esize;
    bool has_domain;
    mlc_box_t domain;
    bool periodic[MLC_EXCHANGE_MAX_DIMS];
} mlc_xgeom_t;

/* A published region: rank `rank` provides `box` as its provide number `id`. */
typedef struct mlc_xpub {
    int rank;
    int id;
    mlc_box_t box;
} mlc_xpub_t;

/*
 * Published regions sorted by start on one axis (the one that separates them
 * best), for intersection queries: a region meeting box q starts in
 * (q.start - max_extent, q.end) on that axis, a binary search away.
 */
typedef struct mlc_xindex {
    mlc_xpub_t *pubs; /* owned */
    size_t n;
    int axis;
    int64_t max_extent; /* largest shape along `axis` */
} mlc_xindex_t;

/*
 * Take ownership of pubs[0..n) (malloc'ed; freed on failure too), drop empty
 * regions, check each lies inside the domain (when there is one) and that no
 * two overlap; the message names both boxes and their ranks.
 */
mlc_status_t mlc_xindex_build(const mlc_xgeom_t *g, mlc_xpub_t *pubs, size_t n,
                              mlc_xindex_t *out);
void mlc_xindex_free(mlc_xindex_t *idx);

/* A need of this rank overlapping a published region. */
typedef struct mlc_xmatch {
    int rank;      /* provider */
    int prov_id;   /* provider's provide number */
    int need_id;   /* this rank's need number */
    mlc_box_t src; /* cells in the provider's coordinates */
    mlc_box_t dst; /* the same cells in the need's coordinates (src + periodic shift) */
} mlc_xmatch_t;

/*
 * Intersect needs[i] (need number i; empty ones skipped) with the index and
 * its periodic images. Matches come out grouped by provider rank (ascending),
 * in need order within a rank. A need with cells nobody provides is
 * INVALID_ARG naming the need and an uncovered box, unless allow_unprovided
 * (then *unprovided counts those cells). *out is malloc'ed (NULL when none).
 */
mlc_status_t mlc_xmatch_needs(const mlc_xgeom_t *g, const mlc_xindex_t *idx,
                              const mlc_box_t *needs, int nneeds, bool allow_unprovided,
                              mlc_xmatch_t **out, size_t *nout, uint64_t *unprovided);

/* One overlap moved through a message: between view `id` and the packed arena. */
typedef struct mlc_xseg {
    int id;          /* provide number (send side) or need number (receive side) */
    mlc_box_t box;   /* cells, in the coordinates of that view */
    mlc_copy_t copy; /* send: view -> arena; receive: arena -> view */
} mlc_xseg_t;

/* One neighbour: one message per exchange, its segments packed back to back. */
typedef struct mlc_xpeer {
    int rank;
    size_t first_seg, nseg; /* into the plan's send_segs / recv_segs */
    size_t offset;          /* where the message starts in the arena */
    size_t bytes;
} mlc_xpeer_t;

/* An overlap served inside this rank: provide src_id -> need dst_id. */
typedef struct mlc_xlocal {
    int src_id, dst_id;
    mlc_box_t src, dst;
    mlc_copy_t copy;
} mlc_xlocal_t;

typedef struct mlc_xplan {
    size_t esize;
    mlc_xpeer_t *send, *recv;
    int nsend, nrecv;
    mlc_xseg_t *send_segs, *recv_segs;
    size_t nsend_segs, nrecv_segs;
    mlc_xlocal_t *locals;
    size_t nlocals;
    size_t send_arena, recv_arena; /* bytes of packed buffers the executor provides */
    size_t send_bytes, recv_bytes, local_bytes;
    uint64_t unprovided_cells;
} mlc_xplan_t;

/* A view's geometry as the plan needs it (no data pointer). */
typedef struct mlc_xshape {
    mlc_box_t parent, region;
} mlc_xshape_t;

/* Request records: [prov_id, start[0..ndim), shape[0..ndim)] as int64. */
static inline size_t mlc_xreq_len(int ndim) { return 1 + 2 * (size_t)ndim; }

/*
 * Receive side of this rank `me` of `nranks`: from its matches, fill
 * plan->recv/recv_segs/locals, and produce the requests for each provider:
 * req_counts[r] records (nranks entries, written), stored rank after rank
 * in *reqs (malloc'ed, NULL when none).
 */
mlc_status_t mlc_xplan_recv_side(mlc_xplan_t *plan, const mlc_xgeom_t *g, int me, int nranks,
                                 const mlc_xmatch_t *m, size_t nm, const mlc_xshape_t *provs,
                                 int nprovs, const mlc_xshape_t *needs, int nneeds,
                                 uint64_t *req_counts, int64_t **reqs);

/*
 * Send side: in_counts[r] request records arrived from rank r, stored rank
 * after rank in `in`. Fills plan->send/send_segs. A record naming a provide
 * this rank does not have, or cells outside it, is MLC_ERR_INTERNAL.
 */
mlc_status_t mlc_xplan_send_side(mlc_xplan_t *plan, const mlc_xgeom_t *g, int nranks,
                                 const uint64_t *in_counts, const int64_t *in,
                                 const mlc_xshape_t *provs, int nprovs);

void mlc_xplan_free(mlc_xplan_t *plan);
#endif
