/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RCCLConfig's fields (the C# specification) mapped onto what NCCL and RCCL
 * really read (RCCL reads the NCCL_* names):
 *
 *   RCCLConfig field         mlcomm setting                 goes to NCCL as
 *   UseRing/UseTreeAllReduce MLC_ALGO_ALLREDUCE=ring|tree   NCCL_ALGO=allreduce:ring|tree (NCCL >= 2.24),
 *                                                           else NCCL_ALGO=Ring|Tree        (process)
 *   NumChannels              MLC_NCCL_NCHANNELS=n           ncclConfig_t minCTAs = maxCTAs = n (communicator)
 *   EnableDebug              MLC_LOG_LEVEL=debug|trace      NCCL_DEBUG=INFO                 (process)
 *   BufferSize               MLC_NCCL_BUFFSIZE=bytes (K/M/G) NCCL_BUFFSIZE=bytes            (process)
 *   TreeThresholdBytes       (none: NCCL's tuner chooses per size; NCCL_TREE_THRESHOLD was removed in 2.5)
 *
 * What ncclConfig_t carries is set per communicator. NCCL reads the others
 * from the environment once per process, at its first communicator: they are
 * exported before it and fixed; a later communicator asking for another value
 * fails with both values named, never silently runs with the first's. A value
 * the user set for NCCL_DEBUG stands; for the others a different value is a
 * CONFIG error naming both.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "backends/nccl/nccl_impl.h"
#include "config.h"
#include "error.h"
#include "log.h"

mlc_status_t mlc_nccl_tuning_resolve(const mlc_cfg_t *cfg, int nccl_version, mlc_nccl_tuning_t *t)
{
    mlc_nccl_tuning_t out;
    memset(&out, 0, sizeof out);
    const char *algo = cfg->algo[MLC_COLL_ALLREDUCE];
    if (algo[0] && strcmp(algo, "auto") != 0 && strcmp(algo, "native") != 0) {
        bool ring = strcmp(algo, "ring") == 0, tree = strcmp(algo, "tree") == 0;
        if (!ring && !tree)
            return mlc_error(MLC_ERR_CONFIG,
                             "MLC_ALGO_ALLREDUCE=%s: the NCCL/RCCL backends run NCCL's own "
                             "algorithms, 'ring' or 'tree'",
                             algo);
        /* Per-collective syntax from NCCL 2.24 on; before, the list applies to every collective. */
        if (nccl_version >= mlc_nccl_version_code(2, 24, 0))
            snprintf(out.algo, sizeof out.algo, "allreduce:%s", ring ? "ring" : "tree");
        else
            snprintf(out.algo, sizeof out.algo, "%s", ring ? "Ring" : "Tree");
    }
    long long nch;
    mlc_status_t st = mlc_env_int(MLC_ENV_NCCL_NCHANNELS, &nch, NULL);
    if (st == MLC_SUCCESS) st = mlc_env_size(MLC_ENV_NCCL_BUFFSIZE, &out.buffsize, NULL);
    if (st != MLC_SUCCESS) return st;
    out.nchannels = (int)nch;
    out.debug = cfg->log_level >= MLC_LOG_DEBUG;
    *t = out;
    return MLC_SUCCESS;
}

void mlc_nccl_tuning_config(int nchannels, mlc_ncclConfig_t *config)
{
    if (nchannels > 0) config->minCTAs = config->maxCTAs = nchannels;
}

/* The value NCCL reads for `var` now ("" = unset). */
static void current(mlc_env_id_t var, char *buf, size_t len)
{
    const char *v = mlc_env_text(var);
    snprintf(buf, len, "%s", v ? v : "");
}

/* Before the first communicator: export var=value unless already so; `soft` lets a user's different value stand. */
static mlc_status_t export_var(mlc_env_id_t var, const char *value, const char *why, bool soft)
{
    const char *name = mlc_env_vars[var].name, *have = mlc_env_text(var);
    if (have && strcmp(have, value) == 0) return MLC_SUCCESS;
    if (have) {
        if (soft) return MLC_SUCCESS;
        return mlc_error(MLC_ERR_CONFIG, "%s asks for %s=%s but the environment has %s=%s", why, name,
                         value, name, have);
    }
    mlc_status_t st = mlc_env_export(var, value);
    if (st == MLC_SUCCESS) MLC_DEBUG("exported %s=%s (%s)", name, value, why);
    return st;
}

/* After the first communicator: `value` must be what NCCL read then (`fixed`). */
static mlc_status_t check_fixed(mlc_env_id_t var, const char *value, const char *fixed, const char *why)
{
    if (!value[0] || strcmp(value, fixed) == 0) return MLC_SUCCESS;
    const char *name = mlc_env_vars[var].name;
    char was[64];
    if (fixed[0]) snprintf(was, sizeof was, "%s=%s", name, fixed);
    else snprintf(was, sizeof was, "%s unset (NCCL's default)", name);
    return mlc_error(MLC_ERR_CONFIG,
                     "%s asks for %s=%s, but NCCL read %s at this process's first communicator and "
                     "reads it only once: every NCCL communicator of a process needs the same %s",
                     why, name, value, was, why);
}

mlc_status_t mlc_nccl_tuning_apply_to(mlc_nccl_process_env_t *penv, const mlc_nccl_tuning_t *t)
{
    char buffsize[32] = "";
    if (t->buffsize > 0) snprintf(buffsize, sizeof buffsize, "%zu", t->buffsize);
    mlc_status_t st;
    if (penv->fixed) {
        st = check_fixed(MLC_ENV_EXPORT_NCCL_ALGO, t->algo, penv->algo, "MLC_ALGO_ALLREDUCE");
        if (st == MLC_SUCCESS)
            st = check_fixed(MLC_ENV_EXPORT_NCCL_BUFFSIZE, buffsize, penv->buffsize, "MLC_NCCL_BUFFSIZE");
        return st;
    }
    st = MLC_SUCCESS;
    if (t->algo[0]) st = export_var(MLC_ENV_EXPORT_NCCL_ALGO, t->algo, "MLC_ALGO_ALLREDUCE", false);
    if (st == MLC_SUCCESS && buffsize[0])
        st = export_var(MLC_ENV_EXPORT_NCCL_BUFFSIZE, buffsize, "MLC_NCCL_BUFFSIZE", false);
    if (st == MLC_SUCCESS && t->debug) st = export_var(MLC_ENV_EXPORT_NCCL_DEBUG, "INFO", "MLC_LOG_LEVEL", true);
    if (st != MLC_SUCCESS) return st;
    current(MLC_ENV_EXPORT_NCCL_ALGO, penv->algo, sizeof penv->algo);
    current(MLC_ENV_EXPORT_NCCL_BUFFSIZE, penv->buffsize, sizeof penv->buffsize);
    penv->fixed = true;
    return MLC_SUCCESS;
}

static pthread_mutex_t process_env_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_nccl_process_env_t process_env;

mlc_status_t mlc_nccl_tuning_apply(const mlc_nccl_tuning_t *t)
{
    pthread_mutex_lock(&process_env_lock);
    mlc_status_t st = mlc_nccl_tuning_apply_to(&process_env, t);
    pthread_mutex_unlock(&process_env_lock);
    return st;
}
