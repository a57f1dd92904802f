/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Resolved configuration: caller field > environment variable > default.
 * MLC_ENV_LIST is the one list of environment variables: mlc_config_resolve
 * reads them, mlcomm-info prints them with their help text.
 */
#ifndef MLC_CORE_CONFIG_H
#define MLC_CORE_CONFIG_H
#include <stdbool.h>
#include "mlcomm.h"

/* X(name, default shown by mlcomm-info, help) */
#define MLC_ENV_LIST(X)                                                                        \
    X(MLC_BACKEND, "auto", "backend: auto, threads, shm, mpi, nccl, rccl")                     \
    X(MLC_RANK, "", "this process's rank (set by mlcomm-run; else torchrun/MPI/Slurm vars)")    \
    X(MLC_WORLD_SIZE, "", "number of ranks in the job")                                        \
    X(MLC_LOCAL_RANK, "", "rank among the processes of this host")                             \
    X(MLC_LOCAL_SIZE, "", "number of ranks on this host")                                      \
    X(MLC_JOB_ID, "", "job identifier shared by all ranks (names shared-memory segments)")     \
    X(MLC_JOB_FD, "", "set by mlcomm-run: fd of the job state (peer-death flags)")             \
    X(MLC_TIMEOUT, "600", "seconds without progress before MLC_ERR_TIMEOUT (0 = never)")       \
    X(MLC_LOG_LEVEL, "warn", "log level: error, warn, info, debug, trace")                     \
    X(MLC_LOG_FILE, "", "log file (default stderr); %h = host, %p = pid")                      \
    X(MLC_PROFILE, "", "Chrome/Perfetto trace, one file per rank with all its communicators; %r = rank, %p = pid; 'stats' = no file") \
    X(MLC_MEMORY, "host", "buffer memory kind: host, cuda, rocm, auto")                        \
    X(MLC_MPI_THREAD_LEVEL, "multiple", "MPI thread level: single, funneled, serialized, multiple") \
    X(MLC_MPI_CUDA_AWARE, "auto", "mpi: hand device buffers to MPI: auto (ask MPI), 1, 0 (stage them)") \
    X(MLC_EXCHANGE_EXEC, "auto", "exchange executor: auto, mpi_pack, mpi_subarray, p2p")        \
    X(MLC_CMA, "1", "shm: single-copy transfers with process_vm_readv where allowed (0/1)")    \
    X(MLC_CHECK, "0", "mpi/nccl: compare every collective's arguments across ranks first (0/1; threads/shm always do)") \
    X(MLC_FAULT_INIT, "", "testing only: R:POINT makes rank R SIGKILL itself at shm init POINT (rendezvous, attach)") \
    X(MLC_ALGO_BROADCAST, "auto", "force the broadcast algorithm")                              \
    X(MLC_ALGO_REDUCE, "auto", "force the reduce algorithm")                                    \
    X(MLC_ALGO_ALLREDUCE, "auto", "force the allreduce algorithm")                              \
    X(MLC_ALGO_ALLGATHER, "auto", "force the allgather algorithm")                              \
    X(MLC_ALGO_ALLGATHERV, "auto", "force the allgatherv algorithm")                            \
    X(MLC_ALGO_REDUCE_SCATTER, "auto", "force the reduce_scatter algorithm")                    \
    X(MLC_ALGO_ALLTOALL, "auto", "force the alltoall algorithm")                                \
    X(MLC_ALGO_ALLTOALLV, "auto", "force the alltoallv algorithm")                              \
    X(MLC_ALGO_GATHER, "auto", "force the gather algorithm")                                    \
    X(MLC_ALGO_GATHERV, "auto", "force the gatherv algorithm")                                  \
    X(MLC_ALGO_SCATTER, "auto", "force the scatter algorithm")                                  \
    X(MLC_ALGO_SCATTERV, "auto", "force the scatterv algorithm")                                \
    X(MLC_ALGO_BARRIER, "auto", "force the barrier algorithm")                                  \
    X(MLC_CUDART_LIB, "", "path of the CUDA runtime library to load")                          \
    X(MLC_HIPRT_LIB, "", "path of the HIP runtime library to load")                            \
    X(MLC_NCCL_LIB, "", "path of the NCCL library to load")                                    \
    X(MLC_RCCL_LIB, "", "path of the RCCL library to load")                                    \
    X(MLC_PINNED_LIMIT, "1073741824", "pinned host memory pool limit in bytes")                \
    X(MLC_STAGE_CHUNK, "4M", "device buffers on threads/shm/mpi: staging chunk, bytes (K/M/G)") \
    X(MLC_CUDA_IPC, "1", "shm: move device buffers between processes with CUDA/HIP IPC (0/1)") \
    X(MLC_NCCL_NCHANNELS, "", "nccl/rccl: channels per collective (NCCL_MIN/MAX_NCHANNELS)")   \
    X(MLC_NCCL_BUFFSIZE, "", "nccl/rccl: NCCL buffer size in bytes, K/M/G (NCCL_BUFFSIZE)")

typedef struct mlc_env_var {
    const char *name, *default_text, *help;
} mlc_env_var_t;
/* The list above as a table, terminated by a NULL name. */
extern const mlc_env_var_t mlc_env_vars[];

/* Everything mlc_comm_init needs, resolved. Strings are owned copies. */
typedef struct mlc_cfg {
    char backend[16];
    int rank, world_size, local_rank, local_size;
    char job_id[96];
    int job_fd;          /* -1 when not under mlcomm-run */
    double timeout_s;    /* 0 = never */
    bool timeout_set;    /* set by caller or env (the MPI backend needs to know) */
    int log_level;
    char log_file[256];
    char profile[256];   /* "" = off */
    int memory;
    int mpi_thread_level;
    int cma;
    size_t stage_chunk;  /* MLC_STAGE_CHUNK bytes; 0 = default */
    int mpi_cuda_aware;  /* MLC_MPI_CUDA_AWARE: -1 auto, 0, 1 */
    int cuda_ipc;        /* MLC_CUDA_IPC: 0 or 1 */
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
