/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to src/core (op.c, reduce.c) and the unit tests. */
#ifndef MLC_BASE_REDUCE_IMPL_H
#define MLC_BASE_REDUCE_IMPL_H
#include <stdbool.h>
#include "mlcomm.h"

/* Capacity of the process-wide user-op table. */
#define MLC_OP_USER_MAX 1024

/* fn and ctx of a live user op; false when op is not one. */
bool mlc_op_user_lookup(mlc_op_t op, mlc_user_fn_t *fn, void **ctx);

/*
 * The reduction kernels exist once per instruction set ("base": the
 * compiler's baseline; "v3": x86-64-v3, AVX2 + F16C, where the compiler and
 * CPU allow). The best one the CPU runs is chosen at first use; results are
 * bitwise identical across sets. Tests use these to run every set.
 */
const char *mlc_reduce_isa(void);
/* Use the named set (NULL: the best available). false if absent or not runnable here. */
bool mlc_reduce_use_isa(const char *name);
#endif
