/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Executors move the data a plan describes. The plan (plan.h) is backend
 * independent; an executor decides how its messages travel. `p2p` packs one
 * message per neighbour and uses mlc_send/mlc_recv, so it runs on every
 * backend. A backend with a better path (MPI subarray datatypes and
 * persistent requests, say) adds an entry in front of MLC_XEXEC_LIST whose
 * applies() accepts the communicators it can serve.
 */
#ifndef MLC_EXCHANGE_EXECUTOR_H
#define MLC_EXCHANGE_EXECUTOR_H
#include <stdbool.h>
#include "plan.h"

/* The views a run reads and writes, indexed by provide / need number;
 * prov_dev / need_dev say which are device memory (NULL: none can be). */
typedef struct mlc_xbind {
    const mlc_view_t *provs;
    const mlc_view_t *needs;
    const bool *prov_dev;
    const bool *need_dev;
} mlc_xbind_t;

typedef struct mlc_xexec {
    const char *name;
    /* It moves views in device memory (copies them through the GPU runtime,
     * never on the host). An executor without it is refused for them. */
    bool device;
    /* 1 if this executor can serve exchanges on comm. */
    int (*applies)(mlc_comm_t *comm);
    /* Allocate per-plan state (buffers, requests) once per build. */
    mlc_status_t (*prepare)(const mlc_xplan_t *plan, mlc_comm_t *comm, void **state);
    /* Post the messages of one exchange with `tag` and do the local copies. */
    mlc_status_t (*start)(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b, int tag);
    /* Complete the exchange begun by start (also after a failed start: releases what it posted). */
    mlc_status_t (*finish)(void *state, const mlc_xplan_t *plan, const mlc_xbind_t *b);
    void (*release)(void *state);
} mlc_xexec_t;

/*
 * X(identifier): tried in order, the first that is present and applies
 * serves the plan (the order is the default choice; MLC_EXCHANGE_EXEC or
 * mlc_exchange_set_executor force one). mlc_xexec_lookup_<id>() returns the
 * executor, or NULL when this process does not have it (the MPI executors
 * live in the MPI module: xexec_mpi.h).
 */
#define MLC_XEXEC_LIST(X) X(mpi_pack) X(mpi_subarray) X(p2p)

extern const mlc_xexec_t mlc_xexec_p2p;
#define MLC_X_DECL(id) const mlc_xexec_t *mlc_xexec_lookup_##id(void);
MLC_XEXEC_LIST(MLC_X_DECL)
#undef MLC_X_DECL

/*
 * The executor for comm: `name` (NULL, "" or "auto": the first in
 * MLC_XEXEC_LIST that applies, and with `device` (views may be device
 * memory) the first of those that moves device memory; p2p applies
 * everywhere). A named executor that is unknown or cannot serve comm is
 * INVALID_ARG / UNSUPPORTED, the message naming what there is. `what`
 * prefixes the message.
 */
mlc_status_t mlc_xexec_select(mlc_comm_t *comm, const char *name, bool device, const char *what,
                              const mlc_xexec_t **out);

/* Local copies of a plan, shared by executors: provide -> need inside this rank. */
void mlc_xexec_local_copies(const mlc_xplan_t *plan, const mlc_xbind_t *b);
/* Do both sides of a copy name the very same memory (a need that is its own
 * provider's cells)? Compares addresses only. */
int mlc_xexec_same_memory(const mlc_copy_t *c, const void *src_base, const void *dst_base);
#endif
