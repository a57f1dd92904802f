/* SPDX-License-Identifier: BSD-3-Clause */
/* The exchange object behind mlc_exchange_t (shared by exchange.c and build.c). */
#ifndef MLC_EXCHANGE_IMPL_H
#define MLC_EXCHANGE_IMPL_H
#include <stdbool.h>
#include "devcopy.h"
#include "executor.h"
#include "plan.h"

/* A growable list of views (provides or needs); dev[i]: view i's data is device memory. */
typedef struct mlc_xviews {
    mlc_view_t *v;
    bool *dev;
    int n, cap;
} mlc_xviews_t;

struct mlc_exchange {
    mlc_comm_t *priv;          /* private context: a split of the caller's communicator */
    mlc_exchange_config_t cfg;
    mlc_xgeom_t geom;
    uint64_t cfg_hash;         /* what every rank must agree on */
    int run_tags;              /* runs use tags 0..run_tags-1 in turn; run_tags is the build tag */
    mlc_xviews_t provs, needs;
    bool views_changed;        /* views added or cleared since the plan was built / reused */
    /* The plan (valid when built) and what it was built for. */
    bool built;
    mlc_xplan_t plan;
    uint64_t plan_hash;
    bool plan_has_version;
    uint64_t plan_version;
    const mlc_xexec_t *exec;
    void *exec_state;
    /* The runtime that tells device views apart (NULL: host memory only, see devcopy.h). */
    const mlc_gpurt_t *rt;
    /* The caller's topology version (mlc_exchange_set_topology_version). */
    bool has_version;
    uint64_t version;
    bool in_flight;
    uint64_t builds, cache_hits, runs;
};

/* Hash of this rank's layout: config, and each view's parent and region in order. */
uint64_t mlc_xlayout_hash(const mlc_exchange_t *ex);

/* Build a new plan from the current views (collective over ex->priv). On
 * success *plan is filled and ex->exec prepared for it (*exec_state); the
 * same status is returned on every rank. */
mlc_status_t mlc_xbuild(mlc_exchange_t *ex, mlc_xplan_t *plan, void **exec_state);

/* Every rank passes its status; all get the first failing rank's code, the
 * failing rank keeps its own message, the others get one naming it. */
mlc_status_t mlc_xagree(mlc_comm_t *comm, mlc_status_t mine, const char *what);
#endif
