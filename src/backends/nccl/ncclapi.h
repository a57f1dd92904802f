/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Our own minimal declarations of the NCCL API (no nccl.h: the build never
 * needs NCCL or CUDA headers) and the library loader. RCCL exports the same
 * API, so one list serves libnccl.so.2 and librccl.so.1.
 */
#ifndef MLC_NCCL_API_H
#define MLC_NCCL_API_H
#include <stddef.h>
#include "gpu/dynlib.h"
#include "mlcomm.h"

typedef struct mlc_ncclComm *mlc_ncclComm_t;
#define MLC_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[MLC_NCCL_UNIQUE_ID_BYTES];
} mlc_ncclUniqueId;

/* ncclResult_t */
#define MLC_NCCL_RESULT_LIST(X)          \
    X(ncclSuccess, 0)                    \
    X(ncclUnhandledCudaError, 1)         \
    X(ncclSystemError, 2)                \
    X(ncclInternalError, 3)              \
    X(ncclInvalidArgument, 4)            \
    X(ncclInvalidUsage, 5)               \
    X(ncclRemoteError, 6)                \
    X(ncclInProgress, 7)
typedef enum {
#define MLC_X_ENUM(name, value) mlc_##name = value,
    MLC_NCCL_RESULT_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
} mlc_ncclResult_t;

/* ncclRedOp_t (ncclAvg since NCCL 2.10) */
typedef enum { mlc_ncclSum = 0, mlc_ncclProd = 1, mlc_ncclMax = 2, mlc_ncclMin = 3, mlc_ncclAvg = 4 } mlc_ncclRedOp_t;

/* ncclDataType_t (ncclBfloat16 since NCCL 2.10; RCCL numbers it the same) */
typedef enum {
    mlc_ncclInt8 = 0,
    mlc_ncclUint8 = 1,
    mlc_ncclInt32 = 2,
    mlc_ncclUint32 = 3,
    mlc_ncclInt64 = 4,
    mlc_ncclUint64 = 5,
    mlc_ncclFloat16 = 6,
    mlc_ncclFloat32 = 7,
    mlc_ncclFloat64 = 8,
    mlc_ncclBfloat16 = 9,
} mlc_ncclDataType_t;

#define MLC_NCCL_SPLIT_NOCOLOR (-1)
#define MLC_NCCL_CONFIG_UNDEF_INT (-2147483647 - 1) /* INT_MIN */

/*
 * The leading fields of ncclConfig_t as of NCCL 2.17 (size, magic, version,
 * blocking, cgaClusterSize, minCTAs, maxCTAs, netName). NCCL copies
 * `size` bytes and fills the fields we do not pass from its defaults, so a
 * prefix is a valid config for every later version.
 */
typedef struct mlc_ncclConfig {
    size_t size;
    unsigned int magic;   /* 0xcafebeef */
    unsigned int version; /* NCCL_VERSION(2,17,0) = 21700 */
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
} mlc_ncclConfig_t;
#define MLC_NCCL_CONFIG_MAGIC 0xcafebeefu
#define MLC_NCCL_CONFIG_VERSION 21700u

/* X(symbol, required, return, parameters). cudaStream_t is void *. */
#define MLC_NCCL_SYMBOLS(X)                                                                       \
    X(ncclGetVersion, REQ, mlc_ncclResult_t, (int *version))                                      \
    X(ncclGetUniqueId, REQ, mlc_ncclResult_t, (mlc_ncclUniqueId * id))                            \
    X(ncclCommInitRankConfig, REQ, mlc_ncclResult_t,                                              \
      (mlc_ncclComm_t * comm, int nranks, mlc_ncclUniqueId id, int rank, mlc_ncclConfig_t *config)) \
    X(ncclCommFinalize, OPT, mlc_ncclResult_t, (mlc_ncclComm_t comm))                             \
    X(ncclCommDestroy, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm))                              \
    X(ncclCommAbort, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm))                                \
    X(ncclCommSplit, OPT, mlc_ncclResult_t,                                                       \
      (mlc_ncclComm_t comm, int color, int key, mlc_ncclComm_t *newcomm, mlc_ncclConfig_t *config)) \
    X(ncclCommGetAsyncError, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm, mlc_ncclResult_t * err)) \
    X(ncclCommCount, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm, int *count))                    \
    X(ncclCommUserRank, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm, int *rank))                  \
    X(ncclCommCuDevice, REQ, mlc_ncclResult_t, (mlc_ncclComm_t comm, int *device))                \
    X(ncclGetErrorString, REQ, const char *, (mlc_ncclResult_t result))                           \
    X(ncclGetLastError, OPT, const char *, (mlc_ncclComm_t comm))                                 \
    X(ncclBroadcast, REQ, mlc_ncclResult_t,                                                       \
      (const void *sendbuf, void *recvbuf, size_t count, mlc_ncclDataType_t dt, int root,        \
       mlc_ncclComm_t comm, void *stream))                                                        \
    X(ncclReduce, REQ, mlc_ncclResult_t,                                                          \
      (const void *sendbuf, void *recvbuf, size_t count, mlc_ncclDataType_t dt,                  \
       mlc_ncclRedOp_t op, int root, mlc_ncclComm_t comm, void *stream))                          \
    X(ncclAllReduce, REQ, mlc_ncclResult_t,                                                       \
      (const void *sendbuf, void *recvbuf, size_t count, mlc_ncclDataType_t dt,                  \
       mlc_ncclRedOp_t op, mlc_ncclComm_t comm, void *stream))                                    \
    X(ncclReduceScatter, REQ, mlc_ncclResult_t,                                                   \
      (const void *sendbuf, void *recvbuf, size_t recvcount, mlc_ncclDataType_t dt,              \
       mlc_ncclRedOp_t op, mlc_ncclComm_t comm, void *stream))                                    \
    X(ncclAllGather, REQ, mlc_ncclResult_t,                                                       \
      (const void *sendbuf, void *recvbuf, size_t sendcount, mlc_ncclDataType_t dt,              \
       mlc_ncclComm_t comm, void *stream))                                                        \
    X(ncclSend, REQ, mlc_ncclResult_t,                                                            \
      (const void *sendbuf, size_t count, mlc_ncclDataType_t dt, int peer, mlc_ncclComm_t comm,  \
       void *stream))                                                                             \
    X(ncclRecv, REQ, mlc_ncclResult_t,                                                            \
      (void *recvbuf, size_t count, mlc_ncclDataType_t dt, int peer, mlc_ncclComm_t comm,        \
       void *stream))                                                                             \
    X(ncclGroupStart, REQ, mlc_ncclResult_t, (void))                                              \
    X(ncclGroupEnd, REQ, mlc_ncclResult_t, (void))

typedef struct mlc_nccl_api {
    const char *name;  /* "NCCL" / "RCCL" */
    mlc_dynlib_t lib;
    int version;       /* ncclGetVersion: 22809 = 2.28.9 */
#define MLC_X_FIELD(symbol, req, ret, params) ret(*symbol) params;
    MLC_NCCL_SYMBOLS(MLC_X_FIELD)
#undef MLC_X_FIELD
} mlc_nccl_api_t;

typedef enum mlc_nccl_flavor { MLC_NCCL_FLAVOR_NCCL, MLC_NCCL_FLAVOR_RCCL, MLC_NCCL_FLAVOR_COUNT } mlc_nccl_flavor_t;

/*
 * The process-wide NCCL (or RCCL) library, loaded on first use, once,
 * thread-safe: libnccl.so.2 / libnccl.so (MLC_NCCL_LIB overrides), or
 * librccl.so.1 / librccl.so (MLC_RCCL_LIB). UNAVAILABLE with the reason
 * as the thread's message otherwise.
 */
mlc_status_t mlc_nccl_api_get(mlc_nccl_flavor_t flavor, const mlc_nccl_api_t **api);
/* Uncached load from `path` (NULL = env override / default names), for tests. */
mlc_status_t mlc_nccl_api_open(mlc_nccl_flavor_t flavor, const char *path, mlc_nccl_api_t *api,
                               char *why, size_t why_len);
/* The API if already loaded, else NULL; never loads. */
const mlc_nccl_api_t *mlc_nccl_api_peek(mlc_nccl_flavor_t flavor);

/* "2.28.9" from an ncclGetVersion code (either encoding). */
void mlc_nccl_version_text(int code, char *buf, size_t len);
/* NCCL_VERSION(x,y,z) as the library encodes it, for comparisons. */
int mlc_nccl_version_code(int major, int minor, int patch);
#endif
