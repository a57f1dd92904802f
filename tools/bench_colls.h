/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The collectives mlcomm-bench measures, with nccl-tests' conventions: for
 * a requested size S bytes of E-byte elements, c = S/E and
 *
 *   collective      count arg   send elems   recv elems   algbw bytes    busbw factor
 *   allreduce       c           c            c            c*E            2(p-1)/p
 *   broadcast       c           c            c            c*E            1
 *   reduce          c           c            c            c*E            1
 *   allgather       c/p         c/p          (c/p)*p      (c/p)*p*E      (p-1)/p
 *   reduce_scatter  c/p         (c/p)*p      c/p          (c/p)*p*E      (p-1)/p
 *   alltoall        c/p         (c/p)*p      (c/p)*p      (c/p)*p*E      (p-1)/p
 *   sendrecv        c           c            c            c*E            1
 *   gather          c/p         c/p          (c/p)*p      (c/p)*p*E      (p-1)/p
 *   scatter         c/p         (c/p)*p      c/p          (c/p)*p*E      (p-1)/p
 *   alltoallv       c/p         (c/p)*p      (c/p)*p      (c/p)*p*E      (p-1)/p
 *   barrier         0           0            0            0              -
 *
 * The size column is max(send, recv) bytes, the count column the count
 * argument. sendrecv sends to rank+1 and receives from rank-1 (a ring).
 * gather and scatter: only the root's receive (gather) or send (scatter)
 * buffer is p blocks. alltoallv sends c/p elements to every rank (counts
 * and displacements as alltoall's, like OSU's osu_alltoallv) through the
 * v-interface. barrier moves no data: every row times one barrier.
 */
#ifndef MLC_TOOLS_BENCH_COLLS_H
#define MLC_TOOLS_BENCH_COLLS_H
#include <stdbool.h>
#include <stddef.h>
#include "bench_data.h"
#include "mlcomm.h"

typedef struct mlc_bench_geom {
    size_t count;              /* the count argument of the call */
    size_t send_count;         /* elements in the send buffer */
    size_t recv_count;         /* elements in the receive buffer */
    size_t send_inplace;       /* in place: sendbuf = recvbuf + rank * send_inplace elements */
    size_t recv_inplace;       /* in place: recvbuf = recvbuf + rank * recv_inplace elements */
    size_t size_bytes;         /* max(send, recv) bytes: the size column */
    size_t algbw_bytes;        /* bytes that algbw divides by the time */
} mlc_bench_geom_t;

typedef struct mlc_bench_call {
    mlc_comm_t *comm;
    int rank, nranks;
    const void *send;
    void *recv;
    size_t count;
    mlc_dtype_t dtype;
    mlc_op_t op;
    int root;
    size_t *vspace; /* 2 * nranks: the counts and displacements alltoallv passes */
} mlc_bench_call_t;

typedef struct mlc_bench_coll {
    const char *name;
    mlc_coll_t coll;
    bool reduces;     /* takes an op */
    bool rooted;      /* takes a root */
    bool root_result; /* only the root's result is defined (reduce) */
    bool has_inplace; /* has an in-place form */
    void (*geometry)(size_t count, size_t esize, int nranks, mlc_bench_geom_t *g);
    double (*busbw_factor)(int nranks);
    /* Expected element j of rank's result. */
    double (*expected)(const mlc_bench_gen_t *g, const mlc_bench_geom_t *geo, int rank, int root,
                       size_t j);
    /* One blocking call. */
    mlc_status_t (*run)(const mlc_bench_call_t *c);
} mlc_bench_coll_t;

/* X(name): every collective, in --help order. */
#define MLC_BENCH_COLL_LIST(X) \
    X(allreduce)               \
    X(allgather)               \
    X(reduce_scatter)          \
    X(broadcast)               \
    X(reduce)                  \
    X(alltoall)                \
    X(alltoallv)               \
    X(gather)                  \
    X(scatter)                 \
    X(barrier)                 \
    X(sendrecv)

/* NULL-terminated. */
extern const mlc_bench_coll_t *const mlc_bench_colls[];
const mlc_bench_coll_t *mlc_bench_coll_find(const char *name);

/* A rank's input is mlc_bench_fill(g, rank, 0, send, geo->send_count): its send
 * buffer holds global indices 0..send_count-1 (reduce_scatter and alltoall:
 * the full p-block buffer). */

/* Count the elements of rank's result (recv_count elements at `result`) that differ
 * from the expected ones; 0 where the rank has no defined result. */
size_t mlc_bench_count_wrong(const mlc_bench_coll_t *c, const mlc_bench_gen_t *g,
                             const mlc_bench_geom_t *geo, int rank, int root, const void *result);
#endif
