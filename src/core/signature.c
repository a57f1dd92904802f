/* SPDX-License-Identifier: BSD-3-Clause */
/* Call signatures (signature.h): building, describing, comparing. */
#include "signature.h"
#include <stdio.h>
#include <string.h>
#include "base/dtype.h"

static uint64_t hash_counts(const size_t *counts, int p, uint64_t *total)
{
    uint64_t h = 1469598103934665603ull, t = 0; /* FNV-1a over the counts */
    for (int i = 0; i < p; i++) {
        uint64_t v = counts[i];
        t += v;
        for (int b = 0; b < 8; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    *total = t;
    return h | 1; /* never 0: 0 means "no array" */
}

void mlc_sig_of(const mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a, uint64_t seq, mlc_sig_t *s)
{
    s->call = comm->seq_base + seq;
    s->seq = seq;
    s->count = a->count;
    s->vhash = 0;
    s->mine = a->count;
    s->root = MLC_SIG_NONE;
    s->op = MLC_SIG_NONE;
    s->coll = (uint32_t)coll | (uint32_t)comm->comm_call << MLC_SIG_CALL_SHIFT;
    s->dtype = (int32_t)a->dtype;
    switch (coll) {
    case MLC_COLL_REDUCE:
        s->root = a->root;
        /* fall through */
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_REDUCE_SCATTER:
        s->op = a->op >= 0 && a->op < MLC_OP_BUILTIN_COUNT ? (int32_t)a->op : mlc_op_signature_id(a->op);
        break;
    case MLC_COLL_BROADCAST:
    case MLC_COLL_GATHER:
    case MLC_COLL_SCATTER: s->root = a->root; break;
    case MLC_COLL_ALLGATHERV: s->vhash = hash_counts(a->counts, comm->size, &s->count); break;
    case MLC_COLL_GATHERV:
    case MLC_COLL_SCATTERV:
        s->root = a->root;
        s->count = 0; /* each rank's own count is checked against the root's array by message size */
        break;
    case MLC_COLL_ALLTOALLV: s->count = s->mine = 0; break;
    case MLC_COLL_BARRIER: s->count = s->mine = 0; s->dtype = 0; break;
    default: break;
    }
}

static void describe_coll(const mlc_sig_t *s, char *buf, size_t len)
{
    mlc_coll_t coll = (mlc_coll_t)(s->coll & MLC_SIG_COLL_MASK);
    const char *name = mlc_coll_name(coll);
    if (coll == MLC_COLL_BARRIER) {
        snprintf(buf, len, "%s()", name);
        return;
    }
    char extra[64] = "";
    size_t o = 0;
    if (s->op == MLC_SIG_USER_OP)
        o += (size_t)snprintf(extra + o, sizeof extra - o, ", user op");
    else if (s->op >= MLC_OP_BUILTIN_COUNT)
        o += (size_t)snprintf(extra + o, sizeof extra - o, ", user op %x", (unsigned)s->op);
    else if (s->op >= 0)
        o += (size_t)snprintf(extra + o, sizeof extra - o, ", %s", mlc_op_name(s->op));
    if (s->root >= 0) snprintf(extra + o, sizeof extra - o, ", root=%d", (int)s->root);
    char dt_text[32];
    const char *dt = mlc_dtype_name((mlc_dtype_t)s->dtype);
    if (mlc_dtype_is_record((mlc_dtype_t)s->dtype)) {
        snprintf(dt_text, sizeof dt_text, "record(%zu)", mlc_dtype_size((mlc_dtype_t)s->dtype));
        dt = dt_text;
    } else if (!dt) {
        snprintf(dt_text, sizeof dt_text, "dtype %d", (int)s->dtype);
        dt = dt_text;
    }
    switch (coll) {
    case MLC_COLL_ALLGATHERV:
        snprintf(buf, len, "%s(recvcounts total=%llu hash=%08llx, %s%s)", name, (unsigned long long)s->count,
                 (unsigned long long)(s->vhash & 0xffffffffu), dt, extra);
        break;
    case MLC_COLL_GATHERV:
        snprintf(buf, len, "%s(sendcount=%llu, %s%s)", name, (unsigned long long)s->mine, dt, extra);
        break;
    case MLC_COLL_SCATTERV:
        snprintf(buf, len, "%s(recvcount=%llu, %s%s)", name, (unsigned long long)s->mine, dt, extra);
        break;
    case MLC_COLL_ALLTOALLV: snprintf(buf, len, "%s(%s%s)", name, dt, extra); break;
    default:
        snprintf(buf, len, "%s(count=%llu, %s%s)", name, (unsigned long long)s->count, dt, extra);
        break;
    }
}

void mlc_sig_describe(const mlc_sig_t *s, char *buf, size_t len)
{
    describe_coll(s, buf, len);
    int call = (int)(s->coll >> MLC_SIG_CALL_SHIFT);
    size_t used = strlen(buf);
    if (call && used < len) snprintf(buf + used, len - used, " inside %s", mlc_comm_call_name(call));
}

void mlc_sig_mismatch(const mlc_sig_t *mine, int my_rank, const mlc_sig_t *peer, int peer_rank, char *buf,
                      size_t len)
{
    char a[192], b[192];
    mlc_sig_describe(mine, a, sizeof a);
    mlc_sig_describe(peer, b, sizeof b);
    if (mine->call == peer->call)
        snprintf(buf, len, "rank %d: %s vs rank %d: %s, call #%llu", my_rank, a, peer_rank, b,
                 (unsigned long long)mine->seq);
    else
        snprintf(buf, len, "rank %d: %s (call #%llu) vs rank %d: %s (call #%llu)", my_rank, a,
                 (unsigned long long)mine->seq, peer_rank, b, (unsigned long long)peer->seq);
}
