/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pure collective schedules: who sends what to whom at each round. An
 * algorithm turns a collective description into a list of steps; nothing
 * here touches a transport, so schedules are unit-tested on their own.
 * src/algos/exec.h runs a schedule over any backend's point-to-point ops.
 */
#ifndef MLC_ALGOS_SCHED_H
#define MLC_ALGOS_SCHED_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlcomm.h"

typedef enum mlc_step_kind {
    MLC_STEP_SEND,        /* send buf[off, off+bytes) to peer */
    MLC_STEP_RECV,        /* receive bytes from peer into buf[off..] */
    MLC_STEP_RECV_REDUCE, /* receive from peer into buf[off..] (TMP), then dbuf[doff..] = in (op) dbuf */
    MLC_STEP_COPY,        /* dbuf[doff..] = buf[off..] (local) */
    MLC_STEP_REDUCE,      /* dbuf[doff..] = buf[off..] (op) dbuf[doff..] (local) */
} mlc_step_kind_t;

typedef enum mlc_buf_id { MLC_BUF_SEND, MLC_BUF_RECV, MLC_BUF_TMP, MLC_BUF_COUNT } mlc_buf_id_t;

/* Step flag: the data in buf belongs to higher ranks than dbuf's, so a
 * non-commutative op must be applied as dbuf (op) buf. */
#define MLC_STEP_SRC_HIGHER 0x1

/*
 * Reductions (REDUCE, RECV_REDUCE) take their second operand from
 * sbuf[soff..], which mlc_sched_add sets to dbuf[doff..] (the classic
 * "dbuf (op)= buf"); mlc_sched_add_reduce names another one, so that e.g.
 * recvbuf = received (op) sendbuf needs no copy of sendbuf first:
 *   flags without SRC_HIGHER: dbuf = buf (op) sbuf
 *   flags with    SRC_HIGHER: dbuf = sbuf (op) buf
 *
 * Rounds (the executor's rule, src/algos/exec.c): round k posts all its
 * SEND/RECV/RECV_REDUCE steps (receives first), reduces each RECV_REDUCE
 * the moment its data lands, and runs its local COPY/REDUCE steps in list
 * order once every communication step of round k completed; round k+1
 * starts after that. So within a round no step may write bytes that a SEND
 * or another step of the same round reads or writes, and a local step may
 * use anything the round's communication produced.
 */
typedef struct mlc_step {
    uint8_t kind;   /* mlc_step_kind_t */
    uint8_t buf;    /* mlc_buf_id_t: source (send/copy/reduce) or landing (recv) */
    uint8_t dbuf;   /* destination of COPY/REDUCE/RECV_REDUCE */
    uint8_t flags;
    uint8_t sbuf;   /* second operand of REDUCE/RECV_REDUCE (see above) */
    int32_t peer;   /* rank in the communicator (SEND/RECV/RECV_REDUCE) */
    uint32_t round; /* steps of round k start when every step of round k-1 completed */
    uint32_t key;   /* message number, set by mlc_sched_finalize (see there) */
    size_t off, doff, bytes;
    size_t soff;
} mlc_step_t;

typedef struct mlc_sched {
    mlc_step_t *steps;
    size_t nsteps, cap;
    uint32_t nrounds;
    size_t tmp_bytes;  /* scratch the executor must provide */
    mlc_step_t inline_steps[24]; /* small schedules need no heap */
    bool finalized;    /* steps sorted by round and numbered (mlc_sched_finalize) */
} mlc_sched_t;

/* What a schedule is built for. Counts and displacements are in elements. */
typedef struct mlc_coll_desc {
    mlc_coll_t coll;
    int rank, size, root;
    size_t count, esize;
    const size_t *counts, *displs;   /* v-variants, as in mlc_args_t */
    const size_t *counts2, *displs2;
    bool inplace;
    bool commutative;
    bool has_send, has_recv;         /* buffer present on this rank (reduce/gather roots etc.) */
} mlc_coll_desc_t;

void mlc_sched_init(mlc_sched_t *s);
void mlc_sched_free(mlc_sched_t *s);
/* Append a step (grows the array). Returns MLC_ERR_NO_MEMORY on failure. */
mlc_status_t mlc_sched_add(mlc_sched_t *s, mlc_step_kind_t kind, uint32_t round, int peer,
                           mlc_buf_id_t buf, size_t off, mlc_buf_id_t dbuf, size_t doff,
                           size_t bytes, uint8_t flags);
/* Append a REDUCE or RECV_REDUCE whose second operand is sbuf[soff..]. */
mlc_status_t mlc_sched_add_reduce(mlc_sched_t *s, mlc_step_kind_t kind, uint32_t round, int peer,
                                  mlc_buf_id_t buf, size_t off, mlc_buf_id_t sbuf, size_t soff,
                                  mlc_buf_id_t dbuf, size_t doff, size_t bytes, uint8_t flags);
/*
 * Sort the steps by round (stable: list order is kept within a round) and
 * number the messages: a SEND's key is how many earlier SENDs of this
 * schedule go to the same peer, a receive's key how many earlier receives
 * come from the same peer. Matching schedules therefore give a message the
 * same key on both sides, and (seq, key) names it uniquely between two
 * ranks (mlc_exec_tag). Idempotent. MLC_ERR_UNSUPPORTED when a key would
 * not fit in MLC_SCHED_KEY_BITS.
 */
#define MLC_SCHED_KEY_BITS 20
mlc_status_t mlc_sched_finalize(mlc_sched_t *s);

/* An algorithm: fills s for rank d->rank. Returns UNSUPPORTED when it cannot
 * handle d (e.g. a non-commutative op where order is not preserved). */
typedef mlc_status_t (*mlc_algo_fn_t)(const mlc_coll_desc_t *d, mlc_sched_t *s);

struct mlc_cost_model; /* src/algos/select.h */
/* Predicted seconds for d under a cost model (uses only what every rank agrees on). */
typedef double (*mlc_algo_cost_fn_t)(const mlc_coll_desc_t *d, const struct mlc_cost_model *m);

typedef struct mlc_algo {
    mlc_coll_t coll;
    const char *name;
    /* Checks d (as mlc_algo_build), appends the steps to s (initialised by the
     * caller) and finalizes it. On failure s may hold steps: free it. */
    mlc_algo_fn_t build;
    bool order_preserving; /* safe for non-commutative ops */
    mlc_algo_cost_fn_t cost;
} mlc_algo_t;

/* Every algorithm of every collective, terminated by a NULL name. */
extern const mlc_algo_t mlc_algos[];
const mlc_algo_t *mlc_algo_find(mlc_coll_t coll, const char *name);
/* The names of coll's algorithms in list order, NULL-terminated (empty for send/recv). */
const char *const *mlc_algo_names(mlc_coll_t coll);
/*
 * Check d, initialise s and fill it with algo's finalized schedule for
 * d->rank. INVALID_ARG for an inconsistent d (message names the field),
 * UNSUPPORTED when algo does not preserve order and d is not commutative.
 * On failure s is left initialised and empty.
 */
mlc_status_t mlc_algo_build(const mlc_algo_t *algo, const mlc_coll_desc_t *d, mlc_sched_t *s);
#endif
