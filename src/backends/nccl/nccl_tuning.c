/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The seed's RCCLConfig, mapped onto the variables NCCL and RCCL really
 * read (RCCL reads the NCCL_* names; RCCL_* spellings in the seed are not
 * read by any RCCL release):
 *
 *   RCCLConfig field        mlcomm setting                 exported as
 *   UseRing/UseTreeAllReduce MLC_ALGO_ALLREDUCE=ring|tree  NCCL_ALGO=allreduce:ring|tree (NCCL >= 2.24),
 *                                                          else NCCL_ALGO=Ring|Tree
 *   NumChannels             MLC_NCCL_NCHANNELS=n           NCCL_MIN_NCHANNELS=n, NCCL_MAX_NCHANNELS=n
 *   EnableDebug             MLC_LOG_LEVEL=debug|trace      NCCL_DEBUG=INFO
 *   BufferSize              MLC_NCCL_BUFFSIZE=bytes (K/M/G) NCCL_BUFFSIZE=bytes
 *   TreeThresholdBytes      (none: NCCL's tuner chooses per size; NCCL_TREE_THRESHOLD was removed in 2.5)
 *
 * NCCL reads these once per process, at its first communicator, so they
 * are exported before it. A value the user already set for an NCCL_*
 * variable wins for NCCL_DEBUG; for the others a different value is a
 * CONFIG error naming both, never a silent override.
 */
#include <stdio.h>
#include <stdlib.h>
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
    const char *ch = getenv("MLC_NCCL_NCHANNELS");
    if (ch && ch[0]) {
        long long n;
        if (!mlc_parse_int(ch, 1, 64, &n))
            return mlc_error(MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='%s' is not a channel count 1..64", ch);
        out.nchannels = (int)n;
    }
    const char *bs = getenv("MLC_NCCL_BUFFSIZE");
    if (bs && bs[0]) {
        size_t n;
        if (!mlc_parse_size(bs, &n) || n < 4096 || n > ((size_t)1 << 31))
            return mlc_error(MLC_ERR_CONFIG,
                             "MLC_NCCL_BUFFSIZE='%s' is not a size between 4K and 2G (K/M/G suffixes allowed)",
                             bs);
        out.buffsize = n;
    }
    out.debug = cfg->log_level >= MLC_LOG_DEBUG;
    *t = out;
    return MLC_SUCCESS;
}

/* Export name=value unless already so; `soft` lets a user's different value stand. */
static mlc_status_t export_var(const char *name, const char *value, const char *why, bool soft)
{
    const char *have = getenv(name);
    if (have && strcmp(have, value) == 0) return MLC_SUCCESS;
    if (have) {
        if (soft) return MLC_SUCCESS;
        return mlc_error(MLC_ERR_CONFIG, "%s asks for %s=%s but the environment has %s=%s", why, name,
                         value, name, have);
    }
    if (setenv(name, value, 0) != 0)
        return mlc_error(MLC_ERR_SYSTEM, "setenv(%s): out of memory", name);
    MLC_DEBUG("exported %s=%s (%s)", name, value, why);
    return MLC_SUCCESS;
}

mlc_status_t mlc_nccl_tuning_apply(const mlc_nccl_tuning_t *t)
{
    char num[32];
    mlc_status_t st = MLC_SUCCESS;
    if (t->algo[0]) st = export_var("NCCL_ALGO", t->algo, "MLC_ALGO_ALLREDUCE", false);
    if (st == MLC_SUCCESS && t->nchannels > 0) {
        snprintf(num, sizeof num, "%d", t->nchannels);
        st = export_var("NCCL_MIN_NCHANNELS", num, "MLC_NCCL_NCHANNELS", false);
        if (st == MLC_SUCCESS) st = export_var("NCCL_MAX_NCHANNELS", num, "MLC_NCCL_NCHANNELS", false);
    }
    if (st == MLC_SUCCESS && t->buffsize > 0) {
        snprintf(num, sizeof num, "%zu", t->buffsize);
        st = export_var("NCCL_BUFFSIZE", num, "MLC_NCCL_BUFFSIZE", false);
    }
    if (st == MLC_SUCCESS && t->debug) st = export_var("NCCL_DEBUG", "INFO", "MLC_LOG_LEVEL", true);
    return st;
}
