/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The algorithm selector: picks by collective, message size and rank count
 * from a cost model (alpha latency s, beta s/byte, gamma reduce s/byte).
 * Every rank must hold the same model so every rank picks the same algorithm.
 */
#ifndef MLC_ALGOS_SELECT_H
#define MLC_ALGOS_SELECT_H
#include <stdio.h>
#include "sched.h"

typedef struct mlc_cost_model {
    double alpha, beta, gamma;
} mlc_cost_model_t;

/* Defaults for a shared-memory host (used until measured values arrive):
 * alpha 0.5 us, beta 1/8 GB/s, gamma 1/10 GB/s (see select.c). */
extern const mlc_cost_model_t mlc_cost_model_default;

/* Predicted time of `algo` for d (bytes = count*esize per rank). */
double mlc_algo_predict(const mlc_algo_t *algo, const mlc_coll_desc_t *d, const mlc_cost_model_t *m);
/* Best algorithm for d under m among those that can run it (order-preserving
 * when the op is not commutative). Never NULL for a supported collective. */
const mlc_algo_t *mlc_algo_select(const mlc_coll_desc_t *d, const mlc_cost_model_t *m);
/*
 * For mlcomm-bench --model: a table of every algorithm's predicted time for
 * coll at p = 2, 4, ..., 16384 and a set of sizes, then, per p, the sizes at
 * which the selector's choice changes. m NULL = the default model.
 */
void mlc_algo_print_model(FILE *f, const mlc_cost_model_t *m, mlc_coll_t coll);
#endif
