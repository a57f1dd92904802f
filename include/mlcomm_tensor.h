/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm_tensor.h - the tensor-parallel layer of mlcomm.
 *
 * Three things a framework author needs on top of the buffer API in
 * mlcomm.h:
 *
 *  1. Shape-aware collectives on a tensor descriptor (mlc_tensor_t):
 *     all-gather and reduce-scatter along any dimension, all-reduce,
 *     broadcast, barrier. Shapes are checked across ranks before any data
 *     moves; a mismatch fails on every rank with a message naming the ranks
 *     and their shapes.
 *  2. Device meshes (mlc_mesh_t): carve a world communicator into per-axis
 *     communicators (data-parallel x tensor-parallel, optionally x pipeline)
 *     by mlc_comm_split, so an operation on a group involves only its members.
 *  3. A factory (mlc_comm_create_from): a communicator from a backend name
 *     plus "key" = "value" options.
 *
 * Request model: as in mlcomm.h, the last argument is `mlc_tensor_request_t **req`.
 * NULL blocks until the operation is complete; otherwise the call returns
 * once the operation is started and *req completes later through
 * mlc_tensor_request_wait / mlc_tensor_request_test. A tensor request is not
 * an mlc_request_t: some operations finish with a local step (moving gathered
 * shards into place) that runs when the request is waited or tested
 * complete. Buffers of an asynchronous operation must stay valid and
 * untouched until its request completes, and a request must be completed
 * before its communicator is freed.
 *
 * By default every tensor collective first exchanges a small description
 * of each rank's arguments (one blocking all-gather of 160 bytes per rank),
 * so that every rank reaches the same verdict and either all ranks start
 * the operation or all fail with an error; a call therefore returns only
 * once every member of the communicator has made the matching call.
 * mlc_tensor_set_checks(comm, MLC_TENSOR_CHECKS_LOCAL) drops the exchange
 * where that latency matters. See docs/TENSOR.md.
 */
#ifndef MLCOMM_TENSOR_H
#define MLCOMM_TENSOR_H

#include "mlcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Tensor descriptor                                                        */
/* ------------------------------------------------------------------------ */
#define MLC_TENSOR_MAX_DIMS 8
/* mlc_tensor_t.device of a tensor in host memory; >= 0 is a GPU ordinal. */
#define MLC_DEVICE_HOST (-1)

/**
 * A dense, contiguous, row-major tensor (the last dimension varies fastest).
 * The descriptor does not own `data`. ndim 0 is a scalar (one element).
 */
typedef struct mlc_tensor {
    void *data;
    mlc_dtype_t dtype;
    int ndim;                          /* 0..MLC_TENSOR_MAX_DIMS */
    size_t shape[MLC_TENSOR_MAX_DIMS]; /* entries >= ndim are ignored */
    int device;                        /* MLC_DEVICE_HOST or a GPU ordinal */
} mlc_tensor_t;

/**
 * Fill *t with a host tensor. Errors: INVALID_ARG (t NULL, ndim out of
 * range, shape NULL with ndim > 0, unknown dtype, element count overflows).
 */
MLC_API mlc_status_t mlc_tensor_init(mlc_tensor_t *t, void *data, mlc_dtype_t dtype, int ndim,
                                     const size_t *shape);
/** Number of elements (product of the shape; 1 for ndim 0; 0 for NULL). */
MLC_API size_t mlc_tensor_numel(const mlc_tensor_t *t);
/** numel * element size. */
MLC_API size_t mlc_tensor_bytes(const mlc_tensor_t *t);
/**
 * The even split used across this layer and its examples: part `rank` of
 * `size` parts of a dimension of length n starts at *offset and has *length
 * elements; lengths differ by at most one, the larger ones first.
 * Errors: INVALID_ARG (size < 1, rank out of range, NULL outputs).
 */
MLC_API mlc_status_t mlc_tensor_split(size_t n, int size, int rank, size_t *offset,
                                      size_t *length);

/* ------------------------------------------------------------------------ */
/* Tensor requests                                                          */
/* ------------------------------------------------------------------------ */
typedef struct mlc_tensor_request mlc_tensor_request_t;

/**
 * Wait until *req completes (its local finishing step included), release it
 * and set *req = NULL. Returns the operation's status, with the message of
 * the first error. *req == NULL is a no-op returning MLC_SUCCESS.
 */
MLC_API mlc_status_t mlc_tensor_request_wait(mlc_tensor_request_t **req);
/**
 * Progress *req without blocking; *done = 1 when it completed, in which case
 * it is released, *req = NULL and the operation's status returned.
 */
MLC_API mlc_status_t mlc_tensor_request_test(mlc_tensor_request_t **req, int *done);
/**
 * Wait for n requests; each is released and set to NULL. statuses (may be
 * NULL) receives each status. Returns the first error met.
 */
MLC_API mlc_status_t mlc_tensor_request_wait_all(size_t n, mlc_tensor_request_t **reqs,
                                                 mlc_status_t *statuses);

/* ------------------------------------------------------------------------ */
/* Tensor collectives                                                       */
/* ------------------------------------------------------------------------ */
/*
 * `dim` may be negative (counted from the end, -1 is the last dimension).
 * Errors common to all: INVALID_ARG (NULL or malformed descriptor, dim out of
 * range, data NULL with elements, overlapping input and output other than
 * the in-place form, unknown dtype/op), MISMATCH (ranks disagree: different
 * operation, dtype, rank count of the shape, dim, op or root; shapes that do
 * not fit - the message names the ranks and their shapes; also returned on
 * the other ranks when one rank's arguments failed its local check),
 * UNSUPPORTED (device tensors where a host-side layout change is needed;
 * communicators whose memory kind is cuda/rocm - use memory "auto"), and
 * the communicator's errors (TIMEOUT, ABORTED, PEER_LOST, ...).
 */

/**
 * All-gather along `dim`: out is the concatenation of every rank's shard
 * along dim, in rank order. Shards must agree on dtype and on every
 * dimension except dim, where they may differ (uneven shards); out has the
 * shard's shape with out->shape[dim] = the sum over ranks. A non-zero dim
 * needs no reshaping by the caller. out may overlap the shard.
 */
MLC_API mlc_status_t mlc_tensor_allgather(const mlc_tensor_t *shard, mlc_tensor_t *out, int dim,
                                          mlc_comm_t *comm, mlc_tensor_request_t **req);

/**
 * Reduce-scatter along `dim`: every rank passes a tensor of the same shape;
 * they are reduced with `op` and split along dim; rank r receives part r.
 * Each rank's out has in's shape except along dim, where it has the length
 * of that rank's part; the lengths must add up to in->shape[dim] (uneven
 * parts are allowed; mlc_tensor_split gives the usual ones). out may
 * overlap in (for example be this rank's part of it).
 */
MLC_API mlc_status_t mlc_tensor_reduce_scatter(const mlc_tensor_t *in, mlc_tensor_t *out, int dim,
                                               mlc_op_t op, mlc_comm_t *comm,
                                               mlc_tensor_request_t **req);

/**
 * All-reduce: out = op over every rank's `in`. Every rank passes the same
 * shape and dtype; out has that shape. out->data == in->data is in place.
 */
MLC_API mlc_status_t mlc_tensor_allreduce(const mlc_tensor_t *in, mlc_tensor_t *out, mlc_op_t op,
                                          mlc_comm_t *comm, mlc_tensor_request_t **req);

/**
 * Broadcast in place: every rank's t receives root's t. Every rank's shape
 * and dtype must equal root's (the message names the ranks that differ).
 */
MLC_API mlc_status_t mlc_tensor_broadcast(mlc_tensor_t *t, int root, mlc_comm_t *comm,
                                          mlc_tensor_request_t **req);

/** Barrier with a tensor request (mlc_barrier with the same request type). */
MLC_API mlc_status_t mlc_tensor_barrier(mlc_comm_t *comm, mlc_tensor_request_t **req);

/*
 * How much the tensor collectives of a communicator check across ranks.
 *  full  (default) one small all-gather of every rank's arguments before
 *        the data moves; any disagreement fails on every rank, naming the
 *        ranks and shapes. Costs one small-message latency per call.
 *  local no exchange: each rank checks only its own arguments, and shards
 *        (all-gather) and parts (reduce-scatter) must follow
 *        mlc_tensor_split. Ranks that disagree are not detected (as with
 *        NCCL or MPI): the operation may move wrong data or wait until the
 *        communicator's timeout. For latency-bound calls whose arguments
 *        are known to agree.
 */
#define MLC_TENSOR_CHECKS_LIST(X)       \
    X(MLC_TENSOR_CHECKS_FULL, "full")   \
    X(MLC_TENSOR_CHECKS_LOCAL, "local")

typedef int32_t mlc_tensor_checks_t;
enum {
#define MLC_X_ENUM(name, str) name,
    MLC_TENSOR_CHECKS_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_TENSOR_CHECKS_COUNT
};

/**
 * Set the check level of comm's tensor collectives. Collective over comm
 * (every rank must pass the same level: MISMATCH naming the ranks
 * otherwise, and the level is left as it was). A communicator made by
 * mlc_comm_split starts at full. Errors: INVALID_ARG (NULL comm, unknown
 * level), MISMATCH, the communicator's errors.
 */
MLC_API mlc_status_t mlc_tensor_set_checks(mlc_comm_t *comm, mlc_tensor_checks_t level);
/** The check level of comm (MLC_TENSOR_CHECKS_FULL for NULL). */
MLC_API mlc_tensor_checks_t mlc_tensor_get_checks(const mlc_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Device meshes (process groups)                                           */
/* ------------------------------------------------------------------------ */
#define MLC_MESH_MAX_DIMS 8
#define MLC_MESH_NAME_MAX 32 /* bytes of an axis name, terminator included */

typedef struct mlc_mesh mlc_mesh_t;

/**
 * Arrange the ranks of `world` as a row-major grid of shape dims[0..ndims)
 * (the last axis varies fastest: with dims {dp, tp}, world rank
 * = dp_coord * tp + tp_coord, so tensor-parallel groups are runs of
 * consecutive ranks) and create one communicator per axis by mlc_comm_split:
 * the axis-a communicator holds the ranks whose coordinates differ only
 * along a, ordered by their coordinate on a. One entry of dims may be -1
 * (inferred from the world size). names (may be NULL: "dim0", "dim1", ...)
 * name the axes, e.g. {"pp", "dp", "tp"}. Collective over world; `world`
 * must outlive the mesh. Errors: INVALID_ARG (bad dims or names, product !=
 * world size), MISMATCH (ranks passed different meshes), the split's errors.
 */
MLC_API mlc_status_t mlc_mesh_create(mlc_comm_t *world, const int *dims, int ndims,
                                     const char *const *names, mlc_mesh_t **mesh);
/** Free the per-axis communicators and the mesh (local). NULL is a no-op. */
MLC_API mlc_status_t mlc_mesh_free(mlc_mesh_t *mesh);

/** Number of axes; -1 for NULL. */
MLC_API int mlc_mesh_ndims(const mlc_mesh_t *mesh);
/** Size of axis `axis`; -1 if out of range. */
MLC_API int mlc_mesh_size(const mlc_mesh_t *mesh, int axis);
/** This rank's coordinate on `axis` (= its rank in mlc_mesh_comm(axis)); -1 if out of range. */
MLC_API int mlc_mesh_coord(const mlc_mesh_t *mesh, int axis);
/** Name of `axis`; NULL if out of range. */
MLC_API const char *mlc_mesh_name(const mlc_mesh_t *mesh, int axis);
/** The communicator of `axis` (owned by the mesh); NULL if out of range. */
MLC_API mlc_comm_t *mlc_mesh_comm(const mlc_mesh_t *mesh, int axis);
/** Find an axis by name. Errors: INVALID_ARG (NULL, or no axis of that name). */
MLC_API mlc_status_t mlc_mesh_axis(const mlc_mesh_t *mesh, const char *name, int *axis);
/** World rank of the given coordinates (ndims entries). */
MLC_API mlc_status_t mlc_mesh_rank_of(const mlc_mesh_t *mesh, const int *coords, int *rank);
/** This rank's coordinates: coords receives ndims entries. */
MLC_API mlc_status_t mlc_mesh_coords(const mlc_mesh_t *mesh, int *coords);
/**
 * A communicator over several axes at once (for example {"pp","dp"}): the
 * ranks whose coordinates differ only along those axes, ordered row-major
 * over the axes in the order given. Collective over the world communicator;
 * the caller frees *out with mlc_comm_free. Every rank must pass the same
 * axes in the same order: ranks that differ all get MLC_ERR_MISMATCH naming
 * both lists (*out untouched; the world stays usable). INVALID_ARG for an
 * axis out of range or listed twice.
 */
MLC_API mlc_status_t mlc_mesh_group(const mlc_mesh_t *mesh, const int *axes, int naxes,
                                    mlc_comm_t **out);

/* ------------------------------------------------------------------------ */
/* Communicator factory                                                     */
/* ------------------------------------------------------------------------ */
/** One "key" = "value" option for mlc_comm_create_from. */
typedef struct mlc_option {
    const char *key;
    const char *value;
} mlc_option_t;

/**
 * Create communicators from a backend name ("threads", "shm", "mpi",
 * "nccl", "rccl", "auto" for the automatic choice, or NULL to let
 * MLC_BACKEND decide) plus options. Keys map onto mlc_config_t fields (a field set here beats
 * the environment): rank, world_size, local_rank, local_size, job_id,
 * timeout (seconds, 0 = never), log_level (error|warn|info|debug|trace),
 * log_file, profile, memory (host|cuda|rocm|auto), mpi_thread_level
 * (single|funneled|serialized|multiple), cma (0|1); and algo_<collective>
 * (algo_allreduce = "ring", ...), applied with mlc_comm_set_algo and then,
 * where a rank joins by itself (uid, or this process's rank of the job),
 * compared across the ranks as init compares MLC_ALGO_<COLL>: options that
 * differ fail every rank with MISMATCH naming the variable and the ranks.
 *
 *  - uid != NULL: join the communicator named by uid as `rank` of
 *    `world_size` (both options required), as mlc_comm_init_rank; one
 *    communicator.
 *  - backend "threads" without uid: create all world_size ranks of a
 *    threads communicator at once (as mlc_comm_init_all; world_size
 *    defaults to 1); comms[i] is rank i, to be used by its own thread.
 *  - otherwise: this process's rank of the job, as mlc_comm_init.
 *
 * comms has room for `capacity` communicators; *ncomms receives how many
 * were created. Errors: CONFIG (unknown key or backend - the message names
 * it -, malformed value, a key given twice, rank without uid for threads),
 * INVALID_ARG (NULL arguments, capacity too small), and the errors of the
 * init call.
 */
MLC_API mlc_status_t mlc_comm_create_from(const char *backend, const mlc_option_t *options,
                                          size_t noptions, const mlc_unique_id_t *uid,
                                          int capacity, mlc_comm_t **comms, int *ncomms);

#ifdef __cplusplus
}
#endif
#endif /* MLCOMM_TENSOR_H */
