/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Resolved configuration: caller field > environment variable > default.
 * MLC_ENV_LIST is the one typed table of environment variables: mlc_config_resolve
 * parses them by it, the agreement check at comm init compares its AGREE rows,
 * mlcomm-info --env prints it, and the mlc_env_* accessors are the only reads
 * of the environment in the library (tests/lint checks that).
 */
#ifndef MLC_BASE_CONFIG_H
#define MLC_BASE_CONFIG_H
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "mlcomm.h"

/*
 * The table: one row per variable,
 *   X(ID, NAME, TYPE, DEFAULT, LO, HI, CHOICES, PUB, AGREE, HELP)
 * ID       mlc_env_id_t constant MLC_ENV_<ID> (mlc_env_text(MLC_ENV_PINNED_LIMIT), ...)
 * TYPE     how the value parses: STR, INT, BOOL (0/1), SIZE (bytes, K/M/G), SECONDS, CHOICE, ALGO
 * DEFAULT  the value when unset, as text (parsed by TYPE; "" = none)
 * LO, HI   the accepted range of INT, SIZE and SECONDS values
 * CHOICES  the names a CHOICE accepts (a NULL-terminated table in config.c), else NULL
 * PUB      MLC_PUB(field): the mlc_config_t field that overrides the variable; MLC_NOPUB: none
 * AGREE    MLC_AGREE(field): every rank must resolve the same value (compared at comm init,
 *          field of mlc_cfg_t); MLC_LOCAL: may differ between ranks
 * HELP     one line for mlcomm-info --env and the docs
 * Adding a variable is one row here; read it with the accessors below.
 */
#define MLC_ENV_LIST(X)                                                                        \
    X(BACKEND, "MLC_BACKEND", CHOICE, "auto", 0, 0, mlc_backend_names, MLC_PUB(backend), MLC_AGREE(backend), "backend: auto, threads, shm, mpi, nccl, rccl") \
    X(RANK, "MLC_RANK", INT, "", 0, INT_MAX, NULL, MLC_PUB(rank), MLC_LOCAL, "this process's rank (set by mlcomm-run; else torchrun/MPI/Slurm vars)") \
    X(WORLD_SIZE, "MLC_WORLD_SIZE", INT, "", 1, INT_MAX, NULL, MLC_PUB(world_size), MLC_AGREE(world_size), "number of ranks in the job") \
    X(LOCAL_RANK, "MLC_LOCAL_RANK", INT, "", 0, INT_MAX, NULL, MLC_PUB(local_rank), MLC_LOCAL, "rank among the processes of this host") \
    X(LOCAL_SIZE, "MLC_LOCAL_SIZE", INT, "", 1, INT_MAX, NULL, MLC_PUB(local_size), MLC_LOCAL, "number of ranks on this host") \
    X(JOB_ID, "MLC_JOB_ID", STR, "", 0, 0, NULL, MLC_PUB(job_id), MLC_LOCAL, "job identifier shared by all ranks (names shared-memory segments)") \
    X(JOB_FD, "MLC_JOB_FD", INT, "", 0, INT_MAX, NULL, MLC_NOPUB, MLC_LOCAL, "set by mlcomm-run: fd of the job state (peer-death flags)") \
    X(HOST_ID, "MLC_HOST_ID", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "host identity at bootstrap (ranks with equal ids share a host; default: host name and boot id); testing several hosts on one") \
    X(BOOTSTRAP_ADDR, "MLC_BOOTSTRAP_ADDR", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "address mlc_get_unique_id's listener binds and puts in the id (default: first non-loopback, non-bridge IPv4, else 127.0.0.1)") \
    X(TIMEOUT, "MLC_TIMEOUT", SECONDS, "600", 0, 1000000000, NULL, MLC_PUB(timeout_s), MLC_LOCAL, "seconds without progress before MLC_ERR_TIMEOUT (0 = never)") \
    X(LOG_LEVEL, "MLC_LOG_LEVEL", CHOICE, "warn", 0, 0, mlc_log_level_names, MLC_PUB(log_level), MLC_LOCAL, "log level: error, warn, info, debug, trace") \
    X(LOG_FILE, "MLC_LOG_FILE", STR, "", 0, 0, NULL, MLC_PUB(log_file), MLC_LOCAL, "log file (default stderr); %h = host, %p = pid") \
    X(PROFILE, "MLC_PROFILE", STR, "", 0, 0, NULL, MLC_PUB(profile), MLC_LOCAL, "Chrome/Perfetto trace, one file per rank with all its communicators; %r = rank, %p = pid; 'stats' = no file") \
    X(MEMORY, "MLC_MEMORY", CHOICE, "host", 0, 0, mlc_memory_names, MLC_PUB(memory), MLC_AGREE(memory), "buffer memory kind: host, cuda, rocm, auto") \
    X(STAGE_CHUNK, "MLC_STAGE_CHUNK", SIZE, "4M", 64, 1073741824, NULL, MLC_NOPUB, MLC_AGREE(stage_chunk), "device buffers on threads/shm/mpi: staging chunk, bytes (K/M/G)") \
    X(CHECK, "MLC_CHECK", BOOL, "0", 0, 1, NULL, MLC_NOPUB, MLC_AGREE(check), "mpi/nccl: compare every collective's arguments across ranks first (0/1; threads/shm always do)") \
    X(MPI_THREAD_LEVEL, "MLC_MPI_THREAD_LEVEL", CHOICE, "multiple", 0, 3, mlc_thread_level_names, MLC_PUB(mpi_thread_level), MLC_LOCAL, "MPI thread level: single, funneled, serialized, multiple") \
    X(MPI_CUDA_AWARE, "MLC_MPI_CUDA_AWARE", CHOICE, "auto", 0, 0, mlc_cuda_aware_names, MLC_NOPUB, MLC_LOCAL, "mpi: hand device buffers to MPI: auto (ask MPI), 1, 0 (stage them)") \
    X(EXCHANGE_EXEC, "MLC_EXCHANGE_EXEC", STR, "auto", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "exchange executor: auto, mpi_pack, mpi_subarray, p2p") \
    X(CMA, "MLC_CMA", BOOL, "1", 0, 1, NULL, MLC_PUB(cma), MLC_LOCAL, "shm: single-copy transfers with process_vm_readv where allowed (0/1)") \
    X(STREAM_MIN, "MLC_STREAM_MIN", SIZE, "16M", 0, LLONG_MAX, NULL, MLC_NOPUB, MLC_LOCAL, "threads/shm: a result of at least this many bytes that no peer reads (an allgather's result, reduce_scatter block, broadcast root copy, staged allreduce) bypasses the caches (streaming stores); 0 = never") \
    X(STAGES, "MLC_STAGES", CHOICE, "auto", 0, 0, mlc_stages_names, MLC_NOPUB, MLC_AGREE(stages), "shm: large allreduces, allgathers and broadcasts through the ranks' stages: auto (in-place broadcasts from 1 MiB, allreduces from 16 MiB, every allreduce and allgather past the slots and out-of-place broadcasts from 1 MiB where single copy is missing, the same but allgathers from 1 MiB in all where it is slow, and where it is slow and the ranks outnumber their cpus allgathers and broadcasts of every size past the slots), on (as auto, and every allreduce and allgather past the slots and every broadcast from 1 MiB), off") \
    X(STAGE_STORES, "MLC_STAGE_STORES", CHOICE, "auto", 0, 0, mlc_stage_stores_names, MLC_NOPUB, MLC_LOCAL, "shm: how a rank writes into its stage: auto (plain stores while they keep pace, streaming stores while they stall: on hosts whose cores at times share no cache; a staged allreduce streams instead where that made such allreduces faster), plain, streaming") \
    X(FAULT_INIT, "MLC_FAULT_INIT", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "testing only: R:POINT makes rank R SIGKILL itself at shm init POINT (rendezvous, attach, failure-claimed); R:POINT:stop, SIGSTOP; 0:format, rank 0 marks the segment as another build's") \
    X(ALGO_BROADCAST, "MLC_ALGO_BROADCAST", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_BROADCAST]), "force the broadcast algorithm") \
    X(ALGO_REDUCE, "MLC_ALGO_REDUCE", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_REDUCE]), "force the reduce algorithm") \
    X(ALGO_ALLREDUCE, "MLC_ALGO_ALLREDUCE", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_ALLREDUCE]), "force the allreduce algorithm") \
    X(ALGO_ALLGATHER, "MLC_ALGO_ALLGATHER", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_ALLGATHER]), "force the allgather algorithm") \
    X(ALGO_ALLGATHERV, "MLC_ALGO_ALLGATHERV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_ALLGATHERV]), "force the allgatherv algorithm") \
    X(ALGO_REDUCE_SCATTER, "MLC_ALGO_REDUCE_SCATTER", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_REDUCE_SCATTER]), "force the reduce_scatter algorithm") \
    X(ALGO_ALLTOALL, "MLC_ALGO_ALLTOALL", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_ALLTOALL]), "force the alltoall algorithm") \
    X(ALGO_ALLTOALLV, "MLC_ALGO_ALLTOALLV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_ALLTOALLV]), "force the alltoallv algorithm") \
    X(ALGO_GATHER, "MLC_ALGO_GATHER", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_GATHER]), "force the gather algorithm") \
    X(ALGO_GATHERV, "MLC_ALGO_GATHERV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_GATHERV]), "force the gatherv algorithm") \
    X(ALGO_SCATTER, "MLC_ALGO_SCATTER", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_SCATTER]), "force the scatter algorithm") \
    X(ALGO_SCATTERV, "MLC_ALGO_SCATTERV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_SCATTERV]), "force the scatterv algorithm") \
    X(ALGO_BARRIER, "MLC_ALGO_BARRIER", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_BARRIER]), "force the barrier algorithm") \
    X(ALGO_SEND, "MLC_ALGO_SEND", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_SEND]), "force the send algorithm (point-to-point: native only)") \
    X(ALGO_RECV, "MLC_ALGO_RECV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_RECV]), "force the recv algorithm (point-to-point: native only)") \
    X(ALGO_SENDRECV, "MLC_ALGO_SENDRECV", ALGO, "auto", 0, 0, NULL, MLC_NOPUB, MLC_AGREE(algo[MLC_COLL_SENDRECV]), "force the sendrecv algorithm (point-to-point: native only)") \
    X(CUDART_LIB, "MLC_CUDART_LIB", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "path of the CUDA runtime library to load") \
    X(HIPRT_LIB, "MLC_HIPRT_LIB", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "path of the HIP runtime library to load") \
    X(NCCL_LIB, "MLC_NCCL_LIB", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "path of the NCCL library to load") \
    X(RCCL_LIB, "MLC_RCCL_LIB", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "path of the RCCL library to load") \
    X(PINNED_LIMIT, "MLC_PINNED_LIMIT", SIZE, "1073741824", 1, LLONG_MAX, NULL, MLC_NOPUB, MLC_LOCAL, "pinned host memory pool limit in bytes") \
    X(DEVICE, "MLC_DEVICE", STR, "auto", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "GPU of this rank on every backend: auto (a device the caller made current if not 0, else local rank mod device count) or a device number") \
    X(CUDA_IPC, "MLC_CUDA_IPC", BOOL, "1", 0, 1, NULL, MLC_NOPUB, MLC_LOCAL, "shm: move device buffers between processes with CUDA/HIP IPC (0/1)") \
    X(NCCL_NCHANNELS, "MLC_NCCL_NCHANNELS", INT, "", 1, 64, NULL, MLC_NOPUB, MLC_LOCAL, "nccl/rccl: channels per collective of each communicator (ncclConfig_t minCTAs = maxCTAs)") \
    X(NCCL_BUFFSIZE, "MLC_NCCL_BUFFSIZE", SIZE, "", 4096, 2147483648LL, NULL, MLC_NOPUB, MLC_LOCAL, "nccl/rccl: NCCL buffer size in bytes, K/M/G (NCCL_BUFFSIZE; one value per process)") \
    X(MASTER_ADDR, "MASTER_ADDR", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "read: torchrun's rendezvous host (job id; nccl's TCP bootstrap)") \
    X(MASTER_PORT, "MASTER_PORT", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "read: torchrun's rendezvous port (nccl's TCP bootstrap uses the port above it)") \
    X(NCCL_COMM_BLOCKING, "NCCL_COMM_BLOCKING", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "read: NCCL's override of the communicator's blocking mode; nccl/rccl refuse 1 (NCCL calls could then block beyond MLC_TIMEOUT and mlc_comm_abort)") \
    X(EXPORT_NCCL_ALGO, "NCCL_ALGO", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "set by nccl/rccl from MLC_ALGO_ALLREDUCE before the process's first NCCL communicator") \
    X(EXPORT_NCCL_BUFFSIZE, "NCCL_BUFFSIZE", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "set by nccl/rccl from MLC_NCCL_BUFFSIZE before the process's first NCCL communicator") \
    X(EXPORT_NCCL_DEBUG, "NCCL_DEBUG", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "set to INFO by nccl/rccl at MLC_LOG_LEVEL=debug unless already set") \
    X(EXPORT_OMPI_SINGLE_COPY, "OMPI_MCA_btl_vader_single_copy_mechanism", STR, "", 0, 0, NULL, MLC_NOPUB, MLC_LOCAL, "set to none by mpi before it starts Open MPI 4 unless already set (its single copy wrote messages too long for a buffer past its end)")

/* Identifiers of the rows: MLC_ENV_TIMEOUT, MLC_ENV_PINNED_LIMIT, ... */
typedef enum mlc_env_id {
#define MLC_X_ID(id, ...) MLC_ENV_##id,
    MLC_ENV_LIST(MLC_X_ID)
#undef MLC_X_ID
    MLC_ENV_COUNT
} mlc_env_id_t;

typedef enum mlc_env_type {
    MLC_ENV_TYPE_STR, MLC_ENV_TYPE_INT, MLC_ENV_TYPE_BOOL, MLC_ENV_TYPE_SIZE,
    MLC_ENV_TYPE_SECONDS, MLC_ENV_TYPE_CHOICE, MLC_ENV_TYPE_ALGO
} mlc_env_type_t;

typedef struct mlc_env_var {
    const char *name, *default_text, *help;
    mlc_env_type_t type;
    long long lo, hi;              /* range of INT, SIZE, SECONDS */
    const char *const *choices;    /* names a CHOICE accepts, NULL-terminated */
    const char *public_field;      /* mlc_config_t field, or NULL */
    size_t public_offset;          /* offsetof(mlc_config_t, public_field) */
    bool agree;                    /* must be the same on every rank */
    size_t agree_offset, agree_size; /* the resolved mlc_cfg_t field compared */
} mlc_env_var_t;
/* The list above as a table, in MLC_ENV_LIST order (index = mlc_env_id_t),
 * terminated by a NULL name. */
extern const mlc_env_var_t mlc_env_vars[];

/*
 * Process-level access to a variable (no mlc_config_t field, or read outside
 * comm init). Every read of the environment in the library goes through these.
 * mlc_env_text: the value, NULL when unset or empty.
 * mlc_env_int / mlc_env_size / mlc_env_seconds: parse by the row's type and
 * range; unset gives the row's default (0 when it has none) and *set = false
 * (set may be NULL). A malformed value is MLC_ERR_CONFIG naming the variable,
 * the value and what it accepts.
 */
const char *mlc_env_text(mlc_env_id_t id);
mlc_status_t mlc_env_int(mlc_env_id_t id, long long *out, bool *set);
mlc_status_t mlc_env_size(mlc_env_id_t id, size_t *out, bool *set);
mlc_status_t mlc_env_seconds(mlc_env_id_t id, double *out, bool *set);
/* Set a variable the library exports for a library it loads (NCCL_*,
 * OMPI_MCA_*), unless it is already set: the only write to the environment. */
mlc_status_t mlc_env_export(mlc_env_id_t id, const char *value);
/* The row's default parsed as a size / number (0 when it has none). */
size_t mlc_env_default_size(mlc_env_id_t id);
double mlc_env_default_seconds(mlc_env_id_t id);

/* MLC_STAGES, in the order of its names (config.c). */
enum { MLC_STAGES_AUTO, MLC_STAGES_ON, MLC_STAGES_OFF };
/* MLC_STAGE_STORES, in the order of its names (config.c). */
enum { MLC_STAGE_STORES_AUTO, MLC_STAGE_STORES_PLAIN, MLC_STAGE_STORES_STREAMING };

/* Everything mlc_comm_init needs, resolved. Strings are owned copies. */
typedef struct mlc_cfg {
    char backend[16];
    int rank, world_size, local_rank, local_size;
    char job_id[96];
    int job_fd;          /* -1 when not under mlcomm-run */
    double timeout_s;    /* 0 = never (the default applies when neither caller nor env sets it) */
    int log_level;
    char log_file[256];
    char profile[256];   /* "" = off */
    int memory;
    int mpi_thread_level;
    int cma;
    int stages;          /* MLC_STAGES: MLC_STAGES_AUTO, _ON, _OFF */
    int stage_stores;    /* MLC_STAGE_STORES: MLC_STAGE_STORES_AUTO, _PLAIN, _STREAMING */
    size_t stage_chunk;  /* MLC_STAGE_CHUNK bytes; 0 = default */
    int mpi_cuda_aware;  /* MLC_MPI_CUDA_AWARE: -1 auto, 0, 1 */
    int cuda_ipc;        /* MLC_CUDA_IPC: 0 or 1 */
    int device;          /* MLC_DEVICE: a device number, or -1 for auto */
    int check;           /* MLC_CHECK: 0 or 1 */
    char algo[MLC_COLL_COUNT][32]; /* "" = auto */
    const char *rank_source; /* which launcher's variables gave the rank ("mlcomm-run", "torchrun", ...) */
    char rank_origin[256];   /* where rank and size came from, in words (info log, mlcomm-info) */
} mlc_cfg_t;

/*
 * Resolve caller config + environment + defaults. A malformed value or a
 * partial rank set fails with MLC_ERR_CONFIG and a message naming the variable.
 * cfg may be NULL. A cfg whose size/magic/version is wrong is INVALID_ARG.
 */
mlc_status_t mlc_config_resolve(const mlc_config_t *cfg, mlc_cfg_t *out);
/*
 * The same for a caller that names rank and size itself (init by store or
 * unique id, init_all): no launcher variable is read, so a
 * partial or foreign launcher set cannot fail it; the caller fills rank,
 * world size and their origin.
 */
mlc_status_t mlc_config_resolve_given_ranks(const mlc_config_t *cfg, mlc_cfg_t *out);
/*
 * Hash of the collective-relevant settings (backend, world size, memory kind,
 * staging chunk, every MLC_ALGO_<COLL>): comm init compares it across ranks
 * before any collective whose algorithm a setting could change.
 */
uint64_t mlc_config_hash(const mlc_cfg_t *cfg);
/* Name of the first collective-relevant variable that differs between a and b, or NULL. */
const char *mlc_config_diff(const mlc_cfg_t *a, const mlc_cfg_t *b);
/* The same, also writing both values as a message shows them ("'ring'",
 * "unset (auto)") into a_text and b_text (len bytes each; may be NULL). */
const char *mlc_config_diff_text(const mlc_cfg_t *a, const mlc_cfg_t *b, char *a_text, char *b_text,
                                 size_t len);

/* Parsing helpers shared by config and tools (strict: trailing junk is an error). */
bool mlc_parse_int(const char *s, long long lo, long long hi, long long *out);
bool mlc_parse_double(const char *s, double lo, double hi, double *out);
/* Size with optional K/M/G suffix (powers of 1024). */
bool mlc_parse_size(const char *s, size_t *out);
#endif
