/* SPDX-License-Identifier: BSD-3-Clause */
/* Where mlcomm-bench's buffers live: see bench_mem.h. */
#include "bench_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_run.h"
#include "base/config.h"
#include "base/error.h"

bool mlc_bench_memory_from_name(const char *name, mlc_bench_mem_kind_t *kind)
{
#define MLC_X_MATCH(k, n)         \
    if (strcmp(name, n) == 0) {   \
        *kind = k;                \
        return true;              \
    }
    MLC_BENCH_MEMORY_LIST(MLC_X_MATCH)
#undef MLC_X_MATCH
    return false;
}

const char *mlc_bench_memory_names(void)
{
#define MLC_X_NAME(k, n) " " n
    return &(MLC_BENCH_MEMORY_LIST(MLC_X_NAME))[1];
#undef MLC_X_NAME
}

/*
 * The runtime MLC_MEMORY tells the library to classify buffers with: the
 * one the bench must allocate from. Unset: "cuda", set for this process so
 * every communicator of it (and the ranks it may start) agrees.
 */
static int runtime_of_memory_kind(mlc_gpu_kind_t *kind, const char **memory)
{
    const char *v = mlc_env_text(MLC_ENV_MEMORY);
    if (!v || !v[0]) {
        if (setenv("MLC_MEMORY", "cuda", 1) != 0) {
            fprintf(stderr, "mlcomm-bench: --memory device: cannot set MLC_MEMORY=cuda\n");
            return MLC_BENCH_EXIT_ERROR;
        }
        v = "cuda";
    }
    *memory = v;
    if (strcmp(v, "cuda") == 0 || strcmp(v, "auto") == 0) {
        *kind = MLC_GPU_CUDA;
        return 0;
    }
    if (strcmp(v, "rocm") == 0) {
        *kind = MLC_GPU_HIP;
        return 0;
    }
    if (strcmp(v, "host") == 0)
        fprintf(stderr, "mlcomm-bench: --memory device needs MLC_MEMORY=cuda, rocm or auto (or unset),"
                        " not 'host': with 'host' the library takes every buffer for host memory\n");
    else
        fprintf(stderr, "mlcomm-bench: MLC_MEMORY='%s' is not one of host cuda rocm auto\n", v);
    return MLC_BENCH_EXIT_USAGE;
}

int mlc_bench_mem_setup(mlc_bench_mem_kind_t kind, mlc_bench_mem_t *m)
{
    *m = (mlc_bench_mem_t){.kind = kind};
    if (kind != MLC_BENCH_MEM_DEVICE) {
        snprintf(m->text, sizeof m->text, kind == MLC_BENCH_MEM_SHARED ? "shared host memory (mlc_mem_alloc)"
                                                                       : "host memory");
        return 0;
    }
    mlc_gpu_kind_t gk = MLC_GPU_CUDA;
    const char *memory = NULL;
    int code = runtime_of_memory_kind(&gk, &memory);
    if (code) return code;
    /* auto: CUDA, else HIP, as the library decides */
    mlc_status_t st = mlc_gpurt_get(gk, &m->rt);
    if (st != MLC_SUCCESS && strcmp(memory, "auto") == 0 && mlc_gpurt_get(MLC_GPU_HIP, &m->rt) == MLC_SUCCESS)
        st = MLC_SUCCESS;
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: --memory device: %s\n", mlc_gpurt_why(gk));
        return MLC_BENCH_EXIT_ERROR;
    }
    st = mlc_gpurt_device_count(m->rt, &m->ndev);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlcomm-bench: --memory device: %s\n", mlc_last_error());
        return MLC_BENCH_EXIT_ERROR;
    }
    snprintf(m->text, sizeof m->text, "device memory (%s, MLC_MEMORY=%s)", m->rt->name, memory);
    return 0;
}

/* "cudaMalloc(4096 bytes) failed: cudaErrorMemoryAllocation (2): out of memory" */
static mlc_status_t rt_error(const mlc_bench_mem_t *m, int e, const char *call, size_t bytes)
{
    char buf[256];
    m->rt->get_last_error(); /* clear the runtime's record of it */
    return mlc_error(MLC_ERR_BACKEND, "%s%s(%zu bytes) failed: %s", m->rt->prefix, call, bytes,
                     mlc_gpurt_strerror(m->rt, e, buf, sizeof buf));
}

mlc_status_t mlc_bench_mem_use_device(const mlc_bench_mem_t *m, int index)
{
    if (m->kind != MLC_BENCH_MEM_DEVICE) return MLC_SUCCESS;
    int device = (index < 0 ? 0 : index) % m->ndev;
    int e = m->rt->set_device(device);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        m->rt->get_last_error();
        return mlc_error(MLC_ERR_BACKEND, "%sSetDevice(%d) of %d devices failed: %s", m->rt->prefix,
                         device, m->ndev, mlc_gpurt_strerror(m->rt, e, buf, sizeof buf));
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_bench_mem_alloc(const mlc_bench_mem_t *m, size_t bytes, void **p)
{
    void *q = NULL;
    if (m->kind == MLC_BENCH_MEM_SHARED) {
        mlc_status_t st = mlc_mem_alloc(bytes, &q);
        if (st != MLC_SUCCESS) return st;
    } else if (m->kind == MLC_BENCH_MEM_HOST) {
        if (posix_memalign(&q, 4096, bytes) != 0)
            return mlc_error(MLC_ERR_NO_MEMORY, "posix_memalign(%zu bytes) failed", bytes);
    } else {
        int e = m->rt->malloc(&q, bytes);
        if (e != MLC_GPU_SUCCESS) return rt_error(m, e, "Malloc", bytes);
    }
    *p = q;
    return MLC_SUCCESS;
}

void mlc_bench_mem_free(const mlc_bench_mem_t *m, void *p)
{
    if (!p) return;
    if (m->kind == MLC_BENCH_MEM_SHARED) mlc_mem_free(p);
    else if (m->kind == MLC_BENCH_MEM_HOST) free(p);
    else if (m->rt->free(p) != MLC_GPU_SUCCESS) m->rt->get_last_error();
}

/* One copy on the legacy default stream, waited for. */
static mlc_status_t copy(const mlc_bench_mem_t *m, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return MLC_SUCCESS;
    if (m->kind != MLC_BENCH_MEM_DEVICE) {
        memmove(dst, src, bytes);
        return MLC_SUCCESS;
    }
    int e = m->rt->memcpy_async(dst, src, bytes, MLC_GPU_MEMCPY_DEFAULT, NULL);
    if (e != MLC_GPU_SUCCESS) return rt_error(m, e, "MemcpyAsync", bytes);
    e = m->rt->stream_synchronize(NULL);
    if (e != MLC_GPU_SUCCESS) return rt_error(m, e, "StreamSynchronize after a copy", bytes);
    return MLC_SUCCESS;
}

mlc_status_t mlc_bench_mem_upload(const mlc_bench_mem_t *m, void *dst, const void *src, size_t bytes)
{
    return copy(m, dst, src, bytes);
}

mlc_status_t mlc_bench_mem_download(const mlc_bench_mem_t *m, void *dst, const void *src, size_t bytes)
{
    return copy(m, dst, src, bytes);
}
