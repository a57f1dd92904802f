/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Views in GPU memory. The host never touches a device pointer: packing,
 * unpacking and local copies that involve one go through the GPU runtime's
 * 2-D copies (cudaMemcpy2DAsync / hipMemcpy2DAsync), enqueued on the
 * executor's own stream; a copy descriptor of more than two merged axes is
 * a chain of 2-D copies, one per index of the outer axes.
 *
 * Pointers are classified only where device memory is possible: a
 * communicator of memory kind cuda / rocm / auto, or a device-native backend
 * (nccl, rccl), with the runtime already loaded (mlcomm loaded it for that
 * communicator). On a host communicator nothing is loaded or asked.
 */
#ifndef MLC_EXCHANGE_DEVCOPY_H
#define MLC_EXCHANGE_DEVCOPY_H
#include <stdbool.h>
#include "copy.h"
#include "devrt/gpurt.h"
#include "mlcomm.h"

/* The runtime that classifies comm's buffers, or NULL (host memory only). */
const mlc_gpurt_t *mlc_xdev_runtime(mlc_comm_t *comm);

/* Does comm's backend take device buffers itself (nccl, rccl)? Such a
 * backend has no tags and needs its point-to-point traffic grouped. */
bool mlc_xdev_native(mlc_comm_t *comm);

/*
 * Is `ptr` device memory? (Pinned host and managed memory count as host, as
 * the host can address them.) A device pointer the runtime cannot copy with
 * (no 2-D copy) is UNSUPPORTED; `fn` and `what` name the call and the view.
 */
mlc_status_t mlc_xdev_classify(const mlc_gpurt_t *rt, const void *ptr, bool *device, const char *fn,
                               const char *what);

/* Enqueue the copy `c` from src_base to dst_base (either may be device memory) on `stream`. */
mlc_status_t mlc_xdev_copy(const mlc_gpurt_t *rt, void *stream, const mlc_copy_t *c,
                           const void *src_base, void *dst_base);

/* The exchange's own stream (ordered with the legacy default stream, so data
 * the caller produced there is seen); wait for it (polled, failing with
 * MLC_ERR_TIMEOUT after comm's MLC_TIMEOUT); destroy it. */
mlc_status_t mlc_xdev_stream_create(const mlc_gpurt_t *rt, void **stream);
mlc_status_t mlc_xdev_sync(const mlc_comm_t *comm, const mlc_gpurt_t *rt, void *stream, const char *what);
void mlc_xdev_stream_destroy(const mlc_gpurt_t *rt, void *stream);
#endif
