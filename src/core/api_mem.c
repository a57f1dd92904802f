/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared host memory as public API (mlcomm.h, mlc_mem_alloc): base/shared_mem.h. */
#include "base/error.h"
#include "base/shared_mem.h"

MLC_API mlc_status_t mlc_mem_alloc(size_t bytes, void **ptr)
{
    mlc_error_clear();
    if (!ptr) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mem_alloc: ptr is NULL");
    *ptr = NULL;
    return mlc_shmem_alloc(bytes, ptr);
}

MLC_API mlc_status_t mlc_mem_free(void *ptr)
{
    mlc_error_clear();
    return ptr ? mlc_shmem_free(ptr) : MLC_SUCCESS;
}
