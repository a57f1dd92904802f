/* SPDX-License-Identifier: BSD-3-Clause */
/* Typed element access for the tensor tests: every dtype through double. */
#ifndef MLC_TEST_TVALUES_H
#define MLC_TEST_TVALUES_H
#include <stddef.h>
#include "mlcomm.h"

/* buf[i] = v converted to dtype (v is a small integer, exact in every dtype). */
void tv_set(mlc_dtype_t dtype, void *buf, size_t i, double v);
/* buf[i] as a double. */
double tv_get(mlc_dtype_t dtype, const void *buf, size_t i);
#endif
