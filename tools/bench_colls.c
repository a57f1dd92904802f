/* SPDX-License-Identifier: BSD-3-Clause */
/* The collectives of mlcomm-bench: geometry, bandwidth factor, expected
 * result and the call itself (see bench_colls.h for the conventions). */
#include "bench_colls.h"

#include <string.h>

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static void finish_geometry(mlc_bench_geom_t *g, size_t esize, size_t algbw_elems)
{
    g->size_bytes = max_size(g->send_count, g->recv_count) * esize;
    g->algbw_bytes = algbw_elems * esize;
}

/* count elements on every rank, in and out (allreduce, broadcast, reduce, sendrecv) */
static void geom_flat(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    *g = (mlc_bench_geom_t){.count = c, .send_count = c, .recv_count = c};
    finish_geometry(g, esize, c);
}

static void geom_allgather(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    size_t n = c / (size_t)p;
    *g = (mlc_bench_geom_t){.count = n, .send_count = n, .recv_count = n * (size_t)p,
                            .send_inplace = n};
    finish_geometry(g, esize, n * (size_t)p);
}

static void geom_reduce_scatter(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    size_t n = c / (size_t)p;
    *g = (mlc_bench_geom_t){.count = n, .send_count = n * (size_t)p, .recv_count = n,
                            .recv_inplace = n};
    finish_geometry(g, esize, n * (size_t)p);
}

static void geom_alltoall(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    size_t n = c / (size_t)p;
    *g = (mlc_bench_geom_t){.count = n, .send_count = n * (size_t)p, .recv_count = n * (size_t)p};
    finish_geometry(g, esize, n * (size_t)p);
}

static void geom_scatter(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    geom_reduce_scatter(c, esize, p, g);
    g->recv_inplace = 0;
}

static void geom_gather(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    geom_allgather(c, esize, p, g);
    g->send_inplace = 0;
}

static void geom_none(size_t c, size_t esize, int p, mlc_bench_geom_t *g)
{
    *g = (mlc_bench_geom_t){0};
}

static double factor_one(int p) { return 1.0; }
static double factor_allreduce(int p) { return 2.0 * (p - 1) / p; }
static double factor_gather(int p) { return (double)(p - 1) / p; }

static double expect_allreduce(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                               int root, size_t j)
{
    return mlc_bench_reduced(g, j);
}

static double expect_broadcast(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                               int root, size_t j)
{
    return (double)mlc_bench_input(g, root, j);
}

static double expect_allgather(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                               int root, size_t j)
{
    return (double)mlc_bench_input(g, (int)(j / geo->count), j % geo->count);
}

static double expect_reduce_scatter(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo,
                                    int rank, int root, size_t j)
{
    return mlc_bench_reduced(g, (size_t)rank * geo->count + j);
}

static double expect_alltoall(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                              int root, size_t j)
{
    /* block b of the result is rank b's block `rank` */
    return (double)mlc_bench_input(g, (int)(j / geo->count),
                                   (size_t)rank * geo->count + j % geo->count);
}

static double expect_scatter(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                             int root, size_t j)
{
    return (double)mlc_bench_input(g, root, (size_t)rank * geo->count + j);
}

static double expect_nothing(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                             int root, size_t j)
{
    return 0;
}

static double expect_sendrecv(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank,
                              int root, size_t j)
{
    return (double)mlc_bench_input(g, (rank - 1 + g->nranks) % g->nranks, j);
}

static mlc_status_t run_allreduce(const mlc_bench_call_t *c)
{
    return mlc_allreduce(c->send, c->recv, c->count, c->dtype, c->op, c->comm, NULL);
}

static mlc_status_t run_allgather(const mlc_bench_call_t *c)
{
    return mlc_allgather(c->send, c->recv, c->count, c->dtype, c->comm, NULL);
}

static mlc_status_t run_reduce_scatter(const mlc_bench_call_t *c)
{
    return mlc_reduce_scatter(c->send, c->recv, c->count, c->dtype, c->op, c->comm, NULL);
}

static mlc_status_t run_broadcast(const mlc_bench_call_t *c)
{
    return mlc_broadcast(c->send, c->recv, c->count, c->dtype, c->root, c->comm, NULL);
}

static mlc_status_t run_reduce(const mlc_bench_call_t *c)
{
    return mlc_reduce(c->send, c->recv, c->count, c->dtype, c->op, c->root, c->comm, NULL);
}

static mlc_status_t run_alltoall(const mlc_bench_call_t *c)
{
    return mlc_alltoall(c->send, c->recv, c->count, c->dtype, c->comm, NULL);
}

/* alltoall's blocks through the v-interface: count per peer, in rank order
 * (written on every call, as an application would). */
static mlc_status_t run_alltoallv(const mlc_bench_call_t *c)
{
    size_t *counts = c->vspace, *displs = c->vspace + c->nranks;
    for (int r = 0; r < c->nranks; r++) {
        counts[r] = c->count;
        displs[r] = (size_t)r * c->count;
    }
    return mlc_alltoallv(c->send, counts, displs, c->recv, counts, displs, c->dtype, c->comm, NULL);
}

static mlc_status_t run_gather(const mlc_bench_call_t *c)
{
    return mlc_gather(c->send, c->recv, c->count, c->dtype, c->root, c->comm, NULL);
}

static mlc_status_t run_scatter(const mlc_bench_call_t *c)
{
    return mlc_scatter(c->send, c->recv, c->count, c->dtype, c->root, c->comm, NULL);
}

static mlc_status_t run_barrier(const mlc_bench_call_t *c) { return mlc_barrier(c->comm, NULL); }

static mlc_status_t run_sendrecv(const mlc_bench_call_t *c)
{
    int next = (c->rank + 1) % c->nranks, prev = (c->rank - 1 + c->nranks) % c->nranks;
    return mlc_sendrecv(c->send, c->count, next, 0, c->recv, c->count, prev, 0, c->dtype, c->comm,
                        NULL, NULL);
}

/* name, coll, reduces, rooted, root_result, has_inplace, geometry, factor */
static const mlc_bench_coll_t desc_allreduce = {"allreduce", MLC_COLL_ALLREDUCE, true, false,
    false, true, geom_flat, factor_allreduce, expect_allreduce, run_allreduce};
static const mlc_bench_coll_t desc_allgather = {"allgather", MLC_COLL_ALLGATHER, false, false,
    false, true, geom_allgather, factor_gather, expect_allgather, run_allgather};
static const mlc_bench_coll_t desc_reduce_scatter = {"reduce_scatter", MLC_COLL_REDUCE_SCATTER,
    true, false, false, true, geom_reduce_scatter, factor_gather, expect_reduce_scatter,
    run_reduce_scatter};
static const mlc_bench_coll_t desc_broadcast = {"broadcast", MLC_COLL_BROADCAST, false, true,
    false, true, geom_flat, factor_one, expect_broadcast, run_broadcast};
static const mlc_bench_coll_t desc_reduce = {"reduce", MLC_COLL_REDUCE, true, true, true, true,
    geom_flat, factor_one, expect_allreduce, run_reduce};
static const mlc_bench_coll_t desc_alltoall = {"alltoall", MLC_COLL_ALLTOALL, false, false,
    false, true, geom_alltoall, factor_gather, expect_alltoall, run_alltoall};
/* gather, scatter, alltoallv and barrier are measured out of place only. */
static const mlc_bench_coll_t desc_alltoallv = {"alltoallv", MLC_COLL_ALLTOALLV, false, false,
    false, false, geom_alltoall, factor_gather, expect_alltoall, run_alltoallv};
static const mlc_bench_coll_t desc_gather = {"gather", MLC_COLL_GATHER, false, true, true, false,
    geom_gather, factor_gather, expect_allgather, run_gather};
static const mlc_bench_coll_t desc_scatter = {"scatter", MLC_COLL_SCATTER, false, true, false,
    false, geom_scatter, factor_gather, expect_scatter, run_scatter};
static const mlc_bench_coll_t desc_barrier = {"barrier", MLC_COLL_BARRIER, false, false, false,
    false, geom_none, factor_one, expect_nothing, run_barrier};
/* Sending from and receiving into one buffer is not an in-place form. */
static const mlc_bench_coll_t desc_sendrecv = {"sendrecv", MLC_COLL_SENDRECV, false, false,
    false, false, geom_flat, factor_one, expect_sendrecv, run_sendrecv};

const mlc_bench_coll_t *const mlc_bench_colls[] = {
#define MLC_X_DESC(name) &desc_##name,
    MLC_BENCH_COLL_LIST(MLC_X_DESC)
#undef MLC_X_DESC
    NULL};

const mlc_bench_coll_t *mlc_bench_coll_find(const char *name)
{
    for (int i = 0; mlc_bench_colls[i]; i++)
        if (strcmp(mlc_bench_colls[i]->name, name) == 0) return mlc_bench_colls[i];
    return NULL;
}

size_t mlc_bench_count_wrong(const mlc_bench_coll_t *c, const mlc_bench_gen_t *g,
                             const mlc_bench_geom_t *geo, int rank, int root, const void *result)
{
    if (c->root_result && rank != root) return 0;
    size_t wrong = 0;
    for (size_t j = 0; j < geo->recv_count; j++)
        wrong += mlc_bench_load(g->dtype, result, j) != c->expected(g, geo, rank, root, j);
    return wrong;
}
