/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU runtimes (CUDA runtime, HIP runtime) loaded with dlopen into one
 * table shape. CUDA and HIP have the same API under two prefixes, so both
 * fill the fields of MLC_GPURT_FIELDS; gpurt_syms.h holds one declarative
 * list per library mapping its symbols onto the fields, each required or
 * optional.
 *
 * Loading happens on first use (mlc_gpurt_get), once per process and
 * thread-safe: a CPU-only job never opens a GPU library. A missing library
 * or required symbol makes the runtime "unavailable" with the reason kept
 * (file, symbol, dlerror); it never crashes.
 *
 * Environment: MLC_CUDART_LIB / MLC_HIPRT_LIB name the file to load instead
 * of the default sonames (libcudart.so.13, .12, .11, libcudart.so;
 * libamdhip64.so.6, .5, libamdhip64.so). A default soname whose runtime
 * answers "insufficient driver" gives way to the next one.
 */
#ifndef MLC_DEVRT_GPURT_H
#define MLC_DEVRT_GPURT_H
#include <stdbool.h>
#include <stddef.h>
#include "base/config.h"
#include "base/dynlib.h"
#include "mlcomm.h"

typedef enum mlc_gpu_kind { MLC_GPU_CUDA, MLC_GPU_HIP, MLC_GPU_KIND_COUNT } mlc_gpu_kind_t;

/* What a pointer refers to, as the runtime sees it. */
#define MLC_GPU_MEM_LIST(X)                                           \
    X(MLC_GPU_MEM_UNREGISTERED, "pageable host memory")               \
    X(MLC_GPU_MEM_HOST, "pinned host memory")                         \
    X(MLC_GPU_MEM_DEVICE, "device memory")                            \
    X(MLC_GPU_MEM_MANAGED, "managed memory")
typedef enum mlc_gpu_mem {
#define MLC_X_ENUM(name, text) name,
    MLC_GPU_MEM_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
} mlc_gpu_mem_t;
const char *mlc_gpu_mem_name(mlc_gpu_mem_t m);

/* cudaIpcMemHandle_t / hipIpcMemHandle_t: 64 opaque bytes, passed by value. */
typedef struct mlc_gpu_ipc_handle {
    char reserved[64];
} mlc_gpu_ipc_handle_t;

/* Runtime constants shared by CUDA and HIP (same values in both APIs). */
#define MLC_GPU_SUCCESS 0
#define MLC_GPU_ERROR_INVALID_VALUE 1
#define MLC_GPU_ERROR_NOT_READY 600
#define MLC_GPU_ERROR_INSUFFICIENT_DRIVER 35 /* cudaErrorInsufficientDriver / hipErrorInsufficientDriver */
#define MLC_GPU_MEMCPY_DEFAULT 4          /* cudaMemcpyDefault / hipMemcpyDefault */
#define MLC_GPU_HOST_ALLOC_PORTABLE 1u    /* cudaHostAllocPortable / hipHostMallocPortable */
#define MLC_GPU_HOST_REGISTER_PORTABLE 1u /* cudaHostRegisterPortable / hipHostRegisterPortable */
#define MLC_GPU_EVENT_DISABLE_TIMING 2u   /* cudaEventDisableTiming / hipEventDisableTiming */
#define MLC_GPU_IPC_LAZY_PEER_ACCESS 1u   /* cudaIpcMemLazyEnablePeerAccess / hipIpc... */

/*
 * X(field, return type, parameter list). Error codes are returned as int
 * (cudaError_t / hipError_t are int-sized enums); streams and events are
 * opaque pointers.
 */
#define MLC_GPURT_FIELDS(X)                                                                 \
    X(get_error_string, const char *, (int err))                                           \
    X(get_error_name, const char *, (int err))                                             \
    X(get_last_error, int, (void))                                                         \
    X(driver_get_version, int, (int *version))                                             \
    X(runtime_get_version, int, (int *version))                                            \
    X(get_device_count, int, (int *count))                                                 \
    X(get_device, int, (int *device))                                                      \
    X(set_device, int, (int device))                                                       \
    X(get_device_properties, int, (void *prop, int device))                                \
    X(get_device_properties_legacy, int, (void *prop, int device))                         \
    X(device_get_attribute, int, (int *value, int attr, int device))                       \
    X(device_get_pci_bus_id, int, (char *bus_id, int len, int device))                     \
    X(device_can_access_peer, int, (int *can, int device, int peer))                       \
    X(pointer_get_attributes, int, (void *attributes, const void *ptr))                    \
    X(malloc, int, (void **ptr, size_t bytes))                                             \
    X(free, int, (void *ptr))                                                              \
    X(memcpy_async, int, (void *dst, const void *src, size_t bytes, int kind, void *stream)) \
    X(memcpy_2d_async, int,                                                                \
      (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, \
       int kind, void *stream))                                                            \
    X(memset_async, int, (void *dst, int value, size_t bytes, void *stream))               \
    X(stream_create_with_flags, int, (void **stream, unsigned flags))                      \
    X(stream_destroy, int, (void *stream))                                                 \
    X(stream_synchronize, int, (void *stream))                                             \
    X(stream_wait_event, int, (void *stream, void *event, unsigned flags))                 \
    X(event_create_with_flags, int, (void **event, unsigned flags))                        \
    X(event_record, int, (void *event, void *stream))                                      \
    X(event_query, int, (void *event))                                                     \
    X(event_synchronize, int, (void *event))                                               \
    X(event_destroy, int, (void *event))                                                   \
    X(host_alloc, int, (void **ptr, size_t bytes, unsigned flags))                         \
    X(free_host, int, (void *ptr))                                                         \
    X(host_register, int, (void *ptr, size_t bytes, unsigned flags))                       \
    X(host_unregister, int, (void *ptr))                                                   \
    X(ipc_get_mem_handle, int, (mlc_gpu_ipc_handle_t * handle, void *ptr))                 \
    X(ipc_open_mem_handle, int, (void **ptr, mlc_gpu_ipc_handle_t handle, unsigned flags)) \
    X(ipc_close_mem_handle, int, (void *ptr))

typedef struct mlc_gpurt {
    mlc_gpu_kind_t kind;
    const char *name;        /* "CUDA" / "HIP" */
    const char *prefix;      /* "cuda" / "hip": names in messages (cudaGetDeviceCount) */
    mlc_dynlib_t lib;
    int runtime_version;     /* CUDA: 13000 = 13.0; HIP: 60032830 = 6.0 */
    bool legacy_mem_types;   /* HIP before 6.0 numbered hipMemoryType differently */
    size_t props_mem_offset; /* offset of totalGlobalMem in the properties struct used */
#define MLC_X_FIELD(field, ret, params) ret(*field) params;
    MLC_GPURT_FIELDS(MLC_X_FIELD)
#undef MLC_X_FIELD
} mlc_gpurt_t;

/* Display name of a kind ("CUDA", "HIP"). */
const char *mlc_gpu_kind_name(mlc_gpu_kind_t kind);

/*
 * The process-wide runtime of `kind`, loaded on the first call (thread-safe,
 * once). UNAVAILABLE with the reason as the thread's message when it cannot
 * be loaded; the same answer on every later call.
 */
mlc_status_t mlc_gpurt_get(mlc_gpu_kind_t kind, const mlc_gpurt_t **rt);
/* The runtime if an earlier call loaded it, else NULL. Never loads. */
const mlc_gpurt_t *mlc_gpurt_peek(mlc_gpu_kind_t kind);
/* Why the runtime is unavailable (empty when loaded or never tried). */
const char *mlc_gpurt_why(mlc_gpu_kind_t kind);

/*
 * Load a runtime into `rt` without caching: `path` (or NULL for the env
 * override and default sonames). For tests and tools. why gets the reason.
 */
mlc_status_t mlc_gpurt_open(mlc_gpu_kind_t kind, const char *path, mlc_gpurt_t *rt, char *why,
                            size_t why_len);
void mlc_gpurt_close(mlc_gpurt_t *rt);

/* "cudaErrorNoDevice (100): no CUDA-capable device is detected" into buf. */
const char *mlc_gpurt_strerror(const mlc_gpurt_t *rt, int err, char *buf, size_t len);

/*
 * Number of devices. A runtime error (no driver, no device) is
 * MLC_ERR_UNAVAILABLE with "<prefix>GetDeviceCount: <error>" as message;
 * zero devices is UNAVAILABLE too.
 */
mlc_status_t mlc_gpurt_device_count(const mlc_gpurt_t *rt, int *count);

/* Classify `ptr`; *device is the owning device for device memory, else -1. */
mlc_status_t mlc_gpurt_pointer_kind(const mlc_gpurt_t *rt, const void *ptr, mlc_gpu_mem_t *mem,
                                    int *device);

/*
 * Whether the calling thread has a current context (cuCtxGetCurrent from the
 * CUDA driver, hipCtxGetCurrent from the HIP runtime). A thread without one
 * reports device 0 from cudaGetDevice, and since CUDA 12 cudaSetDevice(0)
 * would create a context there: restore a thread's device only when it had
 * one. True when the driver cannot tell.
 */
bool mlc_gpurt_thread_has_context(const mlc_gpurt_t *rt);

/*
 * The device of a rank, the same rule on every backend: MLC_DEVICE (cfg->device
 * >= 0) names it (MLC_ERR_CONFIG naming the variable when it is not below
 * ndev); else a device the caller made current (non-zero) is kept, else local
 * rank i takes device i mod ndev. Makes nothing current and creates no context.
 */
mlc_status_t mlc_gpu_choose_device(const mlc_gpurt_t *rt, const mlc_cfg_t *cfg, int local_rank, int local_size,
                                   int ndev, int *device);

typedef struct mlc_gpu_device_info {
    char name[256];
    size_t total_mem;    /* 0 when unknown */
    int cc_major, cc_minor; /* -1 when unknown (HIP) */
    char bus_id[32];     /* "" when unknown */
} mlc_gpu_device_info_t;
mlc_status_t mlc_gpurt_device_info(const mlc_gpurt_t *rt, int device, mlc_gpu_device_info_t *info);

/* "13.0" from a CUDA version code, "6.0.32830" from a HIP one. */
void mlc_gpurt_version_text(mlc_gpu_kind_t kind, int code, char *buf, size_t len);
#endif
