/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MLC_CHECK: call signatures compared by a small extra collective, for
 * backends whose transport does not carry them (signature.h). Every rank
 * sees every signature, so every rank reaches the same verdict and fails
 * the call (and the communicator) with the same message.
 */
#include <stdio.h>
#include <stdlib.h>
#include "backend.h"
#include "base/error.h"
#include "signature.h"

/* First pair whose shared fields differ, as rank 0 against rank j. */
static int first_differing(const mlc_sig_t *all, int p)
{
    for (int j = 1; j < p; j++)
        if (!mlc_sig_same(&all[0], &all[j])) return j;
    return -1;
}

/* This rank's own view of the per-pair counts: the first rank i whose count
 * differs from what this rank declares for it, or -1. */
static int pair_mismatch(const mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a, const mlc_sig_t *all,
                         const uint64_t *to_me)
{
    int p = comm->size, me = comm->rank;
    for (int i = 0; i < p; i++) {
        switch (coll) {
        case MLC_COLL_GATHERV: /* the root's recvcounts[i] against rank i's sendcount */
            if (me == a->root && a->counts[i] != all[i].mine) return i;
            break;
        case MLC_COLL_SCATTERV: /* the root's sendcounts[i] against rank i's recvcount */
            if (me == a->root && a->counts[i] != all[i].mine) return i;
            break;
        case MLC_COLL_ALLTOALLV: /* what rank i sends me against what I expect from it */
            if (to_me[i] != a->counts2[i]) return i;
            break;
        default: return -1;
        }
    }
    return -1;
}

static mlc_status_t verdict(mlc_comm_t *comm, const char *msg)
{
    mlc_comm_fail(comm, MLC_ERR_MISMATCH, "%s", msg);
    return mlc_error(MLC_ERR_MISMATCH, "%s", msg);
}

mlc_status_t mlc_check_call(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a)
{
    int p = comm->size;
    uint64_t seq = comm->coll_seq;
    mlc_sig_t mine, *all = malloc(sizeof(mlc_sig_t) * (size_t)p);
    uint64_t *sent = NULL, *to_me = NULL;
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "MLC_CHECK: out of memory for %d signatures", p);
    mlc_sig_of(comm, coll, a, seq, &mine);
    char msg[384];
    mlc_status_t st;
    comm->internal_depth++; /* the check's own collectives are not checked, profiled or counted */
    st = mlc_allgather(&mine, all, sizeof mine, MLC_UINT8, comm, NULL);
    if (st != MLC_SUCCESS) goto out;
    int j = first_differing(all, p);
    if (j >= 0) {
        mlc_sig_mismatch(&all[0], 0, &all[j], j, msg, sizeof msg);
        st = verdict(comm, msg);
        goto out;
    }
    if (coll != MLC_COLL_GATHERV && coll != MLC_COLL_SCATTERV && coll != MLC_COLL_ALLTOALLV) goto out;
    if (coll == MLC_COLL_ALLTOALLV) {
        sent = malloc(sizeof(uint64_t) * (size_t)p);
        to_me = malloc(sizeof(uint64_t) * (size_t)p);
        if (!sent || !to_me) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "MLC_CHECK: out of memory for %d counts", p);
            goto out;
        }
        for (int i = 0; i < p; i++) sent[i] = a->counts[i];
        st = mlc_alltoall(sent, to_me, 1, MLC_UINT64, comm, NULL);
        if (st != MLC_SUCCESS) goto out;
    }
    /* Only some ranks can see a per-pair difference: agree on the first one seen. */
    int i = pair_mismatch(comm, coll, a, all, to_me);
    uint64_t code = i < 0 ? UINT64_MAX : (uint64_t)comm->rank * (uint64_t)p + (uint64_t)i, first = 0;
    st = mlc_allreduce(&code, &first, 1, MLC_UINT64, MLC_MIN, comm, NULL);
    if (st != MLC_SUCCESS || first == UINT64_MAX) goto out;
    int seer = (int)(first / (uint64_t)p), other = (int)(first % (uint64_t)p);
    char desc[128];
    mlc_sig_describe(&all[other], desc, sizeof desc);
    snprintf(msg, sizeof msg, "rank %d: %s expects another count from rank %d than rank %d declares: %s, call #%llu",
             seer, mlc_coll_name(coll), other, other, desc, (unsigned long long)seq);
    st = verdict(comm, msg);
out:
    if (st != MLC_SUCCESS && st != MLC_ERR_MISMATCH && st != MLC_ERR_NO_MEMORY) {
        /* The comparison's own collective failed (a timeout, an abort, a
         * death): name the user's call, not that collective (mlc_error
         * formats before it overwrites the message it is given). */
        mlc_error(st, "%s #%llu, comparing its arguments with the peers' (MLC_CHECK): %s", mlc_coll_name(coll),
                  (unsigned long long)seq, mlc_last_error());
    }
    comm->internal_depth--;
    comm->seq_base += comm->coll_seq - seq; /* call numbers never repeat (signature.h) */
    comm->coll_seq = seq; /* the user's call keeps the number it would have had */
    free(all);
    free(sent);
    free(to_me);
    return st;
}
