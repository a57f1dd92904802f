/* SPDX-License-Identifier: BSD-3-Clause */
/* The backend registry: MLC_BACKEND_LIST drives the table, `auto` and mlcomm-info. */
#include <string.h>
#include "backend.h"
#include "error.h"

const mlc_backend_t *const mlc_backends[] = {
#define MLC_X_ENTRY(id) &mlc_backend_##id,
    MLC_BACKEND_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
    NULL,
};

const mlc_backend_t *mlc_backend_find(const char *name)
{
    for (const mlc_backend_t *const *b = mlc_backends; *b; b++)
        if (strcmp((*b)->name, name) == 0) return *b;
    return NULL;
}

mlc_status_t mlc_backend_select(const mlc_cfg_t *cfg, const mlc_backend_t **out)
{
    char why[256];
    if (cfg->backend[0] && strcmp(cfg->backend, "auto") != 0) {
        const mlc_backend_t *be = mlc_backend_find(cfg->backend);
        if (!be) return mlc_error(MLC_ERR_CONFIG, "MLC_BACKEND=%s: unknown backend", cfg->backend);
        if (!be->available(why, sizeof why))
            return mlc_error(MLC_ERR_UNAVAILABLE, "backend '%s' is not available: %s", be->name, why);
        *out = be;
        return MLC_SUCCESS;
    }
    const mlc_backend_t *best = NULL;
    for (const mlc_backend_t *const *b = mlc_backends; *b; b++) {
        if ((*b)->priority <= 0) continue; /* never chosen automatically */
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
