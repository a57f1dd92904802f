/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Call signatures: what a rank declares for one collective (collective,
 * dtype, op, root, the counts every rank must share, sequence number), in 56
 * bytes. Ranks compare them before any byte moves between their buffers, so
 * mismatched calls fail with MLC_ERR_MISMATCH on every rank instead of
 * returning wrong data. The shared-memory engine carries them in its slots
 * and message headers; other backends exchange them when MLC_CHECK=1.
 */
#ifndef MLC_CORE_SIGNATURE_H
#define MLC_CORE_SIGNATURE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/copy_fields.h"
#include "comm.h"

#define MLC_SIG_NONE (-1)     /* root/op not part of this collective */
#define MLC_SIG_USER_OP (-2)  /* a user op not compared (mlc_op_signature_id: generated code) */
/* coll holds the collective in its low bits and, above them, the
 * communicator call (mlc_comm_call_t) that runs it: 0 for the user's own. */
#define MLC_SIG_CALL_SHIFT 16
#define MLC_SIG_COLL_MASK ((1u << MLC_SIG_CALL_SHIFT) - 1)

typedef struct mlc_sig {
    uint64_t call;  /* the communicator's collective number, never reset (init's own calls included) */
    uint64_t seq;   /* the sequence number users see ("call #17": the profiler's, after init) */
    uint64_t count; /* the count every rank passes alike (v-collectives: the shared total, or 0) */
    uint64_t vhash; /* hash of a counts array every rank passes alike (allgatherv), else 0 */
    uint64_t mine;  /* this rank's own count where ranks differ (gatherv: sendcount); shown, not compared */
    int32_t root;
    int32_t dtype;  /* the whole mlc_dtype_t: records differ by size */
    int32_t op;     /* a built-in op, or a user op's mlc_op_signature_id (base/dtype.h) */
    uint32_t coll;
} mlc_sig_t;

_Static_assert(sizeof(mlc_sig_t) == 56, "signatures travel in message headers: keep them compact");

/* The signature of collective coll with arguments a, sequence number seq on comm. */
void mlc_sig_of(const mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a, uint64_t seq, mlc_sig_t *out);
/*
 * MLC_CHECK=1 on a backend that does not sign its calls (mpi, nccl): before
 * collective coll starts, the ranks exchange its signature (one small
 * allgather; gatherv/scatterv add an allreduce, alltoallv an alltoall and
 * an allreduce) and fail it on every rank with MLC_ERR_MISMATCH if they
 * differ. Called by core with the arguments validated.
 */
mlc_status_t mlc_check_call(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *a);
/* Do two ranks' signatures describe the same call? */
static inline bool mlc_sig_same(const mlc_sig_t *a, const mlc_sig_t *b)
{
    return a->call == b->call && a->count == b->count && a->vhash == b->vhash && a->root == b->root &&
           a->op == b->op && a->coll == b->coll && a->dtype == b->dtype;
}
/* *dst = *src, just after mlc_sig_of stored src's fields (base/copy_fields.h). */
static inline void mlc_sig_copy(mlc_sig_t *dst, const mlc_sig_t *src)
{
    MLC_COPY_FIELD(dst, src, call);
    MLC_COPY_FIELD(dst, src, seq);
    MLC_COPY_FIELD(dst, src, count);
    MLC_COPY_FIELD(dst, src, vhash);
    MLC_COPY_FIELD(dst, src, mine);
    MLC_COPY_FIELD(dst, src, root);
    MLC_COPY_FIELD(dst, src, dtype);
    MLC_COPY_FIELD(dst, src, op);
    MLC_COPY_FIELD(dst, src, coll);
}
/* 64 bits that differ when mlc_sig_same says the calls differ (but for a
 * 2^-64 chance): the shared-memory engine compares them on its hot path.
 * Each field is multiplied by its own odd constant: the multiplies are
 * independent, so the core runs them side by side (a chain of rounds took
 * ~10 ns of every call), and calls that differ in one field always differ
 * here, since multiplying by an odd number and the final mix are one-to-one.
 * The 32-bit fields each get their own multiply: packed side by side, the
 * compiler reads two with one wide load, which cannot take its data from
 * the two stores mlc_sig_of just made and waits for them. */
static inline uint64_t mlc_sig_hash(const mlc_sig_t *s)
{
    uint64_t h = (s->call * 0x9e3779b97f4a7c15ull) ^ (s->count * 0xbf58476d1ce4e5b9ull) ^
                 (s->vhash * 0x94d049bb133111ebull) ^ ((uint64_t)(uint32_t)s->root * 0xd6e8feb86659fd93ull) ^
                 ((uint64_t)(uint32_t)s->dtype * 0x8ebc6af09c88c6e3ull) ^
                 ((uint64_t)(uint32_t)s->op * 0x589965cc75374cc3ull) ^ ((uint64_t)s->coll * 0xa0761d6478bd642full);
    h ^= h >> 32;
    h *= 0xe7037ed1a0b428dbull;
    h ^= h >> 29;
    return h;
}
/* "allreduce(count=1000, float32, sum)" */
void mlc_sig_describe(const mlc_sig_t *s, char *buf, size_t len);
/* "rank 0: allreduce(count=1000, float32, sum) vs rank 1: allreduce(count=100000, float32, sum), call #17" */
void mlc_sig_mismatch(const mlc_sig_t *mine, int my_rank, const mlc_sig_t *peer, int peer_rank, char *buf,
                      size_t len);
#endif
