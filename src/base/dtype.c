/* SPDX-License-Identifier: BSD-3-Clause */
/* Data types: sizes, names, parsing (built-ins from MLC_DTYPE_LIST, plus records). */
#include "dtype.h"

#include <strings.h>

#include "error.h"

#define MLC_RECORD_FLAG 0x10000
#define MLC_RECORD_MAX 0xFFFF

/* Record size in bytes, or 0 when d is not a well-formed record. */
static size_t mlc_record_size(mlc_dtype_t d)
{
    if ((d & ~(int32_t)(MLC_RECORD_FLAG | MLC_RECORD_MAX)) != 0) return 0;
    return (size_t)(d & MLC_RECORD_MAX);
}

size_t mlc_dtype_size(mlc_dtype_t dtype)
{
    if (mlc_dtype_is_record(dtype)) return mlc_record_size(dtype);
    switch (dtype) {
#define MLC_X_CASE(name, str, size) \
    case name:                      \
        return size;
        MLC_DTYPE_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    default:
        return 0;
    }
}

const char *mlc_dtype_name(mlc_dtype_t dtype)
{
    if (mlc_dtype_is_record(dtype)) return mlc_record_size(dtype) ? "record" : NULL;
    switch (dtype) {
#define MLC_X_CASE(name, str, size) \
    case name:                      \
        return str;
        MLC_DTYPE_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    default:
        return NULL;
    }
}

/* Spellings accepted besides the short names of MLC_DTYPE_LIST. */
static const struct {
    const char *alias;
    mlc_dtype_t dtype;
} mlc_dtype_aliases[] = {
    {"f32", MLC_FLOAT32},  {"fp32", MLC_FLOAT32},  {"float", MLC_FLOAT32},
    {"f16", MLC_FLOAT16},  {"fp16", MLC_FLOAT16},  {"half", MLC_FLOAT16},
    {"bf16", MLC_BFLOAT16},
    {"f64", MLC_FLOAT64},  {"fp64", MLC_FLOAT64},  {"double", MLC_FLOAT64},
    {"int", MLC_INT32},
};

mlc_status_t mlc_dtype_from_name(const char *name, mlc_dtype_t *dtype)
{
    mlc_error_clear();
    if (name == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_dtype_from_name: name is NULL");
    if (dtype == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_dtype_from_name: dtype is NULL");
    static const struct {
        const char *name;
        mlc_dtype_t dtype;
    } canonical[] = {
#define MLC_X_ROW(id, str, size) {str, id},
        MLC_DTYPE_LIST(MLC_X_ROW)
#undef MLC_X_ROW
    };
    for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++) {
        if (strcasecmp(name, canonical[i].name) == 0) {
            *dtype = canonical[i].dtype;
            return MLC_SUCCESS;
        }
    }
    for (size_t i = 0; i < sizeof mlc_dtype_aliases / sizeof mlc_dtype_aliases[0]; i++) {
        if (strcasecmp(name, mlc_dtype_aliases[i].alias) == 0) {
            *dtype = mlc_dtype_aliases[i].dtype;
            return MLC_SUCCESS;
        }
    }
#define MLC_X_NAME(id, str, size) str ", "
    return mlc_error(MLC_ERR_INVALID_ARG,
                     "mlc_dtype_from_name: unknown dtype name '%s' (expected one of " MLC_DTYPE_LIST(MLC_X_NAME)
                     "or an alias such as fp16, bf16, f32)",
                     name);
#undef MLC_X_NAME
}
