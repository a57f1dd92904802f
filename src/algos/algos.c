/* The algorithm registry (driven by the lists in build.h) and the checked build. */
#include <string.h>
#include "build.h"
#include "error.h"

const mlc_algo_t mlc_algos[] = {
#define MLC_X_ENTRY(coll, name, fn, ordered) {coll, name, mlc_build_##fn, ordered, mlc_cost_##fn},
#define MLC_F_ENTRIES(coll, list) list(MLC_X_ENTRY)
    MLC_ALGO_FAMILIES(MLC_F_ENTRIES)
#undef MLC_F_ENTRIES
#undef MLC_X_ENTRY
    {0, NULL, NULL, false, NULL},
};

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

static mlc_status_t mlc_desc_check(const mlc_algo_t *a, const mlc_coll_desc_t *d)
{
    const char *cn = mlc_coll_name(d->coll);
    if (a->coll != d->coll)
        return mlc_error(MLC_ERR_INVALID_ARG, "algorithm %s/%s asked to build a %s",
                         mlc_coll_name(a->coll), a->name, cn ? cn : "(unknown collective)");
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
    if (!d->commutative && !a->order_preserving)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s algorithm '%s' does not keep rank order: it cannot run a "
                         "non-commutative op",
                         cn, a->name);
    return MLC_SUCCESS;
}

mlc_status_t mlc_algo_build(const mlc_algo_t *algo, const mlc_coll_desc_t *d, mlc_sched_t *s)
{
    mlc_sched_init(s);
    if (!algo || !algo->build || !d)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_algo_build: algorithm or description is NULL");
    mlc_status_t st = mlc_desc_check(algo, d);
    if (!st) st = algo->build(d, s);
    if (!st) st = mlc_sched_finalize(s);
    if (st) mlc_sched_free(s);
    return st;
}
