/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backend registry: MLC_BACKEND_LIST drives the table, `auto` and
 * mlcomm-info. A table is validated the first time it is found or
 * selected; one that fails is reported as unavailable, with the flaw.
 */
#include <stdio.h>
#include <string.h>
#include "backend.h"
#include "error.h"

const mlc_backend_t *const mlc_backends[] = {
#define MLC_X_ENTRY(id) &mlc_backend_##id,
    MLC_BACKEND_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
    NULL,
};

mlc_status_t mlc_backend_unsupported_start(mlc_request_t *req)
{
    return mlc_error(MLC_ERR_UNSUPPORTED, "mlc_%s is not supported by backend '%s'", mlc_coll_name(req->coll),
                     req->comm->be->name);
}

mlc_status_t mlc_backend_unsupported_iprobe(mlc_comm_t *comm, int source, int tag, int *flag,
                                            mlc_msg_status_t *st)
{
    return mlc_error(MLC_ERR_UNSUPPORTED, "probing is not supported by backend '%s'", comm->be->name);
}

mlc_status_t mlc_backend_validate(const mlc_backend_t *be)
{
    if (!be) return mlc_error(MLC_ERR_CONFIG, "backend table is NULL");
    const char *name = be->name ? be->name : "(unnamed)";
    if (be->abi != MLC_BACKEND_ABI || be->size != sizeof *be)
        return mlc_error(MLC_ERR_CONFIG, "backend '%s' was built for another backend interface (version %u, %u bytes; "
                         "this library: version %u, %zu bytes)",
                         name, be->abi, be->size, MLC_BACKEND_ABI, sizeof *be);
    const char *missing = !be->name        ? "name"
                          : !be->available ? "available"
                          : !be->init      ? "init"
                          : !be->split     ? "split"
                          : !be->destroy   ? "destroy"
                          : !be->abort     ? "abort"
                          : !be->iprobe    ? "iprobe"
                          : !be->progress  ? "progress"
                          : !be->health    ? "health"
                                           : NULL;
    if (missing) return mlc_error(MLC_ERR_CONFIG, "backend '%s' has no '%s' entry", name, missing);
    for (int c = 0; c < MLC_COLL_COUNT; c++)
        if (!be->start[c])
            return mlc_error(MLC_ERR_CONFIG, "backend '%s' has no start entry for %s (use mlc_backend_unsupported_start)",
                             name, mlc_coll_name((mlc_coll_t)c));
    return MLC_SUCCESS;
}

/* The registered tables, each validated once. */
static const mlc_backend_t *checked(const mlc_backend_t *be)
{
    static _Atomic int state[sizeof mlc_backends / sizeof mlc_backends[0]]; /* 0 unknown, 1 valid, -1 not */
    size_t i = 0;
    while (mlc_backends[i] && mlc_backends[i] != be) i++;
    if (!mlc_backends[i]) return be; /* not registered here (the MPI module's table, checked at load) */
    if (state[i] == 0) state[i] = mlc_backend_validate(be) == MLC_SUCCESS ? 1 : -1;
    return state[i] > 0 ? be : NULL;
}

const mlc_backend_t *mlc_backend_find(const char *name)
{
    for (const mlc_backend_t *const *b = mlc_backends; *b; b++)
        if (strcmp((*b)->name, name) == 0) return checked(*b);
    return NULL;
}

static const mlc_decorator_t *const decorators[] = {
#define MLC_X_ENTRY(id) &mlc_decorator_##id,
    MLC_DECORATOR_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
};

mlc_status_t mlc_decorate(mlc_comm_t *comm)
{
    mlc_status_t st = MLC_SUCCESS;
    for (size_t i = 0; i < sizeof decorators / sizeof decorators[0] && st == MLC_SUCCESS; i++)
        st = decorators[i]->wrap(comm);
    return st;
}

mlc_status_t mlc_decorate_local(int n, mlc_comm_t **comms)
{
    mlc_status_t st = MLC_SUCCESS;
    for (size_t i = 0; i < sizeof decorators / sizeof decorators[0] && st == MLC_SUCCESS; i++)
        st = decorators[i]->wrap_local(n, comms);
    return st;
}

mlc_status_t mlc_backend_select(const mlc_cfg_t *cfg, const mlc_backend_t **out)
{
    char why[256];
    if (cfg->backend[0] && strcmp(cfg->backend, "auto") != 0) {
        const mlc_backend_t *be = NULL;
        for (const mlc_backend_t *const *b = mlc_backends; *b && !be; b++)
            if (strcmp((*b)->name, cfg->backend) == 0) be = *b;
        if (!be) return mlc_error(MLC_ERR_CONFIG, "MLC_BACKEND=%s: unknown backend", cfg->backend);
        mlc_status_t st = mlc_backend_validate(be);
        if (st != MLC_SUCCESS) return st;
        if (!be->available(why, sizeof why))
            return mlc_error(MLC_ERR_UNAVAILABLE, "backend '%s' is not available: %s", be->name, why);
        *out = be;
        return MLC_SUCCESS;
    }
    const mlc_backend_t *best = NULL;
    for (const mlc_backend_t *const *b = mlc_backends; *b; b++) {
        if ((*b)->priority <= 0 || !checked(*b)) continue; /* never chosen automatically / not usable */
        if ((*b)->accepts && !(*b)->accepts(cfg)) continue;
        if (!(*b)->available(why, sizeof why)) continue;
        if (!best || (*b)->priority > best->priority) best = *b;
    }
    if (!best)
        return mlc_error(MLC_ERR_UNAVAILABLE,
                         "no backend accepts this job (%d ranks, rank variables from %s); "
                         "set MLC_BACKEND and see mlcomm-info",
                         cfg->world_size, cfg->rank_source ? cfg->rank_source : "nowhere");
    *out = best;
    return MLC_SUCCESS;
}
