/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RCCLConfig's settings mapped onto NCCL: MLC_NCCL_NCHANNELS per communicator
 * (ncclConfig_t), MLC_ALGO_ALLREDUCE, MLC_NCCL_BUFFSIZE and MLC_LOG_LEVEL as
 * NCCL_* variables fixed at a process's first communicator; malformed values,
 * conflicts with variables the user already set and later communicators
 * asking for other process-wide values are CONFIG errors naming both.
 */
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "backends/nccl/nccl_impl.h"
#include "base/config.h"

static void clear_env(void)
{
    static const char *const vars[] = {"NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                                       "NCCL_BUFFSIZE", "NCCL_DEBUG", "MLC_NCCL_NCHANNELS",
                                       "MLC_NCCL_BUFFSIZE", "MLC_ALGO_ALLREDUCE", "MLC_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static const char *env(const char *n)
{
    const char *v = getenv(n);
    return v ? v : "(unset)";
}

int main(void)
{
    clear_env();
    mlc_cfg_t cfg;
    mlc_nccl_tuning_t t;
    mlc_nccl_process_env_t proc; /* one process's NCCL environment, from its first communicator */
    memset(&proc, 0, sizeof proc);
    CHECK_OK(mlc_config_resolve(NULL, &cfg));
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK(!t.algo[0] && t.nchannels == 0 && t.buffsize == 0 && !t.debug, "defaults changed something");
    CHECK_OK(mlc_nccl_tuning_apply_to(&proc, &t));
    CHECK(!getenv("NCCL_ALGO") && !getenv("NCCL_DEBUG") && !getenv("NCCL_BUFFSIZE"), "exported defaults");
    mlc_ncclConfig_t nc = {sizeof nc, MLC_NCCL_CONFIG_MAGIC, MLC_NCCL_CONFIG_VERSION, 0, MLC_NCCL_CONFIG_UNDEF_INT,
                           MLC_NCCL_CONFIG_UNDEF_INT, MLC_NCCL_CONFIG_UNDEF_INT, NULL};
    mlc_nccl_tuning_config(t.nchannels, &nc);
    CHECK(nc.minCTAs == MLC_NCCL_CONFIG_UNDEF_INT && nc.maxCTAs == MLC_NCCL_CONFIG_UNDEF_INT, "channels left to NCCL");

    /* Everything set, in a fresh process. */
    memset(&proc, 0, sizeof proc);
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "tree");
    cfg.log_level = MLC_LOG_DEBUG;
    setenv("MLC_NCCL_NCHANNELS", "4", 1);
    setenv("MLC_NCCL_BUFFSIZE", "8M", 1);
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_STR(t.algo, "allreduce:tree");
    CHECK(t.nchannels == 4 && t.buffsize == 8u << 20 && t.debug, "resolved %d %zu %d", t.nchannels, t.buffsize, t.debug);
    CHECK_OK(mlc_nccl_tuning_apply_to(&proc, &t));
    CHECK_STR(env("NCCL_ALGO"), "allreduce:tree");
    CHECK_STR(env("NCCL_MIN_NCHANNELS"), "(unset)"); /* channels go per communicator ... */
    CHECK_STR(env("NCCL_MAX_NCHANNELS"), "(unset)");
    mlc_nccl_tuning_config(t.nchannels, &nc);         /* ... in its ncclConfig_t */
    CHECK(nc.minCTAs == 4 && nc.maxCTAs == 4, "config channels %d..%d", nc.minCTAs, nc.maxCTAs);
    CHECK_STR(env("NCCL_BUFFSIZE"), "8388608");
    CHECK_STR(env("NCCL_DEBUG"), "INFO");
    /* Applying the same again is fine (a second communicator). */
    CHECK_OK(mlc_nccl_tuning_apply_to(&proc, &t));

    /* Older NCCL: the global spelling ... which differs from what the process's NCCL read. */
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "ring");
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 21800, &t));
    CHECK_STR(t.algo, "Ring");
    CHECK_ERR_MSG(mlc_nccl_tuning_apply_to(&proc, &t), MLC_ERR_CONFIG,
                  "MLC_ALGO_ALLREDUCE asks for NCCL_ALGO=Ring, but NCCL read NCCL_ALGO=allreduce:tree");
    /* ... and, before a process's first communicator, from a value already in the environment. */
    mlc_nccl_process_env_t fresh;
    memset(&fresh, 0, sizeof fresh);
    CHECK_ERR_MSG(mlc_nccl_tuning_apply_to(&fresh, &t), MLC_ERR_CONFIG, "NCCL_ALGO=Ring but the environment has NCCL_ALGO=allreduce:tree");
    CHECK(!fresh.fixed, "a refused first communicator fixed the process's values");
    /* A later communicator that asks for no buffer size and no algorithm gets the process's. */
    cfg.algo[MLC_COLL_ALLREDUCE][0] = '\0';
    unsetenv("MLC_NCCL_BUFFSIZE");
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_OK(mlc_nccl_tuning_apply_to(&proc, &t));
    /* One asking for another buffer size is refused, naming both. */
    setenv("MLC_NCCL_BUFFSIZE", "4M", 1);
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_ERR_MSG(mlc_nccl_tuning_apply_to(&proc, &t), MLC_ERR_CONFIG,
                  "NCCL_BUFFSIZE=4194304, but NCCL read NCCL_BUFFSIZE=8388608");
    CHECK_STR(env("NCCL_BUFFSIZE"), "8388608");
    unsetenv("MLC_NCCL_BUFFSIZE");

    /* The user's own NCCL_DEBUG stands. */
    clear_env();
    memset(&proc, 0, sizeof proc);
    setenv("NCCL_DEBUG", "WARN", 1);
    cfg.algo[MLC_COLL_ALLREDUCE][0] = '\0';
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_OK(mlc_nccl_tuning_apply_to(&proc, &t));
    CHECK_STR(env("NCCL_DEBUG"), "WARN");

    /* Malformed values name the variable. */
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "rabenseifner");
    CHECK_ERR_MSG(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_ALGO_ALLREDUCE=rabenseifner");
    cfg.algo[MLC_COLL_ALLREDUCE][0] = '\0';
    setenv("MLC_NCCL_NCHANNELS", "0", 1);
    CHECK_ERR_MSG(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='0'");
    setenv("MLC_NCCL_NCHANNELS", "four", 1);
    CHECK_ERR_MSG(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='four'");
    unsetenv("MLC_NCCL_NCHANNELS");
    setenv("MLC_NCCL_BUFFSIZE", "12Q", 1);
    CHECK_ERR_MSG(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_BUFFSIZE='12Q'");
    clear_env();
    return unit_result("nccl_tuning");
}
