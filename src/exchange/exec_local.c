/* SPDX-License-Identifier: BSD-3-Clause */
/* Local copies (provide -> need inside one rank), shared by every executor. */
#include "executor.h"

int mlc_xexec_same_memory(const mlc_copy_t *c, const void *src_base, const void *dst_base)
{
    const unsigned char *src = src_base, *dst = dst_base;
    if (src + c->src_offset != dst + c->dst_offset) return 0;
    for (int d = 0; d < c->ndim; d++)
        if (c->shape[d] > 1 && c->src_stride[d] != c->dst_stride[d]) return 0;
    return 1;
}

void mlc_xexec_local_copies(const mlc_xplan_t *plan, const mlc_xbind_t *b)
{
    for (size_t i = 0; i < plan->nlocals; i++) {
        const mlc_xlocal_t *l = &plan->locals[i];
        const unsigned char *src = b->provs[l->src_id].data;
        unsigned char *dst = b->needs[l->dst_id].data;
        /* A need that is its own provider's cells (same memory) has nothing to copy. */
        if (mlc_xexec_same_memory(&l->copy, src, dst)) continue;
        mlc_copy_run(&l->copy, src, dst);
    }
}
