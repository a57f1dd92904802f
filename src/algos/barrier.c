/* SPDX-License-Identifier: BSD-3-Clause */
/* Dissemination barrier: in round k rank r signals r + 2^k and waits for r - 2^k. */
#include "build.h"

mlc_status_t mlc_build_barrier_dissemination(const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_bld_t b = mlc_bld_make(d, s);
    int p = d->size, r = d->rank, K = mlc_log2_ceil(p);
    /* One byte each way (zero-byte steps are skipped): sent from TMP[0], received into TMP[1]. */
    for (int k = 0; k < K; k++) {
        mlc_bld_send(&b, (uint32_t)k, (r + (1 << k)) % p, MLC_BUF_TMP, 0, 1);
        mlc_bld_recv(&b, (uint32_t)k, mlc_mod(r - (1 << k), p), MLC_BUF_TMP, 1, 1);
    }
    if (K > 0) mlc_bld_tmp(&b, 2);
    return b.st;
}

double mlc_cost_barrier_dissemination(const mlc_coll_desc_t *d, const mlc_cost_model_t *m)
{
    return mlc_lg(d->size) * m->alpha;
}
