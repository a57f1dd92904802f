/* SPDX-License-Identifier: BSD-3-Clause */
/* The algorithm registry (driven by the lists in build.h) and the checked build. */
#include <string.h>
#include "build.h"
#include "base/error.h"

/* One NULL-terminated name array per collective. */
#define MLC_X_NAME(coll, name, fn, ordered) name,
#define MLC_F_NAMES(coll, list) static const char *const mlc_names_##coll[] = {list(MLC_X_NAME) NULL};
MLC_ALGO_FAMILIES(MLC_F_NAMES)
#undef MLC_F_NAMES
#undef MLC_X_NAME
static const char *const mlc_names_none[] = {NULL};

const char *const *mlc_algo_names(mlc_coll_t coll)
{
    switch (coll) {
#define MLC_F_CASE(coll, list) \
    case coll:                 \
        return mlc_names_##coll;
        MLC_ALGO_FAMILIES(MLC_F_CASE)
#undef MLC_F_CASE
    default:
        return mlc_names_none;
    }
}

const mlc_algo_t *mlc_algo_find(mlc_coll_t coll, const char *name)
{
    if (!name) return NULL;
    for (const mlc_algo_t *a = mlc_algos; a->name; a++)
        if (a->coll == coll && strcmp(a->name, name) == 0) return a;
    return NULL;
}

static bool mlc_coll_rooted(mlc_coll_t c)
{
    return c == MLC_COLL_BROADCAST || c == MLC_COLL_REDUCE || c == MLC_COLL_GATHER ||
           c == MLC_COLL_GATHERV || c == MLC_COLL_SCATTER || c == MLC_COLL_SCATTERV;
}

/* What every builder may rely on; algorithm `name` of `coll`. */
static mlc_status_t mlc_desc_check(mlc_coll_t coll, const char *name, bool ordered,
                                   const mlc_coll_desc_t *d)
{
    const char *cn = mlc_algos_coll_name(d->coll);
    if (coll != d->coll)
        return mlc_error(MLC_ERR_INVALID_ARG, "algorithm %s/%s asked to build a %s",
                         mlc_algos_coll_name(coll), name, cn);
    if (d->size < 1 || d->rank < 0 || d->rank >= d->size)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: rank %d out of range for size %d", cn, d->rank,
                         d->size);
    if (mlc_coll_rooted(d->coll) && (d->root < 0 || d->root >= d->size))
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: root %d out of range for size %d", cn, d->root,
                         d->size);
    if (d->esize == 0 && d->coll != MLC_COLL_BARRIER)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: element size 0", cn);
    bool need_counts = d->coll == MLC_COLL_ALLGATHERV || d->coll == MLC_COLL_ALLTOALLV ||
                       ((d->coll == MLC_COLL_GATHERV || d->coll == MLC_COLL_SCATTERV) &&
                        d->rank == d->root);
    if (need_counts && (!d->counts || !d->displs))
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: rank %d needs counts and displacements", cn,
                         d->rank);
    if (d->coll == MLC_COLL_ALLTOALLV && (!d->counts2 || !d->displs2))
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "alltoallv: rank %d needs receive counts and displacements", d->rank);
    if (!d->commutative && !ordered)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s algorithm '%s' does not keep rank order: it cannot run a "
                         "non-commutative op",
                         cn, name);
    return MLC_SUCCESS;
}

/* The table's build entries: check d, build, finalize (s already initialised). */
static mlc_status_t mlc_checked_build(mlc_coll_t coll, const char *name, bool ordered,
                                      mlc_algo_fn_t build, const mlc_coll_desc_t *d,
                                      mlc_sched_t *s)
{
    if (!d || !s)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s/%s: description or schedule is NULL",
                         mlc_algos_coll_name(coll), name);
    mlc_status_t st = mlc_desc_check(coll, name, ordered, d);
    if (!st) st = build(d, s);
    if (!st) st = mlc_sched_finalize(s);
    return st;
}
#define MLC_X_CHECKED(coll, name, fn, ordered)                                          \
    static mlc_status_t mlc_checked_##fn(const mlc_coll_desc_t *d, mlc_sched_t *s)      \
    {                                                                                   \
        return mlc_checked_build(coll, name, ordered, mlc_build_##fn, d, s);            \
    }
#define MLC_F_CHECKED(coll, list) list(MLC_X_CHECKED)
MLC_ALGO_FAMILIES(MLC_F_CHECKED)
#undef MLC_F_CHECKED
#undef MLC_X_CHECKED

const mlc_algo_t mlc_algos[] = {
#define MLC_X_ENTRY(coll, name, fn, ordered) {coll, name, mlc_checked_##fn, ordered, mlc_cost_##fn},
#define MLC_F_ENTRIES(coll, list) list(MLC_X_ENTRY)
    MLC_ALGO_FAMILIES(MLC_F_ENTRIES)
#undef MLC_F_ENTRIES
#undef MLC_X_ENTRY
    {0, NULL, NULL, false, NULL},
};

mlc_status_t mlc_algo_build(const mlc_algo_t *algo, const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    if (!s) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_algo_build: schedule is NULL");
    mlc_sched_init(s);
    if (!algo || !algo->build)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_algo_build: algorithm is NULL");
    mlc_status_t st = algo->build(d, s);
    if (st) mlc_sched_free(s);
    return st;
}
