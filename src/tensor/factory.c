/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_comm_create_from: a communicator from a backend name plus key/value
 * options (the C# specification's CommunicatorFactory). Its "mock" backend is
 * the real `threads` backend here: every rank a thread of this process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/backend.h"
#include "base/error.h"
#include "options.h"

static mlc_status_t check_backend(const char *backend)
{
    if (!backend || strcmp(backend, "auto") == 0 || mlc_backend_find(backend)) return MLC_SUCCESS;
    char known[128];
    size_t used = 0;
#define MLC_X_NAME(id) \
    used += (size_t)snprintf(known + used, used < sizeof known ? sizeof known - used : 0, "%s, ", #id);
    MLC_BACKEND_LIST(MLC_X_NAME)
#undef MLC_X_NAME
    if (used < sizeof known) snprintf(known + used, sizeof known - used, "auto");
    return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: unknown backend \"%s\" (known: %s)",
                     backend, known);
}

/*
 * Apply the algo_<collective> options to every new communicator. A rank that
 * joined by itself (ncomms == 1, options of its own) then compares them with
 * the other ranks, as init compares MLC_ALGO_<COLL>: a name this rank could
 * not apply is still compared (so every rank fails, not this one alone).
 */
static mlc_status_t apply_algos(const mlc_option_t *options, size_t n, mlc_comm_t **comms, int ncomms,
                                bool agree)
{
    mlc_status_t first = MLC_SUCCESS;
    char msg[384] = "";
    for (size_t i = 0; i < n; i++) {
        int coll = mlc_options_algo_coll(options[i].key);
        if (coll < 0) continue;
        for (int c = 0; c < ncomms; c++) {
            mlc_status_t st = mlc_comm_set_algo(comms[c], coll, options[i].value);
            if (st == MLC_SUCCESS || first != MLC_SUCCESS) continue;
            first = st;
            snprintf(msg, sizeof msg, "%s", mlc_last_error());
            if (agree) snprintf(comms[c]->cfg.algo[coll], sizeof comms[c]->cfg.algo[coll], "%s", options[i].value);
        }
    }
    if (agree && ncomms == 1) {
        mlc_status_t st = mlc_comm_agree_settings(comms[0]);
        if (st != MLC_SUCCESS) return st;
    }
    if (first != MLC_SUCCESS) mlc_error_set_text(msg);
    return first;
}

MLC_API mlc_status_t mlc_comm_create_from(const char *backend, const mlc_option_t *options,
                                          size_t noptions, const mlc_unique_id_t *uid,
                                          int capacity, mlc_comm_t **comms, int *ncomms)
{
    const char *fn = "mlc_comm_create_from";
    mlc_error_clear();
    if (!comms || !ncomms)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: %s is NULL", fn, !comms ? "comms" : "ncomms");
    if (capacity < 1)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: capacity %d leaves no room for a communicator", fn,
                         capacity);
    mlc_status_t st = check_backend(backend);
    if (st != MLC_SUCCESS) return st;
    mlc_config_t cfg = MLC_CONFIG_INIT;
    size_t algos = 0;
    if ((st = mlc_options_apply(options, noptions, &cfg, &algos))) return st;
    cfg.backend = backend;
    int rank = cfg.rank, world = cfg.world_size;
    bool threads = backend && strcmp(backend, "threads") == 0;

    mlc_comm_t *made[1] = {NULL};
    mlc_comm_t **out = made;
    int n = 1;
    if (uid) {
        if (rank == MLC_UNSET || world == MLC_UNSET)
            return mlc_error(MLC_ERR_CONFIG,
                             "%s: joining a unique id needs the options \"rank\" and \"world_size\"",
                             fn);
        if (rank >= world)
            return mlc_error(MLC_ERR_CONFIG, "%s: option \"rank\" = %d is outside 0..%d", fn, rank,
                             world - 1);
        cfg.rank = cfg.world_size = MLC_UNSET; /* passed as arguments */
        st = mlc_comm_init_rank(uid, world, rank, &cfg, &made[0]);
    } else if (threads) {
        if (rank != MLC_UNSET)
            return mlc_error(MLC_ERR_CONFIG,
                             "%s: option \"rank\" needs a unique id with backend threads (without "
                             "one, every rank is created at once)",
                             fn);
        n = world == MLC_UNSET ? 1 : world;
        if (capacity < n)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "%s: %d threads ranks need room for %d communicators, capacity is %d",
                             fn, n, n, capacity);
        cfg.world_size = MLC_UNSET; /* passed as an argument */
        out = calloc((size_t)n, sizeof *out); /* comms is written only on success */
        if (!out) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d handles", fn, n);
        st = mlc_comm_init_all(n, &cfg, out);
    } else {
        st = mlc_comm_init(&cfg, &made[0]);
    }
    /* Every joining rank compares, with or without options of its own. */
    if (st == MLC_SUCCESS) st = apply_algos(options, algos ? noptions : 0, out, n, n == 1);
    if (st != MLC_SUCCESS) {
        char msg[384];
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        for (int c = 0; c < n; c++) mlc_comm_free(out[c]); /* NULL when init failed */
        mlc_error_set_text(msg);
    } else {
        for (int c = 0; c < n; c++) comms[c] = out[c];
        *ncomms = n;
    }
    if (out != made) free(out);
    return st;
}
