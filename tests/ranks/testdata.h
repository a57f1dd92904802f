/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test values for reductions: every rank's contribution and the expected
 * result are computed locally, exactly.
 *
 * Values are chosen per (dtype, op) so that every partial result is exactly
 * representable in the dtype (small integers and halves in floats, fp16 and
 * bf16 included; sums that divide evenly for float MLC_AVG), so the result
 * does not depend on the reduction order and compares bitwise. Integer
 * MIN/MAX use the full range of the type (unsigned values above the signed
 * maximum catch signed comparisons); integer MLC_AVG truncates toward zero.
 *
 * Element i of rank r's contribution depends only on (dtype, op, p, r, i,
 * seed), so any rank can compute any other rank's contribution, and
 * reduce_scatter can use global element indices.
 */
#ifndef MLC_TEST_TESTDATA_H
#define MLC_TEST_TESTDATA_H
#include <stddef.h>
#include <stdint.h>
#include "mlcomm.h"

/* How a dtype's elements compare and overflow: signed, unsigned or float. */
typedef enum { LANE_SIGNED, LANE_UNSIGNED, LANE_FLOAT } lane_t;
lane_t lane_of(mlc_dtype_t dt);

/* One value in the arithmetic lane of its dtype. */
typedef struct mlc_tv {
    int64_t i;  /* signed integers */
    uint64_t u; /* unsigned integers */
    double f;   /* floating point */
} mlc_tv_t;

/* Store v as element i of buf (in dt's representation). */
void mlc_tv_store(mlc_dtype_t dt, void *buf, size_t i, mlc_tv_t v);

/* Fill count elements starting at global index first: rank r's contribution,
 * or the exact result of reducing all p contributions with op. */
void mlc_tv_fill(mlc_dtype_t dt, mlc_op_t op, int p, int r, uint32_t seed, void *buf,
                 size_t first, size_t count);
void mlc_tv_fill_expected(mlc_dtype_t dt, mlc_op_t op, int p, uint32_t seed, void *buf,
                          size_t first, size_t count);

/* IEEE half and bfloat16 encodings (round to nearest even). */
uint16_t mlc_tv_to_half(float f);
uint16_t mlc_tv_to_bf16(float f);
#endif
