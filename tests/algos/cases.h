/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test cases for running algorithms: every rank's buffers (guarded,
 * in-place forms included, root-only buffers absent elsewhere), its
 * collective description, and the result it must end with, computed by a
 * plain reference (reductions folded in rank order).
 */
#ifndef MLC_ALGOS_CASES_H
#define MLC_ALGOS_CASES_H
#include <stdbool.h>
#include "algos/sched.h"

typedef enum tvalues {
    TV_EXACT,  /* small integers: every result exact in int32 and float32 */
    TV_RANDOM, /* float32 with rounding: results checked for bitwise agreement across ranks */
} tvalues_t;

typedef struct tcase {
    mlc_coll_t coll;
    int p, root;
    size_t count;      /* the collective's count (see mlc_coll_desc_t) */
    mlc_dtype_t dtype; /* MLC_INT32, MLC_FLOAT32, or tcase_matrix_dtype with tcase_matrix_op */
    mlc_op_t op;
    bool inplace;
    tvalues_t values;
} tcase_t;

typedef struct trank {
    unsigned char *mem[2];   /* guarded allocations (send, recv); may be NULL */
    size_t memlen[2];
    void *send, *recv;       /* what the executor gets; NULL when the rank has none */
    size_t sendlen, recvlen; /* bytes */
    unsigned char *expect;   /* recvlen bytes the receive buffer must end with */
    unsigned char *send_orig; /* out of place: sendbuf must stay as it was */
    size_t *counts, *displs, *counts2, *displs2;
    mlc_coll_desc_t d;
    size_t avg_count;        /* for the executor (op avg) */
} trank_t;

/* The non-commutative user op: 2x2 uint32 matrix product (mod 2^32) on MLC_RECORD(16). */
#define tcase_matrix_dtype MLC_RECORD(16)
extern mlc_op_t tcase_matrix_op; /* created by tcase_init */
mlc_status_t tcase_init(void);

bool tcase_is_reducing(mlc_coll_t coll);
bool tcase_is_rooted(mlc_coll_t coll);
/* Does the collective have an in-place form the tests exercise? */
bool tcase_has_inplace(mlc_coll_t coll);

/* Set up all c->p ranks (ranks[] has p entries). 0 on success. */
int tcase_setup(const tcase_t *c, trank_t *ranks);
/* Compare every rank's result; 0 if right, else why says what is wrong. */
int tcase_check(const tcase_t *c, const trank_t *ranks, char *why, size_t len);
void tcase_free(const tcase_t *c, trank_t *ranks);
/* "allreduce p=5 count=7 int32 sum inplace root=4" */
void tcase_describe(const tcase_t *c, char *buf, size_t len);
#endif
