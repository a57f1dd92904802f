/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm_exchange.h - distributed-array exchange (ghost zones / halos).
 *
 * Ranks own patches of a global n-dimensional index space. Each rank
 * publishes the regions it PROVIDES (the valid cells of its patches) and asks
 * for the regions it NEEDS (ghost zones). mlc_exchange_build (collective)
 * finds who sends what to whom; mlc_exchange_run (or the split-phase
 * mlc_exchange_start / mlc_exchange_finish) then moves the data, as often as
 * wanted, on any backend. See docs/EXCHANGE.md.
 *
 *   mlc_exchange_t *ex;
 *   mlc_exchange_config_t cfg = MLC_EXCHANGE_CONFIG_INIT;
 *   cfg.ndim = 2; cfg.dtype = MLC_FLOAT64;
 *   mlc_exchange_create(comm, &cfg, &ex);              // collective
 *   for each patch: mlc_exchange_provide(ex, &valid_view, NULL);
 *                   mlc_exchange_need(ex, &ghost_view, NULL);  // one per halo box
 *   mlc_exchange_build(ex);                            // collective
 *   loop { mlc_exchange_start(ex); compute interior; mlc_exchange_finish(ex); ... }
 *   mlc_exchange_free(ex);
 *
 * Memory layout of a view: `data` points at the element with index
 * parent.start; elements are dense in C order over the parent box (the last
 * axis is contiguous). All boxes are in global index coordinates.
 */
#ifndef MLCOMM_EXCHANGE_H
#define MLCOMM_EXCHANGE_H

#include "mlcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLC_EXCHANGE_MAX_DIMS 8

/** A box of the index space: cells start[d] <= i[d] < start[d] + shape[d]. */
typedef struct mlc_box {
    int ndim;
    int64_t start[MLC_EXCHANGE_MAX_DIMS];
    int64_t shape[MLC_EXCHANGE_MAX_DIMS]; /* >= 0; a zero extent makes the box empty */
} mlc_box_t;

/** A box from arrays (ndim entries are read; ndim is checked where the box is used). */
static inline mlc_box_t mlc_box_make(int ndim, const int64_t *start, const int64_t *shape)
{
    mlc_box_t b = {0};
    b.ndim = ndim;
    for (int d = 0; d < ndim && d < MLC_EXCHANGE_MAX_DIMS; d++) {
        b.start[d] = start[d];
        b.shape[d] = shape[d];
    }
    return b;
}

/**
 * Part of an array: `data` holds the parent box (the allocated extent, ghost
 * cells included); `region` (inside parent) is the part provided or needed.
 * data may be NULL while a plan is built; it must be set before a run.
 */
typedef struct mlc_view {
    void *data;
    mlc_box_t parent;
    mlc_box_t region;
} mlc_view_t;

/* Flags: X(enumerator, bit, meaning) */
#define MLC_EXCHANGE_FLAG_LIST(X)                                                        \
    X(MLC_EXCHANGE_ALLOW_UNPROVIDED, 0x1u,                                               \
      "cells of a need that no rank provides are left untouched instead of an error")
enum {
#define MLC_X_ENUM(name, bit, text) name = bit,
    MLC_EXCHANGE_FLAG_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
};

#define MLC_EXCHANGE_CONFIG_MAGIC 0x4d4c5831u /* "MLX1" */
#define MLC_EXCHANGE_CONFIG_VERSION 1u

/**
 * What is exchanged. Start from MLC_EXCHANGE_CONFIG_INIT. Every rank passes
 * the same values (checked by mlc_exchange_build: MLC_ERR_MISMATCH).
 */
typedef struct mlc_exchange_config {
    size_t size;       /* sizeof(mlc_exchange_config_t) */
    uint32_t magic;    /* MLC_EXCHANGE_CONFIG_MAGIC */
    uint32_t version;  /* MLC_EXCHANGE_CONFIG_VERSION */
    int ndim;          /* 1..MLC_EXCHANGE_MAX_DIMS (required) */
    mlc_dtype_t dtype; /* element type (required); MLC_RECORD(n) for n-byte elements, n 1..65535 */
    unsigned flags;    /* MLC_EXCHANGE_* flags */
    /* The global index space. Optional (domain.ndim == 0: none) unless an axis
     * is periodic; when given, every provided region must lie inside it. */
    mlc_box_t domain;
    /* periodic[d] != 0: axis d wraps around the domain; a need reaching past
     * the domain on that axis is served by the periodic image. */
    int periodic[MLC_EXCHANGE_MAX_DIMS];
} mlc_exchange_config_t;

#define MLC_EXCHANGE_CONFIG_INIT                                                          \
    {                                                                                     \
        sizeof(mlc_exchange_config_t), MLC_EXCHANGE_CONFIG_MAGIC,                          \
            MLC_EXCHANGE_CONFIG_VERSION, 0, MLC_UNSET, 0u, {0, {0}, {0}}, {0}                \
    }

typedef struct mlc_exchange mlc_exchange_t;

/** Which list a view id belongs to. */
typedef enum mlc_exchange_side { MLC_EXCHANGE_PROVIDE = 0, MLC_EXCHANGE_NEED = 1 } mlc_exchange_side_t;

/** What a built plan does on this rank, per exchange (mlc_exchange_info). */
typedef struct mlc_exchange_info {
    int send_peers;           /* ranks this rank sends one message to */
    int recv_peers;           /* ranks this rank receives one message from */
    size_t send_bytes;        /* payload bytes sent */
    size_t recv_bytes;        /* payload bytes received */
    size_t send_segments;     /* overlaps packed into the outgoing messages */
    size_t recv_segments;     /* overlaps unpacked from the incoming messages */
    size_t local_copies;      /* overlaps served inside this rank (no message) */
    size_t local_bytes;
    uint64_t unprovided_cells; /* needed cells no rank provides (MLC_EXCHANGE_ALLOW_UNPROVIDED) */
    uint64_t builds;          /* builds that exchanged metadata and made a new plan */
    uint64_t cache_hits;      /* builds answered by the cached plan */
    uint64_t runs;            /* exchanges started */
    uint64_t layout_hash;     /* hash of this rank's boxes, config and view order */
    const char *executor;     /* what moves the data ("p2p", "mpi_pack", "mpi_subarray"); static */
} mlc_exchange_info_t;

/**
 * Create an exchange over comm. Collective over comm: it creates the
 * exchange's private communicator, so its messages never match the caller's
 * own mlc_send/mlc_recv, nor those of another exchange. Errors: INVALID_ARG
 * (bad config: the message names the field), NO_MEMORY, and those of
 * mlc_comm_split.
 */
MLC_API mlc_status_t mlc_exchange_create(mlc_comm_t *comm, const mlc_exchange_config_t *cfg,
                                         mlc_exchange_t **ex);

/**
 * Publish a region this rank provides (view->region, read from view->data).
 * A rank may provide any number of regions, or none. *id (may be NULL)
 * receives its index among this rank's provides (0, 1, ...). Regions may be
 * empty. data may be GPU device memory on a communicator of memory kind
 * cuda / rocm / auto or on nccl / rccl (it is then copied by the GPU
 * runtime, never touched by the host); elsewhere it must be host memory.
 * Errors: INVALID_ARG (ndim differs, negative shape, region not inside
 * parent, parent too large), BUSY (an exchange is in flight), UNSUPPORTED
 * (device memory the chosen executor cannot move: the MPI executors).
 */
MLC_API mlc_status_t mlc_exchange_provide(mlc_exchange_t *ex, const mlc_view_t *view, int *id);

/** Ask for a region (written into view->data). As mlc_exchange_provide otherwise. */
MLC_API mlc_status_t mlc_exchange_need(mlc_exchange_t *ex, const mlc_view_t *view, int *id);

/**
 * Point view `id` of `side` at new data of the same layout (double
 * buffering). Takes effect at the next mlc_exchange_start; no rebuild.
 * UNSUPPORTED as mlc_exchange_provide for device memory.
 */
MLC_API mlc_status_t mlc_exchange_set_data(mlc_exchange_t *ex, mlc_exchange_side_t side, int id,
                                           void *data);

/**
 * Forget this rank's provides and needs, to declare them again (new data
 * pointers, or new boxes after a regrid). The built plan is kept: the next
 * mlc_exchange_build reuses it when the layout is unchanged.
 */
MLC_API mlc_status_t mlc_exchange_clear(mlc_exchange_t *ex);

/**
 * Let the caller say when the layout changed: the plan cache then compares
 * this number instead of agreeing on a hash of the boxes (which costs one
 * small allreduce per build). Every rank must bump it together whenever any
 * rank's boxes change (regrid, load balancing). A rank whose own boxes
 * changed while the version did not gets INVALID_ARG from mlc_exchange_build.
 */
MLC_API mlc_status_t mlc_exchange_set_topology_version(mlc_exchange_t *ex, uint64_t version);

/**
 * Make the plan. Collective over the communicator given to create. If a
 * plan exists and no rank's layout changed (by topology version when set,
 * else by hash of the boxes), it is reused without exchanging metadata.
 * Otherwise provided regions are all-gathered, every rank intersects its
 * needs with them (periodic images included), and each rank tells only its
 * providers what to send. Errors, the same on every rank (but for the
 * topology-version check above, which only the rank whose boxes changed
 * makes; its peers reuse the cached plan): INVALID_ARG
 * (provided regions overlap: names both boxes and their ranks; a need no
 * rank provides without MLC_EXCHANGE_ALLOW_UNPROVIDED: names the box; a
 * provided region outside the domain), MISMATCH (ranks passed different
 * configs), BUSY (in flight), communication errors.
 */
MLC_API mlc_status_t mlc_exchange_build(mlc_exchange_t *ex);

/**
 * Choose what moves the data: "auto" (or NULL or "": the default order), "p2p"
 * (packed messages over mlc_send/mlc_recv, every backend), and on the mpi
 * backend "mpi_pack" (packed messages, persistent MPI requests on the
 * library's own buffers) or "mpi_subarray" (MPI_Type_create_subarray over
 * each view's parent, no packing); names match in any case. The environment variable
 * MLC_EXCHANGE_EXEC sets the same at mlc_exchange_create. Every rank must
 * choose the same. Local: a built plan keeps working (its executor state is
 * made again). With views in device memory "auto" is "p2p". Errors:
 * INVALID_ARG (unknown name), UNSUPPORTED (the executor cannot serve this
 * backend, or a view is device memory it cannot move), BUSY (in flight),
 * NO_MEMORY.
 */
MLC_API mlc_status_t mlc_exchange_set_executor(mlc_exchange_t *ex, const char *name);

/**
 * Begin one exchange: post the receives, pack and send one message per
 * neighbour rank, and perform the local copies. The caller may compute on
 * anything but the needed regions (and must not write the provided regions)
 * until mlc_exchange_finish. Errors: INVALID_ARG (not built, views changed
 * since the build, a view's data is NULL), BUSY (this exchange is already in
 * flight), communication errors.
 */
MLC_API mlc_status_t mlc_exchange_start(mlc_exchange_t *ex);

/**
 * Complete the exchange begun by mlc_exchange_start: wait for the messages
 * and unpack them into the needed regions. Errors: INVALID_ARG (nothing in
 * flight), communication errors (TIMEOUT, PEER_LOST, ABORTED, TRUNCATE).
 */
MLC_API mlc_status_t mlc_exchange_finish(mlc_exchange_t *ex);

/** mlc_exchange_start + mlc_exchange_finish. */
MLC_API mlc_status_t mlc_exchange_run(mlc_exchange_t *ex);

/** Describe the built plan on this rank. INVALID_ARG if not built. */
MLC_API mlc_status_t mlc_exchange_info(const mlc_exchange_t *ex, mlc_exchange_info_t *info);

/** Release the exchange (an exchange in flight is cancelled). NULL is a no-op. */
MLC_API mlc_status_t mlc_exchange_free(mlc_exchange_t *ex);

/**
 * The halo of `valid`: the box grown by width[d] cells on both sides of each
 * axis d, minus `valid`, as at most 2*ndim disjoint boxes (axis 0 slabs span
 * the grown box, so corners are included). out has room for
 * 2*MLC_EXCHANGE_MAX_DIMS boxes; *n receives how many were written (zero
 * widths give none, and so does an empty `valid`: no cell of it needs
 * neighbours). INVALID_ARG for bad ndim or a negative width.
 */
MLC_API mlc_status_t mlc_box_halo(const mlc_box_t *valid, const int *width, mlc_box_t *out, int *n);

/* ------------------------------------------------------------------------ */
/* Global combine: a reduction over values of any size with a user op       */
/* ------------------------------------------------------------------------ */
/** inout = in (op) inout, one value; `in` is the lower ranks' part. */
typedef void (*mlc_combine_fn_t)(const void *in, void *inout, void *ctx);

/**
 * Combine every rank's `count` values of `value_bytes` bytes each, element
 * by element, and give every rank the bitwise-identical result:
 * result[i] = v0[i] (op) v1[i] (op) ... (op) v_{p-1}[i]. A non-commutative
 * op is applied in rank order (its associativity is relied upon). Uses
 * mlc_op_create + mlc_allreduce (values up to 65535 bytes), or an allgather
 * followed by a fold in rank order for larger values. value may equal result.
 * Collective. Errors: INVALID_ARG (NULL fn or buffer, value_bytes 0), those
 * of the collectives.
 */
MLC_API mlc_status_t mlc_combine(const void *value, void *result, size_t count,
                                 size_t value_bytes, mlc_combine_fn_t fn, int commutative,
                                 void *ctx, mlc_comm_t *comm);

#ifdef __cplusplus
}
#endif
#endif /* MLCOMM_EXCHANGE_H */
