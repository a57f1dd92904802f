/* SPDX-License-Identifier: BSD-3-Clause */
/* dtype helpers and the local reduction kernels. */
#ifndef MLC_BASE_DTYPE_H
#define MLC_BASE_DTYPE_H
#include <stdbool.h>
#include "mlcomm.h"

static inline bool mlc_dtype_is_record(mlc_dtype_t d) { return (d & 0x10000) != 0; }
/* (mlcomm.h) Its answer depends on dtype alone: a caller asking twice makes one call. */
size_t mlc_dtype_size(mlc_dtype_t dtype) __attribute__((const));

/* Is `op` a built-in or a live user op? */
bool mlc_op_valid(mlc_op_t op);
/* Is (dtype, op) a legal combination? Sets last error when not. */
mlc_status_t mlc_op_check(mlc_dtype_t dtype, mlc_op_t op);
/* Commutative? Built-ins are. */
bool mlc_op_commutative(mlc_op_t op);
/* What ranks compare for user op `op` in a call's signature: one value per
 * function and commutativity, the same in every rank of one program
 * (op.c); ranks that share a process (threads) and each created its own op
 * of one function agree. -2 when op is not a live user op. */
int mlc_op_signature_id(mlc_op_t op);

/*
 * inout[i] = in[i] (op) inout[i]. No argument checking (core validated).
 * MLC_AVG reduces as MLC_SUM. fp16/bf16 computed in fp32, rounded once.
 */
void mlc_reduce_apply(const void *in, void *inout, size_t count, mlc_dtype_t dtype, mlc_op_t op);
/* out[i] = a[i] (op) b[i], a is the lower rank's data. out may alias a or b. */
void mlc_reduce_apply3(const void *a, const void *b, void *out, size_t count, mlc_dtype_t dtype,
                       mlc_op_t op);
/* The avg finish: buf[i] /= p (integers truncate toward zero). */
void mlc_reduce_divide(void *buf, size_t count, mlc_dtype_t dtype, int p);

/* fp16 / bf16 <-> fp32 conversions (round to nearest even). */
float mlc_half_to_float(uint16_t h);
uint16_t mlc_float_to_half(float f);
float mlc_bf16_to_float(uint16_t h);
uint16_t mlc_float_to_bf16(float f);
#endif
