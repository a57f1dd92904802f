/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm.h - the whole public API of mlcomm.
 *
 * mlcomm is collective and point-to-point communication for ML frameworks
 * and distributed arrays: one API over a built-in shared-memory engine
 * (`threads`, `shm`), MPI, and NCCL/RCCL. This header is self-contained: it
 * includes no MPI, CUDA or NCCL header.
 *
 * Conventions (README.md and docs/ have the long form):
 *  - Every function that can fail returns mlc_status_t: 0 on success, a
 *    negative MLC_ERR_* otherwise. mlc_last_error() then returns the calling
 *    thread's detailed message (what failed, which rank/peer, the value seen).
 *  - Output arguments come last. Output parameters are written only on success
 *    (one exception: a receive's status, also on MLC_ERR_TRUNCATE).
 *  - Every data-moving call takes a trailing `mlc_request_t **req`:
 *      req == NULL  -> the call blocks until the operation completes;
 *      req != NULL  -> the call returns at once, *req is set to a request that
 *                      completes later (mlc_request_wait / mlc_request_test).
 *    Buffers of an asynchronous operation must stay valid and untouched until
 *    its request completes.
 *  - Counts are size_t elements; counts above INT_MAX work on every backend.
 *    One limit remains on mpi without MPI-4's large-count calls (Open MPI
 *    4.1): a v-collective's blocks of at most INT_MAX elements must lie
 *    within INT_MAX elements of each other on each rank, else that rank's
 *    call fails with MLC_ERR_UNSUPPORTED (docs/MPI.md, "Counts above
 *    INT_MAX").
 *  - In-place forms (as NCCL): allreduce/reduce/broadcast/alltoall take
 *    sendbuf == recvbuf; allgather takes sendbuf == recvbuf + rank*count;
 *    reduce_scatter takes recvbuf == sendbuf + rank*recvcount. As MPI's
 *    MPI_IN_PLACE, where a rank's own block already sits in its place:
 *    allgatherv takes sendbuf == recvbuf + displs[rank] elements; at the
 *    root, gather takes sendbuf == recvbuf + root*count, gatherv sendbuf ==
 *    recvbuf + displs[root], scatter recvbuf == sendbuf + root*count and
 *    scatterv recvbuf == sendbuf + displs[root] (that block is left as it
 *    is). Any other overlap of send and receive buffers is
 *    MLC_ERR_INVALID_ARG. Buffers only the root uses may be NULL on other
 *    ranks.
 *  - allreduce and allgather give bitwise-identical results on every rank.
 *  - A communicator is used by one thread at a time (as NCCL); different
 *    communicators may be used from different threads at once (on `mpi`
 *    below MPI_THREAD_MULTIPLE, mlcomm serializes its MPI calls, and
 *    communicators must be created from one thread at a time: docs/MPI.md);
 *    mlc_comm_abort() may be called from any thread.
 *  - Errors are sticky: after MLC_ERR_TIMEOUT, MLC_ERR_PEER_LOST,
 *    MLC_ERR_ABORTED or MLC_ERR_MISMATCH the communicator is failed and every
 *    later call on it returns that error at once; only mlc_comm_abort and
 *    mlc_comm_free remain.
 *  - Mismatched calls are caught, not computed: ranks that call the same
 *    step of a communicator with different collectives, counts, dtypes, ops
 *    or roots fail with MLC_ERR_MISMATCH and a message naming both sides
 *    ("rank 0: allreduce(count=1000, float32, sum) vs rank 1:
 *    allreduce(count=100000, float32, sum), call #17"), before any byte
 *    moves between their buffers, and the communicator fails on every rank.
 *    A rank whose part of the call completed before any rank compared (a
 *    gather leaf, a broadcast root, a broadcast reader whose arguments
 *    agree with the root's while a later rank's differ, an alltoallv rank
 *    whose blocks all went out and came in before the receiver of a block
 *    of another size compared it) gets the error from
 *    a later call on
 *    the communicator (the next one, or, when no rank compared, the next
 *    one that reads from its peers). Ranks whose arguments agree may have
 *    exchanged data before one that differs was compared (a subtree of a
 *    tree algorithm): as after any failed call, a receive buffer then holds
 *    unspecified data (as MPI's). Always on for `threads` and `shm` (the
 *    signature rides in their slots and message headers); on `mpi` and
 *    `nccl` with MLC_CHECK=1, at the cost of one small allgather per call.
 *    The collectives that mlc_comm_split (and the tensor layer's calls) run
 *    on a communicator count as steps too, each named by its call: a rank
 *    in mlc_comm_split while another calls a collective fails both
 *    ("allgather(count=2, int32) inside mlc_comm_split vs ..."); on
 *    `threads` and `shm` so do those of creating a communicator.
 */
#ifndef MLCOMM_H
#define MLCOMM_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define MLC_API
#elif defined(MLC_BUILDING_LIBRARY) || defined(MLC_BUILDING_MODULE)
#define MLC_API __attribute__((visibility("default")))
#else
#define MLC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */
#define MLC_VERSION_MAJOR 0
#define MLC_VERSION_MINOR 1
#define MLC_VERSION_PATCH 0

/** "MAJOR.MINOR.PATCH" of the library actually loaded. Never fails. */
MLC_API const char *mlc_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes: one list drives the enum, the names and the strings.       */
/* ------------------------------------------------------------------------ */
#define MLC_STATUS_LIST(X)                                                        \
    X(MLC_SUCCESS, 0, "success")                                                  \
    X(MLC_ERR_INVALID_ARG, -1, "invalid argument")                                \
    X(MLC_ERR_NO_MEMORY, -2, "out of memory")                                     \
    X(MLC_ERR_UNSUPPORTED, -3, "operation not supported by this backend")         \
    X(MLC_ERR_UNAVAILABLE, -4, "backend or feature not available on this system") \
    X(MLC_ERR_TIMEOUT, -5, "timed out waiting for peers")                         \
    X(MLC_ERR_PEER_LOST, -6, "a peer rank died or disconnected")                  \
    X(MLC_ERR_ABORTED, -7, "communicator was aborted")                            \
    X(MLC_ERR_TRUNCATE, -8, "message longer than the receive buffer")             \
    X(MLC_ERR_CONFIG, -9, "bad configuration or environment")                     \
    X(MLC_ERR_MISMATCH, -10, "ranks disagree (configuration or arguments)")       \
    X(MLC_ERR_BACKEND, -11, "error reported by the backend library")              \
    X(MLC_ERR_SYSTEM, -12, "operating-system call failed")                        \
    X(MLC_ERR_BUSY, -13, "object is in use (operation already in flight)")        \
    X(MLC_ERR_INTERNAL, -14, "internal error (a bug in mlcomm)")                  \
    X(MLC_ERR_USER_OP, -15, "a user reduction op failed")

typedef enum mlc_status {
#define MLC_X_ENUM(name, value, text) name = value,
    MLC_STATUS_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
} mlc_status_t;

/** Short description of a status code ("timed out waiting for peers"). */
MLC_API const char *mlc_status_string(mlc_status_t status);
/** Enumerator name of a status code ("MLC_ERR_TIMEOUT"). */
MLC_API const char *mlc_status_name(mlc_status_t status);
/**
 * The calling thread's detailed message for its last failed call (empty
 * string if none). Valid until the thread's next mlcomm call.
 */
MLC_API const char *mlc_last_error(void);

/* ------------------------------------------------------------------------ */
/* Data types                                                               */
/* ------------------------------------------------------------------------ */
/* X(enumerator, short name, size in bytes) */
#define MLC_DTYPE_LIST(X)              \
    X(MLC_INT8, "int8", 1)             \
    X(MLC_UINT8, "uint8", 1)           \
    X(MLC_INT32, "int32", 4)           \
    X(MLC_UINT32, "uint32", 4)         \
    X(MLC_INT64, "int64", 8)           \
    X(MLC_UINT64, "uint64", 8)         \
    X(MLC_FLOAT16, "float16", 2)       \
    X(MLC_BFLOAT16, "bfloat16", 2)     \
    X(MLC_FLOAT32, "float32", 4)       \
    X(MLC_FLOAT64, "float64", 8)

typedef int32_t mlc_dtype_t;
enum {
#define MLC_X_ENUM(name, str, size) name,
    MLC_DTYPE_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_DTYPE_COUNT
};
/**
 * An opaque fixed-size record of `n` bytes (1..65535): moved as bytes, and
 * reduced only by user-defined ops. Any other n gives a dtype every call
 * refuses with MLC_ERR_INVALID_ARG (n is evaluated up to three times).
 */
#define MLC_RECORD(n) ((mlc_dtype_t)(0x10000 | ((n) >= 1 && (n) <= 0xFFFF ? (int32_t)(n) : 0x20000)))

/** Size in bytes of one element, or 0 for an unknown dtype. */
MLC_API size_t mlc_dtype_size(mlc_dtype_t dtype);
/** Short name ("float32", "record"), or NULL for an unknown dtype. */
MLC_API const char *mlc_dtype_name(mlc_dtype_t dtype);
/** Parse a short name ("float32", "bf16", "fp16", "f32", ...). */
MLC_API mlc_status_t mlc_dtype_from_name(const char *name, mlc_dtype_t *dtype);

/* ------------------------------------------------------------------------ */
/* Reduction operations                                                     */
/* ------------------------------------------------------------------------ */
/*
 * avg: sum / p. For integer types the sum wraps as sum does (int8: avg of
 * 100 and 100 is -28) and the division truncates toward zero.
 * fp16 / bf16: each pairwise operation is computed in fp32, rounded once.
 * max / min on floating types are fmax / fmin: a NaN loses to a number, so
 * the result is NaN only where every rank's element is NaN; max(-0, +0) is
 * +0 and min is -0. The same on threads, shm and mpi, with every algorithm,
 * on every rank (on nccl / rccl, the library's own kernels decide).
 */
#define MLC_OP_LIST(X) \
    X(MLC_SUM, "sum")  \
    X(MLC_PROD, "prod") \
    X(MLC_MAX, "max")  \
    X(MLC_MIN, "min")  \
    X(MLC_AVG, "avg")

typedef int32_t mlc_op_t;
enum {
#define MLC_X_ENUM(name, str) name,
    MLC_OP_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_OP_BUILTIN_COUNT
};

/**
 * A user reduction: combine `count` elements of `in` into `inout`
 * (inout[i] = in[i] (op) inout[i]); `in` holds the lower rank's data when
 * the op is non-commutative.
 */
typedef void (*mlc_user_fn_t)(const void *in, void *inout, size_t count, mlc_dtype_t dtype,
                              void *ctx);

/**
 * Create a user op. Non-commutative ops are applied in rank order. The op is
 * valid in this process until mlc_op_free; every rank must create its ops in
 * the same order (as MPI_Op_create). Collectives compare ops across ranks:
 * ranks that pass ops of different functions (or one commutative, one not)
 * fail with MLC_ERR_MISMATCH; ranks sharing a process may each create their
 * own op of one function. (A function that lies in no loaded module, such
 * as a generated callback, is not compared.) Errors: INVALID_ARG (fn NULL),
 * NO_MEMORY (op table full).
 */
MLC_API mlc_status_t mlc_op_create(mlc_user_fn_t fn, int commutative, void *ctx, mlc_op_t *op);
/** Free a user op. INVALID_ARG for a built-in or unknown op. */
MLC_API mlc_status_t mlc_op_free(mlc_op_t op);
/**
 * Called by a user op's function, from inside it, when it cannot combine
 * its elements (`why` says why; copied). The function should return at
 * once; what it left in `inout` is never handed out as a result. The call
 * that ran it fails with MLC_ERR_USER_OP and `why` on this rank, and so does
 * every other rank whose result could hold what the op left (the others may
 * succeed: their results are exact). The communicator is then failed on
 * every rank (like mlc_comm_abort): free it and make another. On mpi,
 * MPI runs the op and cannot stop; there the ranks agree after the call
 * whether an op failed, and all of them fail. mlc_reduce_local returns
 * MLC_ERR_USER_OP. A call outside a user op's function does nothing.
 */
MLC_API void mlc_op_fail(const char *why);
/** Short name of a built-in op ("sum"), "user" for user ops, NULL if unknown. */
MLC_API const char *mlc_op_name(mlc_op_t op);
/** Parse "sum", "prod", "max", "min", "avg". */
MLC_API mlc_status_t mlc_op_from_name(const char *name, mlc_op_t *op);
/**
 * Apply `op` locally: inout[i] = in[i] (op) inout[i] for count elements.
 * MLC_AVG here behaves as MLC_SUM (the division belongs to the collective).
 */
MLC_API mlc_status_t mlc_reduce_local(const void *in, void *inout, size_t count, mlc_dtype_t dtype,
                                      mlc_op_t op);

/* ------------------------------------------------------------------------ */
/* Collective kinds (used by algorithm selection, profiling, benchmarks)    */
/* ------------------------------------------------------------------------ */
/* X(enumerator, short name, env suffix) */
#define MLC_COLL_LIST(X)                                   \
    X(MLC_COLL_BROADCAST, "broadcast", "BROADCAST")        \
    X(MLC_COLL_REDUCE, "reduce", "REDUCE")                 \
    X(MLC_COLL_ALLREDUCE, "allreduce", "ALLREDUCE")        \
    X(MLC_COLL_ALLGATHER, "allgather", "ALLGATHER")        \
    X(MLC_COLL_ALLGATHERV, "allgatherv", "ALLGATHERV")     \
    X(MLC_COLL_REDUCE_SCATTER, "reduce_scatter", "REDUCE_SCATTER") \
    X(MLC_COLL_ALLTOALL, "alltoall", "ALLTOALL")           \
    X(MLC_COLL_ALLTOALLV, "alltoallv", "ALLTOALLV")        \
    X(MLC_COLL_GATHER, "gather", "GATHER")                 \
    X(MLC_COLL_GATHERV, "gatherv", "GATHERV")              \
    X(MLC_COLL_SCATTER, "scatter", "SCATTER")              \
    X(MLC_COLL_SCATTERV, "scatterv", "SCATTERV")           \
    X(MLC_COLL_BARRIER, "barrier", "BARRIER")              \
    X(MLC_COLL_SEND, "send", "SEND")                       \
    X(MLC_COLL_RECV, "recv", "RECV")                       \
    X(MLC_COLL_SENDRECV, "sendrecv", "SENDRECV")

typedef int32_t mlc_coll_t;
enum {
#define MLC_X_ENUM(name, str, env) name,
    MLC_COLL_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_COLL_COUNT
};
MLC_API const char *mlc_coll_name(mlc_coll_t coll);

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */
/* Where communication buffers live. */
#define MLC_MEMORY_LIST(X)     \
    X(MLC_MEMORY_HOST, "host") \
    X(MLC_MEMORY_CUDA, "cuda") \
    X(MLC_MEMORY_ROCM, "rocm") \
    X(MLC_MEMORY_AUTO, "auto")
enum {
#define MLC_X_ENUM(name, str) name,
    MLC_MEMORY_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_MEMORY_COUNT
};

#define MLC_LOG_LEVEL_LIST(X) \
    X(MLC_LOG_ERROR, "error") \
    X(MLC_LOG_WARN, "warn")   \
    X(MLC_LOG_INFO, "info")   \
    X(MLC_LOG_DEBUG, "debug") \
    X(MLC_LOG_TRACE, "trace")
enum {
#define MLC_X_ENUM(name, str) name,
    MLC_LOG_LEVEL_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    MLC_LOG_LEVEL_COUNT
};

#define MLC_CONFIG_MAGIC 0x4d4c4331u /* "MLC1" */
#define MLC_CONFIG_VERSION 1u
#define MLC_UNSET (-1)

/**
 * Communicator configuration. Start from MLC_CONFIG_INIT (every field
 * "unset"); a field set here beats the matching environment variable, which
 * beats the default. Strings are copied during mlc_comm_init.
 */
typedef struct mlc_config {
    size_t size;          /* sizeof(mlc_config_t) */
    uint32_t magic;       /* MLC_CONFIG_MAGIC */
    uint32_t version;     /* MLC_CONFIG_VERSION */
    const char *backend;  /* MLC_BACKEND: "auto", "threads", "shm", "mpi", "nccl", "rccl" */
    int rank;             /* MLC_RANK */
    int world_size;       /* MLC_WORLD_SIZE */
    int local_rank;       /* MLC_LOCAL_RANK */
    int local_size;       /* MLC_LOCAL_SIZE */
    const char *job_id;   /* MLC_JOB_ID */
    double timeout_s;     /* MLC_TIMEOUT; < 0 unset; 0 = never */
    int log_level;        /* MLC_LOG_LEVEL: one of MLC_LOG_* */
    const char *log_file; /* MLC_LOG_FILE: may hold %h (host) and %p (pid) */
    const char *profile;  /* MLC_PROFILE: trace file per rank, %r = rank, %p = pid (mlc_profile_stats) */
    int memory;           /* MLC_MEMORY: MLC_MEMORY_* */
    int mpi_thread_level; /* MLC_MPI_THREAD_LEVEL: 0 single, 1 funneled, 2 serialized, 3 multiple */
    int cma;              /* MLC_CMA: 1 use single-copy (CMA) where the OS allows, 0 never */
} mlc_config_t;

#define MLC_CONFIG_INIT                                                                   \
    {                                                                                     \
        sizeof(mlc_config_t), MLC_CONFIG_MAGIC, MLC_CONFIG_VERSION, NULL, MLC_UNSET,      \
            MLC_UNSET, MLC_UNSET, MLC_UNSET, NULL, -1.0, MLC_UNSET, NULL, NULL, MLC_UNSET, \
            MLC_UNSET, MLC_UNSET                                                          \
    }

/* ------------------------------------------------------------------------ */
/* Communicators                                                            */
/* ------------------------------------------------------------------------ */
typedef struct mlc_comm mlc_comm_t;
typedef struct mlc_request mlc_request_t;

/**
 * What a rank needs to join a communicator made with mlc_comm_init_rank (as
 * ncclUniqueId): the address and port of the bootstrap listener that
 * mlc_get_unique_id started in the calling process, and a random job token.
 * Exactly 128 bytes (MLC_UNIQUE_ID_BYTES) of printable text, NUL-terminated
 * ("mlcuid2:<token>@<address>:<port>#<checksum>"), with no pointers: copy it
 * between processes and hosts as bytes (a file, a socket, a broadcast).
 * A damaged id is refused (MLC_ERR_INVALID_ARG) before anything is contacted.
 */
#define MLC_UNIQUE_ID_BYTES 128
typedef struct mlc_unique_id {
    char internal[MLC_UNIQUE_ID_BYTES];
} mlc_unique_id_t;

/** Colour for mlc_comm_split meaning "not in any new communicator". */
#define MLC_UNDEFINED (-32766)

/**
 * Create this process's communicator for the whole job (collective over the
 * job). Rank and size come from cfg, else MLC_* variables, else the launcher's
 * (torchrun, Open MPI, MPICH/Hydra, Slurm); none at all is a one-rank job.
 * cfg may be NULL (all unset). Errors: CONFIG (malformed environment, partial
 * rank set; the message names the variable), UNAVAILABLE (backend missing),
 * MISMATCH (ranks disagree on collective-relevant config: MLC_BACKEND,
 * MLC_WORLD_SIZE, MLC_MEMORY, MLC_STAGE_CHUNK, MLC_CHECK, MLC_STAGES or any
 * MLC_ALGO_<COLL>, those mlcomm-info marks "same on every rank"; every
 * rank fails, and the message names the variable, both values and the ranks,
 * e.g. "MLC_ALGO_ALLREDUCE differs: rank 0 unset (auto), rank 1 'ring'"),
 * TIMEOUT, SYSTEM (shared memory could not be created), PEER_LOST, ABORTED
 * or MISMATCH (a peer died, called mlc_comm_abort, or made a call that did
 * not match another peer's, before this rank's init completed: init is
 * collective, so a rank still in it can see what peers did just after their
 * own init returned; a MISMATCH then names those peers' calls).
 */
MLC_API mlc_status_t mlc_comm_init(const mlc_config_t *cfg, mlc_comm_t **comm);

/**
 * Create n ranks of the `threads` backend in one call (as ncclCommInitAll):
 * comms[i] is rank i. Each comms[i] is then used by its own thread.
 */
MLC_API mlc_status_t mlc_comm_init_all(int n, const mlc_config_t *cfg, mlc_comm_t **comms);

/**
 * Make a fresh unique id, done once (by any one process of the job), then
 * handed to every rank. Starts this process's bootstrap listener, a thread
 * serving the built-in TCP key-value store until every rank of the
 * communicator has joined (the process must live until then, as with NCCL).
 * It binds MLC_BOOTSTRAP_ADDR (default: this host's first non-loopback IPv4
 * address that is not a container or VM
 * bridge (docker*, virbr*, veth*, br-*), else 127.0.0.1) on a free port. One id makes one communicator.
 * Errors: INVALID_ARG (id NULL), CONFIG (MLC_BOOTSTRAP_ADDR malformed),
 * SYSTEM (no socket could be bound).
 */
MLC_API mlc_status_t mlc_get_unique_id(mlc_unique_id_t *id);

/**
 * Join the communicator named by `id` as `rank` of `nranks` (as
 * ncclCommInitRank). Collective over the nranks callers, which may be
 * threads of one process, processes of one host or processes on several
 * hosts: every rank contacts the listener named in the id and bootstraps
 * through it as mlc_comm_init_store does. Without a backend from cfg or
 * MLC_BACKEND: `threads` when every rank is a thread of this process, else
 * the backend `auto` picks for the job (shm when every rank is on one host).
 * Blocks until every rank has joined or MLC_TIMEOUT passes.
 * Errors: INVALID_ARG (NULL, rank out of range, an id not made by
 * mlc_get_unique_id or damaged), TIMEOUT (the listener cannot be reached, or
 * ranks missing: the message names them), MISMATCH (ranks disagree on
 * nranks), UNSUPPORTED (a one-host backend asked for ranks on several hosts:
 * the message names the hosts), and those of mlc_comm_init.
 */
MLC_API mlc_status_t mlc_comm_init_rank(const mlc_unique_id_t *id, int nranks, int rank,
                                        const mlc_config_t *cfg, mlc_comm_t **comm);

/* ------------------------------------------------------------------------ */
/* Bootstrap through a key-value store                                      */
/* ------------------------------------------------------------------------ */
/** Store callback results: success, a get that timed out; any other value is a failure. */
#define MLC_STORE_OK 0
#define MLC_STORE_TIMEOUT 1

/**
 * A key-value store the ranks share (as torch's TCPStore or Gloo's store),
 * given by the caller as callbacks; mlcomm bootstraps every backend through
 * it. Keys are NUL-terminated text starting with "mlc/"; values are bytes.
 * Callbacks may be called from any thread of the calling rank, one at a time
 * per rank, and only during the init call. Plain C types only, so that a
 * binding (ctypes, P/Invoke) can pass them.
 *
 *   set: store `len` bytes of `value` under `key` (replacing any value).
 *   get: wait until `key` exists or `timeout_s` seconds pass (timeout_s < 0:
 *        no limit); then copy min(len of value, cap) bytes to `buf`, set
 *        *len to the value's full length and return MLC_STORE_OK; on timeout
 *        return MLC_STORE_TIMEOUT. With timeout_s == 0 it only looks.
 * Any other return value is an error; mlcomm fails the init with
 * MLC_ERR_BACKEND naming the callback, the key and the value returned.
 * One store (or one key prefix of it) serves one communicator: a store that
 * already holds an earlier communicator's keys is refused at once, on every
 * rank (MLC_ERR_INVALID_ARG: rank 0 finds "mlc/job", rank r "mlc/rank/<r>").
 * Each rank must be given to one caller. A second caller of the same rank
 * is refused with MLC_ERR_INVALID_ARG naming the rank when it finds the
 * first one's record, or when it reads its own record back once every rank
 * has joined and finds the other's. This is best-effort: the store has no
 * atomic "set if absent", so a caller that checks before the first one
 * writes and then writes only after that one has read its record back
 * goes unnoticed by both (the job then fails or hangs in the backend).
 */
typedef struct mlc_store {
    void *ctx; /* passed to each callback as it is */
    int (*set)(void *ctx, const char *key, const void *value, size_t len);
    int (*get)(void *ctx, const char *key, void *buf, size_t cap, size_t *len, double timeout_s);
} mlc_store_t;

/**
 * Create a communicator of `nranks` ranks bootstrapped through `store`:
 * collective over the nranks callers, each with its own rank. Rank 0 names
 * the job, every rank publishes its host identity (MLC_HOST_ID, else the
 * host's name and boot id) and process, and the backend is chosen as for
 * mlc_comm_init_rank; each backend exchanges through the store what it
 * needs (shm: the job name; threads: the process; nccl: the NCCL unique
 * id; mpi: nothing, every MPI process must join). Every wait on the store
 * lasts at most MLC_TIMEOUT. Errors: as mlc_comm_init_rank, plus BACKEND (a
 * store callback failed: the message names it and the key).
 */
MLC_API mlc_status_t mlc_comm_init_store(const mlc_store_t *store, int nranks, int rank,
                                         const mlc_config_t *cfg, mlc_comm_t **comm);

MLC_API int mlc_comm_rank(const mlc_comm_t *comm);
MLC_API int mlc_comm_size(const mlc_comm_t *comm);
/** Name of the backend serving this communicator ("shm"). */
MLC_API const char *mlc_comm_backend(const mlc_comm_t *comm);
/** Its timeout in seconds (0 = never): what mlc_config_t.timeout_s, MLC_TIMEOUT
 * or the default (600) gave it, or mlc_comm_set_timeout since; -1 for NULL. */
MLC_API double mlc_comm_timeout(const mlc_comm_t *comm);
/** The communicator's sticky error (MLC_SUCCESS while healthy). On shm and
 * threads it includes a failure another member has posted (its abort, a
 * mismatch or death it found) before this rank's next call; elsewhere (mpi,
 * nccl) such a failure shows from that call on. Peers are not probed. */
MLC_API mlc_status_t mlc_comm_status(const mlc_comm_t *comm);

/**
 * Split as MPI_Comm_split: ranks with the same colour form a new
 * communicator, ordered by key then by parent rank. color == MLC_UNDEFINED
 * gives *out = NULL. Collective over comm. Messages name the new
 * communicator's own ranks; a failure of it (timeout, lost peer, abort,
 * mismatch) adds which world ranks (of the communicator the splits began
 * from) they are, the first 16 of them. On threads and shm, splits that
 * threads of one rank make at once agree one at a time (the older parent
 * first); one kept from agreeing for the parent's timeout by another that
 * waits for its members (a member stalled inside it) fails with
 * MLC_ERR_BUSY on every member, names what held it, makes nothing and
 * leaves comm usable (not failed, unlike a timeout).
 */
MLC_API mlc_status_t mlc_comm_split(mlc_comm_t *comm, int color, int key, mlc_comm_t **out);

/**
 * Release a communicator. Local: does not wait for peers. Pending requests
 * are cancelled (their buffers are no longer touched; on mpi, operations
 * MPI cannot cancel keep theirs until MPI completes them, and their message
 * says so: docs/MPI.md), but their handles stay
 * valid: mlc_request_wait / mlc_request_test on one returns MLC_ERR_ABORTED
 * with a message and releases it (a request that had completed, or whose
 * operation was already done, such as a send handed over whole, returns its
 * own status: its peer gets it). The communicator's memory goes with the last such handle, so
 * wait or test every request you hold. Until then a call on the freed
 * communicator fails with MLC_ERR_INVALID_ARG ("freed this communicator"),
 * or with the error it had failed with before (a second mlc_comm_free:
 * MLC_ERR_INVALID_ARG, "already freed"); after that its handle is a
 * dangling pointer, as after free(). NULL is a
 * no-op. MLC_ERR_INVALID_ARG (nothing freed) while an open group of this
 * thread has operations on it.
 */
MLC_API mlc_status_t mlc_comm_free(mlc_comm_t *comm);

/**
 * Fail the communicator: every pending and later operation on it, on every
 * rank, returns MLC_ERR_ABORTED. Safe from any thread. Requests stay valid
 * handles: wait or test each (it returns MLC_ERR_ABORTED), before or after
 * mlc_comm_free, which is still needed to release the communicator.
 */
MLC_API mlc_status_t mlc_comm_abort(mlc_comm_t *comm);

/**
 * Set this communicator's timeout: seconds without progress before a wait
 * fails with MLC_ERR_TIMEOUT (as MLC_TIMEOUT / mlc_config_t.timeout_s at
 * init; 0 = never). Local to this rank and to this communicator (not the one
 * it was split from, nor those split from it later, which copy it). Call it
 * while no operation of the communicator is in flight. On mpi, a
 * communicator created without a deadline on every rank calls MPI's
 * blocking collectives, which no deadline can end: there seconds > 0 is
 * refused with MLC_ERR_UNSUPPORTED (give the timeout at creation); ranks
 * that differ otherwise still meet (docs/MPI.md).
 */
MLC_API mlc_status_t mlc_comm_set_timeout(mlc_comm_t *comm, double seconds);

/**
 * Force an algorithm for one collective ("ring", "tree", ...; "auto" or NULL
 * clears). Local: it changes this rank only, so call it with the same
 * arguments on every rank of the communicator before the collective's next
 * call (init compares MLC_ALGO_<COLL> across ranks; this call is not compared).
 */
MLC_API mlc_status_t mlc_comm_set_algo(mlc_comm_t *comm, mlc_coll_t coll, const char *algo);
/**
 * The algorithm the selector would run for `coll` with `bytes` bytes per
 * rank (the same on every rank). *name is static storage.
 */
MLC_API mlc_status_t mlc_comm_get_algo(mlc_comm_t *comm, mlc_coll_t coll, size_t bytes,
                                       const char **name);
/**
 * GPU backends (nccl, rccl) and host backends with a GPU memory kind
 * (MLC_MEMORY=cuda/rocm/auto): the stream (cudaStream_t / hipStream_t)
 * operations are ordered on. NULL is the legacy default stream, on every
 * backend (as in NCCL). Until it is called, each communicator uses a stream
 * of its own that waits for earlier work of the legacy default stream. The
 * stream must belong to the communicator's device (the device current on the
 * thread that created the communicator). MLC_ERR_UNSUPPORTED on a backend
 * without streams.
 */
MLC_API mlc_status_t mlc_comm_set_stream(mlc_comm_t *comm, void *stream);
/** Device memory a communicator's calls take besides host memory (mlc_comm_memory). */
typedef enum mlc_memory_kind {
    MLC_MEMORY_KIND_HOST = 0, /* host memory only */
    MLC_MEMORY_KIND_CUDA = 1, /* CUDA device memory too */
    MLC_MEMORY_KIND_ROCM = 2  /* ROCm (HIP) device memory too */
} mlc_memory_kind_t;
/**
 * Where comm's buffers may live: host memory always; CUDA or ROCm device
 * memory too on nccl / rccl (natively; host buffers are staged) and on host
 * backends whose MLC_MEMORY found a GPU runtime with a device (staged, or
 * moved by CUDA IPC / a CUDA-aware MPI). NULL comm: HOST.
 */
MLC_API mlc_memory_kind_t mlc_comm_memory(const mlc_comm_t *comm);
/**
 * The GPU device comm's device-memory work runs on: MLC_DEVICE, else a
 * device the creating thread had made current (non-zero), else local rank
 * mod the device count; -1 when comm takes host memory only. Choosing it
 * makes nothing current: host backends touch the GPU first when a call has
 * a device buffer.
 */
MLC_API int mlc_comm_device(const mlc_comm_t *comm);
/** Largest tag accepted by point-to-point calls on this communicator. */
MLC_API int mlc_comm_tag_max(const mlc_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */
/**
 * Wait until *req completes, release it and set *req = NULL. Returns the
 * operation's status. Honours the communicator's timeout. *req == NULL is a
 * no-op returning MLC_SUCCESS. A request outlives its communicator: after
 * mlc_comm_free or mlc_comm_abort, a request that was pending returns
 * MLC_ERR_ABORTED at once (with a message naming the operation).
 */
MLC_API mlc_status_t mlc_request_wait(mlc_request_t **req);
/**
 * Progress *req without blocking. *done = 1 when it completed, in which case
 * the request is released, *req = NULL and the operation's status returned.
 * After mlc_comm_free or mlc_comm_abort, a request that was pending completes
 * at once with MLC_ERR_ABORTED (as mlc_request_wait). Honours the
 * communicator's timeout as mlc_request_wait does: once nothing has moved on
 * the communicator for MLC_TIMEOUT seconds, counted from the first test of
 * *req that found nothing to do (any progress restarts it), it completes with
 * MLC_ERR_TIMEOUT and a message naming the operation and the ranks not heard
 * from, and the communicator fails as after a blocking wait's timeout.
 */
MLC_API mlc_status_t mlc_request_test(mlc_request_t **req, int *done);
/**
 * Wait for all n requests; each is released and set to NULL. statuses (may be
 * NULL) receives each operation's status. Returns the first error met.
 */
MLC_API mlc_status_t mlc_request_wait_all(size_t n, mlc_request_t **reqs, mlc_status_t *statuses);

/* ------------------------------------------------------------------------ */
/* Groups                                                                   */
/* ------------------------------------------------------------------------ */
/**
 * Open a group on the calling thread (as ncclGroupStart; torch's
 * batch_isend_irecv). The data-moving calls of this header issued by this
 * thread until the matching mlc_group_end (point-to-point and collectives,
 * blocking or request forms, in any order, on one or several communicators
 * of any backends) progress together, so that pairs which would deadlock
 * one by one (every rank sends before it receives) complete. Inside a group
 * a blocking call returns MLC_SUCCESS at once once its arguments are valid
 * (an invalid one returns its error and is not part of the group): its
 * buffers (and a recv's status) must stay valid and untouched until
 * mlc_group_end, which reports its outcome. A request form hands out its
 * request at once; it completes after mlc_group_end, and waiting for or
 * testing it while the group is open fails with MLC_ERR_INVALID_ARG (it
 * could never complete before mlc_group_end on nccl). Groups nest: only the
 * outermost mlc_group_end ends the group. Group state is per thread, as
 * NCCL's; a thread that exits with its group open has it ended then, as by
 * mlc_group_end (with a warning). On nccl/rccl the group's operations are one NCCL group. The
 * collectives of mlcomm_tensor.h and mlc_exchange_build / start / finish /
 * run fail with MLC_ERR_INVALID_ARG inside an open group: they wait for
 * operations of their own, which the group would hold.
 */
MLC_API mlc_status_t mlc_group_start(void);
/**
 * End the calling thread's group (an inner one of nested groups: just
 * count it). The outermost one issues what a backend deferred (nccl:
 * ncclGroupEnd) and waits, with the communicators' MLC_TIMEOUT (no progress
 * for that long), until every blocking-form operation of the group has
 * completed; request forms complete when their requests do. Returns the
 * first error in call order, its message naming which grouped operation
 * failed ("grouped operation 2 of 3, recv (peer 1, ...)"); every grouped
 * operation is then finished or failed, none is left running. A timeout
 * (MLC_ERR_TIMEOUT) fails the communicator as a blocking call's does.
 * MLC_ERR_INVALID_ARG without an open group. While a group is open,
 * mlc_comm_free of a communicator it uses fails with MLC_ERR_INVALID_ARG;
 * mlc_comm_abort (any thread) makes its operations end MLC_ERR_ABORTED.
 */
MLC_API mlc_status_t mlc_group_end(void);

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */
/*
 * Every rank calls each collective with the same count (v-forms: counts that
 * agree pairwise). With count 0, broadcast, reduce, allreduce, allgather,
 * reduce_scatter, alltoall, gather and scatter move nothing: after the
 * arguments are checked they return at once without communicating (a
 * request form hands out a request already complete) and take no call
 * number, so ranks never wait for each other on them. A failed
 * communicator still fails them with its sticky error, also a failure a
 * peer posted that no wait of this rank has seen yet (its abort, a
 * mismatch, a death another member found); they do not probe whether the
 * peers are alive (that is left to the next call that waits).
 */
/** Copy `count` elements from root's sendbuf to every rank's recvbuf. */
MLC_API mlc_status_t mlc_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                   mlc_dtype_t dtype, int root, mlc_comm_t *comm,
                                   mlc_request_t **req);
/** Reduce every rank's sendbuf into root's recvbuf (recvbuf may be NULL elsewhere). */
MLC_API mlc_status_t mlc_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                mlc_dtype_t dtype, mlc_op_t op, int root, mlc_comm_t *comm,
                                mlc_request_t **req);
/** Reduce every rank's sendbuf; every rank receives the (identical) result. */
MLC_API mlc_status_t mlc_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                   mlc_dtype_t dtype, mlc_op_t op, mlc_comm_t *comm,
                                   mlc_request_t **req);
/** recvbuf[r*count ..] = sendbuf of rank r; recvbuf holds size*count elements. */
MLC_API mlc_status_t mlc_allgather(const void *sendbuf, void *recvbuf, size_t count,
                                   mlc_dtype_t dtype, mlc_comm_t *comm, mlc_request_t **req);
/**
 * recvbuf[displs[r] ..] = sendbuf of rank r (recvcounts[r] elements). In every
 * v-collective each displs[i] + counts[i], times the element size, must fit in
 * PTRDIFF_MAX bytes (also where counts[i] is 0); else MLC_ERR_INVALID_ARG.
 * The blocks a rank receives into (allgatherv, gatherv at the root,
 * alltoallv's recvcounts / rdispls) may come in any order but must not
 * overlap: MLC_ERR_INVALID_ARG naming the two blocks (as MPI, where writing
 * an element twice is erroneous). Blocks read (scatterv, alltoallv's send
 * side) may overlap.
 */
MLC_API mlc_status_t mlc_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                    const size_t *recvcounts, const size_t *displs,
                                    mlc_dtype_t dtype, mlc_comm_t *comm, mlc_request_t **req);
/** Reduce size*recvcount elements; rank r receives block r. */
MLC_API mlc_status_t mlc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        mlc_dtype_t dtype, mlc_op_t op, mlc_comm_t *comm,
                                        mlc_request_t **req);
/** Block j of sendbuf (count elements) goes to rank j, landing at block `rank` there. */
MLC_API mlc_status_t mlc_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                  mlc_dtype_t dtype, mlc_comm_t *comm, mlc_request_t **req);
MLC_API mlc_status_t mlc_alltoallv(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                   const size_t *rdispls, mlc_dtype_t dtype, mlc_comm_t *comm,
                                   mlc_request_t **req);
/** root's recvbuf[r*count ..] = sendbuf of rank r. */
MLC_API mlc_status_t mlc_gather(const void *sendbuf, void *recvbuf, size_t count,
                                mlc_dtype_t dtype, int root, mlc_comm_t *comm,
                                mlc_request_t **req);
MLC_API mlc_status_t mlc_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                                 const size_t *recvcounts, const size_t *displs,
                                 mlc_dtype_t dtype, int root, mlc_comm_t *comm,
                                 mlc_request_t **req);
/** Rank r's recvbuf = root's sendbuf[r*count ..]. */
MLC_API mlc_status_t mlc_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                 mlc_dtype_t dtype, int root, mlc_comm_t *comm,
                                 mlc_request_t **req);
MLC_API mlc_status_t mlc_scatterv(const void *sendbuf, const size_t *sendcounts,
                                  const size_t *displs, void *recvbuf, size_t recvcount,
                                  mlc_dtype_t dtype, int root, mlc_comm_t *comm,
                                  mlc_request_t **req);
MLC_API mlc_status_t mlc_barrier(mlc_comm_t *comm, mlc_request_t **req);

/* ------------------------------------------------------------------------ */
/* Point-to-point                                                           */
/* ------------------------------------------------------------------------ */
#define MLC_ANY_SOURCE (-1)
#define MLC_ANY_TAG (-1)

/** What arrived: filled when a receive completes, or by probe. */
typedef struct mlc_msg_status {
    int source;   /* sender's rank in the communicator */
    int tag;
    size_t bytes; /* bytes of the message */
} mlc_msg_status_t;

/**
 * Send count elements to `peer` with `tag` (0..mlc_comm_tag_max). Blocking
 * send returns when the buffer may be reused.
 */
MLC_API mlc_status_t mlc_send(const void *buf, size_t count, mlc_dtype_t dtype, int peer, int tag,
                              mlc_comm_t *comm, mlc_request_t **req);
/**
 * Receive up to count elements from `peer` (or MLC_ANY_SOURCE) with `tag` (or
 * MLC_ANY_TAG). A longer message is consumed and fails with MLC_ERR_TRUNCATE
 * naming both sizes. status (may be NULL) is filled on completion and must
 * stay valid until then; also on MLC_ERR_TRUNCATE (who sent it, its tag and
 * its size; 0 where MPI does not report the size), so that a receive from
 * MLC_ANY_SOURCE learns whose message was too long.
 */
MLC_API mlc_status_t mlc_recv(void *buf, size_t count, mlc_dtype_t dtype, int peer, int tag,
                              mlc_comm_t *comm, mlc_msg_status_t *status, mlc_request_t **req);
/** Send and receive at once (no deadlock between pairs). */
MLC_API mlc_status_t mlc_sendrecv(const void *sendbuf, size_t sendcount, int dest, int sendtag,
                                  void *recvbuf, size_t recvcount, int source, int recvtag,
                                  mlc_dtype_t dtype, mlc_comm_t *comm, mlc_msg_status_t *status,
                                  mlc_request_t **req);
/**
 * Block until a matching message is available; describe it in status (may be
 * NULL: then only wait for it) without receiving it.
 * A gone source (killed, or it freed the communicator) fails it with
 * MLC_ERR_PEER_LOST once nothing it sent is left to match; with MLC_ANY_SOURCE,
 * any member that died fails it (as MPI ULFM), as does every other member
 * having left. The same holds for mlc_iprobe.
 */
MLC_API mlc_status_t mlc_probe(int source, int tag, mlc_comm_t *comm, mlc_msg_status_t *status);
/**
 * As mlc_probe but returns at once: *flag = 1 and status filled if a message
 * matches. It does not wait, so it has no timeout: a loop of mlc_iprobe calls
 * is the caller's to bound (mlc_probe honours MLC_TIMEOUT).
 */
MLC_API mlc_status_t mlc_iprobe(int source, int tag, mlc_comm_t *comm, int *flag,
                                mlc_msg_status_t *status);

/* ------------------------------------------------------------------------ */
/* Profiling                                                                */
/* ------------------------------------------------------------------------ */
typedef struct mlc_profile_stat {
    mlc_coll_t coll;
    uint64_t count;     /* operations completed */
    uint64_t bytes;     /* payload bytes per rank, summed */
    double time_s;      /* summed duration */
    double min_gbps;    /* algorithmic bandwidth, GB/s (1e9 bytes/s) */
    double avg_gbps;    /* bytes / time */
    double max_gbps;
} mlc_profile_stat_t;

/**
 * Per-collective totals since the communicator was created. Collected while
 * profiling is on: MLC_PROFILE (or cfg.profile) names a trace file, or is
 * "stats" for statistics without a file; otherwise *n = 0. The trace file is
 * one per rank ("%r" = the rank in the communicator mlc_comm_init made, "%p" =
 * the process id): the communicators split from it, and a second one of the
 * same rank, write into the same file, each on a track of its own (Chrome
 * "tid", named "comm N ..."). It is valid JSON once its last communicator is
 * freed (or the process exits); a communicator opened later appends to it. stats has room for
 * *n entries; on return *n is the number of kinds with count > 0.
 */
MLC_API mlc_status_t mlc_profile_stats(const mlc_comm_t *comm, mlc_profile_stat_t *stats,
                                       size_t *n);

/* ------------------------------------------------------------------------ */
/* Host memory pool, GPU-direct capabilities, backend availability          */
/* ------------------------------------------------------------------------ */
/*
 * What language bindings need to build a framework's memory and backend
 * managers on the library's own machinery (the C# binding's
 * PinnedMemoryManager, GPUDirectManager and backend factories).
 */

/**
 * A pool of pinned (page-locked) host memory with a byte limit: blocks it
 * hands out, freed blocks it keeps for reuse, and user memory pinned in
 * place all count against the limit; when a request would pass it, the
 * least recently freed cached blocks are unpinned first (memory in use is
 * never evicted), else the call fails with MLC_ERR_NO_MEMORY naming the
 * request, the limit and the bytes in use. Pins through the GPU runtime
 * loaded in the process when it has a device (cudaHostAlloc / hipHostMalloc),
 * else mmap + mlock (the choice is made when the pool is opened).
 * Thread-safe.
 */
typedef struct mlc_pinned_pool mlc_pinned_pool_t;

typedef struct mlc_pinned_info {
    size_t limit;          /* byte limit */
    size_t bytes_pinned;   /* everything pinned now: in use + cached + pinned user memory */
    size_t bytes_in_use;   /* blocks handed out + pinned user memory */
    size_t bytes_cached;   /* freed blocks kept for reuse */
    uint64_t hits;         /* allocations served from the cache */
    uint64_t misses;       /* allocations that pinned new memory */
    uint64_t evictions;    /* cached blocks unpinned to stay under the limit */
    const char *mode;      /* what pins new memory: "cuda", "hip" or "mlock" (static) */
} mlc_pinned_info_t;

/** A new pool; limit 0 = MLC_PINNED_LIMIT or 1 GiB. Errors: CONFIG, NO_MEMORY, INVALID_ARG. */
MLC_API mlc_status_t mlc_pinned_pool_open(size_t limit, mlc_pinned_pool_t **pool);
/** Unpin and free everything the pool holds (blocks in use included). NULL is a no-op. */
MLC_API mlc_status_t mlc_pinned_pool_close(mlc_pinned_pool_t *pool);
/** At least `bytes` (> 0) of pinned memory. */
MLC_API mlc_status_t mlc_pinned_pool_alloc(mlc_pinned_pool_t *pool, size_t bytes, void **ptr);
/** Give back a block of mlc_pinned_pool_alloc (kept for reuse). */
MLC_API mlc_status_t mlc_pinned_pool_release(mlc_pinned_pool_t *pool, void *ptr);
/** Pin user memory in place until mlc_pinned_pool_unpin (counts against the limit). */
MLC_API mlc_status_t mlc_pinned_pool_pin(mlc_pinned_pool_t *pool, void *ptr, size_t bytes);
MLC_API mlc_status_t mlc_pinned_pool_unpin(mlc_pinned_pool_t *pool, void *ptr);
MLC_API mlc_status_t mlc_pinned_pool_info(mlc_pinned_pool_t *pool, mlc_pinned_info_t *info);

/**
 * Host memory that the other ranks of this host read in place (as
 * MPI_Alloc_mem or ncclMemAlloc): at least `bytes` bytes, page-aligned,
 * zeroed. Use it like malloc'd memory with any backend. On the shm backend,
 * a large broadcast (the root's buffer), allgather, reduce-scatter or
 * allreduce whose buffers (every rank's) lie in such blocks reads peers'
 * data with plain loads, with no copy through shared memory and no
 * process_vm_readv, where the engine's own algorithm takes the call: with
 * single copy allowed (MLC_CMA), or, an allreduce or allgather, where the
 * ranks have stages (docs/ENGINE.md, "Shared buffers"); and a receive of a
 * message past the eager size (16 KiB; 8 KiB and less from 46 ranks on)
 * sent from such a block copies it from there with one memcpy, where single
 * copy works between the pair. A buffer may be
 * any range inside one block; a peer faults in only the buffers calls
 * name. A peer keeps the blocks it read mapped (up to four per owner) and
 * unmaps those the owner freed when a later call reads a block of that
 * owner, or when it frees its communicators. Each block holds one file
 * descriptor while it lives. Thread-safe. Errors: INVALID_ARG (ptr NULL),
 * NO_MEMORY.
 */
MLC_API mlc_status_t mlc_mem_alloc(size_t bytes, void **ptr);
/** Free a block of mlc_mem_alloc; NULL is a no-op. Errors: INVALID_ARG (not such a block, or freed already). */
MLC_API mlc_status_t mlc_mem_free(void *ptr);

/**
 * GPU-direct capabilities of this machine: 1 yes, 0 no, -1 unknown (no
 * runtime to ask), each with the evidence it was decided on. Asks the CUDA
 * (else HIP) runtime the process uses, else a private copy of an installed
 * one that is closed again (the query changes nothing the process does).
 * The strings are the calling thread's, valid until its next
 * mlc_gpudirect_query.
 */
typedef struct mlc_gpudirect_info {
    int rdma;                   /* a NIC reads/writes GPU memory (peer-memory module + RDMA device) */
    const char *rdma_evidence;
    int peer_access;            /* GPUs of this host access each other's memory */
    const char *peer_evidence;
    int cuda_aware_mpi;         /* the MPI library takes device pointers (known once the mpi backend ran) */
    const char *mpi_evidence;
    int ipc;                    /* processes of this host map each other's device memory */
    const char *ipc_evidence;
} mlc_gpudirect_info_t;
MLC_API mlc_status_t mlc_gpudirect_query(mlc_gpudirect_info_t *info);

/**
 * Whether backend `name` ("shm", "mpi", "nccl", ...) can run here:
 * MLC_SUCCESS, or MLC_ERR_UNAVAILABLE with the reason as the message
 * (library or module missing), or MLC_ERR_CONFIG for an unknown name.
 */
MLC_API mlc_status_t mlc_backend_check(const char *name);

#ifdef __cplusplus
}
#endif

/* The rest of the API, in its own headers (each also usable alone). */
#include "mlcomm_exchange.h" /* distributed arrays: halo exchange plans, global combine */
#include "mlcomm_tensor.h"   /* tensors, meshes, the communicator factory */
#endif /* MLCOMM_H */
