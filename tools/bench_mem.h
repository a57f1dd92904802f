/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where mlcomm-bench's buffers live (--memory): host memory (malloc's, or
 * shared blocks of mlc_mem_alloc that peers on this host read in place), or device
 * memory of the GPU runtime mlcomm itself loads (src/devrt/gpurt.h), so the
 * library sees the very allocations the bench makes. Device memory is
 * never touched from the host: data goes in and out through host copies.
 */
#ifndef MLC_TOOLS_BENCH_MEM_H
#define MLC_TOOLS_BENCH_MEM_H
#include <stdbool.h>
#include <stddef.h>
#include "devrt/gpurt.h"
#include "mlcomm.h"

/* X(kind, name) in --help order. */
#define MLC_BENCH_MEMORY_LIST(X)       \
    X(MLC_BENCH_MEM_HOST, "host")      \
    X(MLC_BENCH_MEM_SHARED, "shared")  \
    X(MLC_BENCH_MEM_DEVICE, "device")
typedef enum mlc_bench_mem_kind {
#define MLC_X_ENUM(kind, name) kind,
    MLC_BENCH_MEMORY_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
} mlc_bench_mem_kind_t;

typedef struct mlc_bench_mem {
    mlc_bench_mem_kind_t kind;
    const mlc_gpurt_t *rt; /* device: the runtime; host: NULL */
    int ndev;              /* device: devices visible to this process */
    char text[96];         /* for the header: "host memory", "device memory (CUDA, MLC_MEMORY=cuda)" */
} mlc_bench_mem_t;

bool mlc_bench_memory_from_name(const char *name, mlc_bench_mem_kind_t *kind);
/* "host device": the names, for messages and --help. */
const char *mlc_bench_memory_names(void);

/*
 * Once per process, before any communicator. Device: MLC_MEMORY must let the
 * host backends classify buffers; unset, it is set to "cuda" for this process.
 * Then the runtime is loaded and a device must exist. On failure the reason
 * is printed and an MLC_BENCH_EXIT_* code returned; 0 on success.
 */
int mlc_bench_mem_setup(mlc_bench_mem_kind_t kind, mlc_bench_mem_t *m);

/* Device: make device index % ndev current for the calling thread. */
mlc_status_t mlc_bench_mem_use_device(const mlc_bench_mem_t *m, int index);

/* Page-aligned host memory (shared: mlc_mem_alloc's), or device memory of the current device. */
mlc_status_t mlc_bench_mem_alloc(const mlc_bench_mem_t *m, size_t bytes, void **p);
void mlc_bench_mem_free(const mlc_bench_mem_t *m, void *p);

/* Copy host -> buffer (upload) and buffer -> host (download); complete on return. */
mlc_status_t mlc_bench_mem_upload(const mlc_bench_mem_t *m, void *dst, const void *src, size_t bytes);
mlc_status_t mlc_bench_mem_download(const mlc_bench_mem_t *m, void *dst, const void *src, size_t bytes);
#endif
