/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The selector: the lowest predicted time among the algorithms that can run
 * a description, ties going to the earlier one in the list (build.h), so
 * every rank with the same model picks the same algorithm.
 *
 * Default model, for a shared-memory host until measured values arrive:
 * alpha 0.5 us (post, match and complete one message through shared
 * memory), beta 1/8 GB/s (a copy through a shared segment moves about
 * 8 GB/s on one core), gamma 1/10 GB/s (one reduction pass over in-cache
 * float data, about 10 GB/s).
 */
#include "select.h"
#include "build.h"

const mlc_cost_model_t mlc_cost_model_default = {0.5e-6, 1.0 / 8e9, 1.0 / 10e9};

double mlc_algo_predict(const mlc_algo_t *algo, const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return algo->cost(d, m ? m : &mlc_cost_model_default);
}

const mlc_algo_t *mlc_algo_select(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    const mlc_algo_t *best = NULL;
    double best_t = 0;
    for (const mlc_algo_t *a = mlc_algos; a->name; a++) {
        if (a->coll != d->coll || (!d->commutative && !a->order_preserving)) continue;
        double t = mlc_algo_predict(a, d, m);
        /* Equal costs up to rounding keep the earlier algorithm, so the choice
         * does not flip back and forth between formulas that agree. */
        if (!best || t < best_t * (1.0 - 1e-9)) best = a, best_t = t;
    }
    return best;
}
