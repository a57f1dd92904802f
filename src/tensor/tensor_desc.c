/* SPDX-License-Identifier: BSD-3-Clause */
/* The tensor descriptor: construction, sizes, checks and formatting. */
#include <stdio.h>
#include <string.h>
#include "core/comm.h"
#include "base/error.h"
#include "tensor_internal.h"

const char *mlc_top_name(int kind)
{
    static const char *const names[] = {
#define MLC_X_NAME(id, name) name,
        MLC_TOP_LIST(MLC_X_NAME)
#undef MLC_X_NAME
    };
    if (kind < 0 || kind >= MLC_TOP_COUNT) return "mlc_tensor_?";
    return names[kind];
}

/* Product with overflow detection: false if it does not fit size_t. */
static bool shape_numel(int ndim, const size_t *shape, size_t *out)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > SIZE_MAX / shape[i]) return false;
        n *= shape[i];
    }
    *out = n;
    return true;
}

size_t mlc_tshape_prod(const size_t *shape, int lo, int hi)
{
    size_t n = 1;
    for (int i = lo; i < hi; i++) n *= shape[i];
    return n;
}

MLC_API mlc_status_t mlc_tensor_init(mlc_tensor_t *t, void *data, mlc_dtype_t dtype, int ndim,
                                     const size_t *shape)
{
    mlc_error_clear();
    if (!t) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_init: t is NULL");
    if (ndim < 0 || ndim > MLC_TENSOR_MAX_DIMS)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_init: ndim %d is outside 0..%d", ndim,
                         MLC_TENSOR_MAX_DIMS);
    if (ndim > 0 && !shape)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_init: shape is NULL with ndim %d", ndim);
    if (mlc_dtype_size(dtype) == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_init: unknown dtype %d", (int)dtype);
    size_t numel;
    if (!shape_numel(ndim, shape, &numel))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_init: element count overflows size_t");
    mlc_tensor_t tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.data = data;
    tmp.dtype = dtype;
    tmp.ndim = ndim;
    for (int i = 0; i < ndim; i++) tmp.shape[i] = shape[i];
    tmp.device = MLC_DEVICE_HOST;
    *t = tmp;
    return MLC_SUCCESS;
}

MLC_API size_t mlc_tensor_numel(const mlc_tensor_t *t)
{
    size_t n;
    if (!t || t->ndim < 0 || t->ndim > MLC_TENSOR_MAX_DIMS) return 0;
    return shape_numel(t->ndim, t->shape, &n) ? n : 0;
}

MLC_API size_t mlc_tensor_bytes(const mlc_tensor_t *t)
{
    size_t n = mlc_tensor_numel(t), es = t ? mlc_dtype_size(t->dtype) : 0;
    if (es != 0 && n > SIZE_MAX / es) return 0;
    return n * es;
}

MLC_API mlc_status_t mlc_tensor_split(size_t n, int size, int rank, size_t *offset, size_t *length)
{
    mlc_error_clear();
    if (size < 1) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_split: size %d < 1", size);
    if (rank < 0 || rank >= size)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_split: rank %d outside 0..%d", rank,
                         size - 1);
    if (!offset || !length)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_tensor_split: %s is NULL",
                         !offset ? "offset" : "length");
    size_t base = n / (size_t)size, extra = n % (size_t)size, r = (size_t)rank;
    *length = base + (r < extra ? 1 : 0);
    *offset = r * base + (r < extra ? r : extra);
    return MLC_SUCCESS;
}

mlc_status_t mlc_tdesc_check(const mlc_tensor_t *t, const char *fn, const char *what)
{
    if (!t) return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s is NULL", fn, what);
    if (t->ndim < 0 || t->ndim > MLC_TENSOR_MAX_DIMS)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s->ndim %d is outside 0..%d", fn, what,
                         t->ndim, MLC_TENSOR_MAX_DIMS);
    size_t es = mlc_dtype_size(t->dtype);
    if (es == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s->dtype %d is not a known dtype", fn, what,
                         (int)t->dtype);
    size_t numel;
    if (!shape_numel(t->ndim, t->shape, &numel) || numel > SIZE_MAX / es)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s has more bytes than size_t holds", fn, what);
    if (numel > 0 && !t->data)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s->data is NULL with %zu elements", fn, what,
                         numel);
    if (t->device < MLC_DEVICE_HOST)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s: %s->device %d is neither MLC_DEVICE_HOST (-1) nor a GPU ordinal", fn,
                         what, t->device);
    return MLC_SUCCESS;
}

mlc_status_t mlc_tdim_normalize(int dim, int ndim, const char *fn, int *out)
{
    int d = dim < 0 ? dim + ndim : dim;
    if (ndim == 0 || d < 0 || d >= ndim)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-dimensional tensor",
                         fn, dim, ndim);
    *out = d;
    return MLC_SUCCESS;
}

mlc_status_t mlc_tdevice_check(const mlc_tensor_t *t, const mlc_comm_t *comm, const char *fn,
                               const char *what)
{
    static const char *const memory_names[] = {
#define MLC_X_NAME(name, str) str,
        MLC_MEMORY_LIST(MLC_X_NAME)
#undef MLC_X_NAME
    };
    int mem = comm->cfg.memory;
    const char *mem_name = mem >= 0 && mem < MLC_MEMORY_COUNT ? memory_names[mem] : "?";
    if (mem == MLC_MEMORY_CUDA || mem == MLC_MEMORY_ROCM)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s: the communicator's memory kind is %s; the tensor layer exchanges "
                         "shape metadata in host memory, so create the communicator with memory "
                         "\"auto\"",
                         fn, mem_name);
    if (t->device != MLC_DEVICE_HOST && mem == MLC_MEMORY_HOST)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "%s: %s is on GPU %d but the communicator's memory kind is host", fn, what,
                         t->device);
    return MLC_SUCCESS;
}

void mlc_tshape_format(char *buf, size_t len, mlc_dtype_t dtype, int ndim, const uint64_t *shape)
{
    if (len == 0) return;
    const char *dn = mlc_dtype_name(dtype);
    size_t used = (size_t)snprintf(buf, len, "%s[", dn ? dn : "?");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

bool mlc_tbytes_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    if (na == 0 || nb == 0 || !a || !b) return false;
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + nb && pb < pa + na;
}
