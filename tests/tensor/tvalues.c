/* SPDX-License-Identifier: BSD-3-Clause */
#include "tvalues.h"
#include <stdint.h>
#include "base/dtype.h"

void tv_set(mlc_dtype_t dtype, void *buf, size_t i, double v)
{
    switch (dtype) {
    case MLC_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case MLC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case MLC_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case MLC_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case MLC_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case MLC_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case MLC_FLOAT16: ((uint16_t *)buf)[i] = mlc_float_to_half((float)v); break;
    case MLC_BFLOAT16: ((uint16_t *)buf)[i] = mlc_float_to_bf16((float)v); break;
    case MLC_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case MLC_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}

double tv_get(mlc_dtype_t dtype, const void *buf, size_t i)
{
    switch (dtype) {
    case MLC_INT8: return ((const int8_t *)buf)[i];
    case MLC_UINT8: return ((const uint8_t *)buf)[i];
    case MLC_INT32: return ((const int32_t *)buf)[i];
    case MLC_UINT32: return ((const uint32_t *)buf)[i];
    case MLC_INT64: return (double)((const int64_t *)buf)[i];
    case MLC_UINT64: return (double)((const uint64_t *)buf)[i];
    case MLC_FLOAT16: return mlc_half_to_float(((const uint16_t *)buf)[i]);
    case MLC_BFLOAT16: return mlc_bf16_to_float(((const uint16_t *)buf)[i]);
    case MLC_FLOAT32: return ((const float *)buf)[i];
    case MLC_FLOAT64: return ((const double *)buf)[i];
    default: return -1e300;
    }
}
