/* SPDX-License-Identifier: BSD-3-Clause */
/* Views in GPU memory: classification and strided copies through the runtime (devcopy.h). */
#include "devcopy.h"
#include <string.h>
#include "base/error.h"
#include "core/backend.h"
#include "core/comm.h"
#include "devrt/gpuwait.h"

bool mlc_xdev_native(mlc_comm_t *comm) { return comm && comm->be->device_native; }

const mlc_gpurt_t *mlc_xdev_runtime(mlc_comm_t *comm)
{
    if (!comm) return NULL;
    int mem = comm->cfg.memory;
    /* nccl runs over the CUDA runtime, rccl over HIP's. */
    if (mlc_xdev_native(comm))
        return mlc_gpurt_peek(strcmp(comm->be->name, "rccl") == 0 ? MLC_GPU_HIP : MLC_GPU_CUDA);
    if (mem == MLC_MEMORY_AUTO) {
        const mlc_gpurt_t *rt = mlc_gpurt_peek(MLC_GPU_CUDA);
        return rt ? rt : mlc_gpurt_peek(MLC_GPU_HIP);
    }
    if (mem == MLC_MEMORY_CUDA) return mlc_gpurt_peek(MLC_GPU_CUDA);
    if (mem == MLC_MEMORY_ROCM) return mlc_gpurt_peek(MLC_GPU_HIP);
    return NULL;
}

mlc_status_t mlc_xdev_classify(const mlc_gpurt_t *rt, const void *ptr, bool *device, const char *fn,
                               const char *what)
{
    *device = false;
    if (!rt || !ptr) return MLC_SUCCESS;
    mlc_gpu_mem_t mem;
    int dev;
    mlc_status_t st = mlc_gpurt_pointer_kind(rt, ptr, &mem, &dev);
    if (st) return mlc_error(st, "%s: %s: %s", fn, what, mlc_last_error());
    *device = mem == MLC_GPU_MEM_DEVICE;
    if (*device && !rt->memcpy_2d_async)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s: %s %p is %s device memory, but this %s runtime lacks %sMemcpy2DAsync, "
                         "which the exchange copies device views with",
                         fn, what, ptr, rt->name, rt->name, rt->prefix);
    return MLC_SUCCESS;
}

static mlc_status_t copy_failed(const mlc_gpurt_t *rt, int e, const char *call)
{
    char buf[256];
    rt->get_last_error();
    return mlc_error(MLC_ERR_BACKEND, "exchange: %s%s: %s", rt->prefix, call,
                     mlc_gpurt_strerror(rt, e, buf, sizeof buf));
}

mlc_status_t mlc_xdev_copy(const mlc_gpurt_t *rt, void *stream, const mlc_copy_t *c,
                           const void *src_base, void *dst_base)
{
    const unsigned char *src = (const unsigned char *)src_base + c->src_offset;
    unsigned char *dst = (unsigned char *)dst_base + c->dst_offset;
    if (c->bytes == 0) return MLC_SUCCESS;
    if (c->ndim == 1) {
        int e = rt->memcpy_async(dst, src, c->run_bytes, MLC_GPU_MEMCPY_DEFAULT, stream);
        return e ? copy_failed(rt, e, "MemcpyAsync") : MLC_SUCCESS;
    }
    /* The two innermost merged axes are one 2-D copy; an odometer walks the
     * axes outside them (merged descriptors rarely have any). */
    const int inner = c->ndim - 2;
    int64_t idx[MLC_EXCHANGE_MAX_DIMS] = {0};
    do {
        int e = rt->memcpy_2d_async(dst, (size_t)c->dst_stride[inner], src,
                                    (size_t)c->src_stride[inner], c->run_bytes,
                                    (size_t)c->shape[inner], MLC_GPU_MEMCPY_DEFAULT, stream);
        if (e) return copy_failed(rt, e, "Memcpy2DAsync");
    } while (mlc_copy_next_block(c, inner, idx, &src, &dst));
    return MLC_SUCCESS;
}

mlc_status_t mlc_xdev_stream_create(const mlc_gpurt_t *rt, void **stream)
{
    /* Flags 0: a blocking stream, ordered with the legacy default stream. */
    int e = rt->stream_create_with_flags(stream, 0);
    if (e) {
        *stream = NULL;
        return copy_failed(rt, e, "StreamCreateWithFlags");
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_xdev_sync(const mlc_comm_t *comm, const mlc_gpurt_t *rt, void *stream, const char *what)
{
    return mlc_gpu_stream_wait(rt, stream, comm->cfg.timeout_s, what);
}

void mlc_xdev_stream_destroy(const mlc_gpurt_t *rt, void *stream)
{
    if (rt && stream) rt->stream_destroy(stream);
}
