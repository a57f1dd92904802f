/* SPDX-License-Identifier: BSD-3-Clause */
/* Local copies (provide -> need inside one rank), shared by every executor. */
#include "executor.h"

/* Do both sides of a copy name the very same memory? */
static int same_memory(const mlc_copy_t *c, const unsigned char *src, const unsigned char *dst)
{
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
        if (same_memory(&l->copy, src, dst)) continue;
        mlc_copy_run(&l->copy, src, dst);
    }
}
