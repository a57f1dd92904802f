/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The test double's 2-D copy (cudaMemcpy2DAsync / hipMemcpy2DAsync),
 * compiled into every build of fake_cudart. It is written on the double's
 * public behaviour only: one cudaMemcpyAsync per row on the same stream, so
 * it inherits its checks (kind, guarded device memory, stream order).
 *
 * fake_cuda_memcpy2d_calls counts the calls, so a test can tell that a path
 * really copied through the runtime.
 */
#include <stddef.h>
#include "fake_names.h"
#ifdef FAKE_HIP
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#endif

#define API __attribute__((visibility("default")))

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream);

API int fake_cuda_memcpy2d_calls;

API int cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t height, int kind, void *stream)
{
    enum { E_INVALID_VALUE = 1 };
    /* As CUDA: a row may not be wider than either pitch. */
    if (width > dpitch || width > spitch) return E_INVALID_VALUE;
    __atomic_add_fetch(&fake_cuda_memcpy2d_calls, 1, __ATOMIC_RELAXED);
    for (size_t r = 0; r < height; r++) {
        int e = cudaMemcpyAsync((char *)dst + r * dpitch, (const char *)src + r * spitch, width,
                                kind, stream);
        if (e) return e;
    }
    return 0;
}
