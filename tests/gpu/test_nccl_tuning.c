/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The seed's RCCLConfig mapped onto NCCL_* variables: MLC_ALGO_ALLREDUCE,
 * MLC_NCCL_NCHANNELS, MLC_NCCL_BUFFSIZE, MLC_LOG_LEVEL; malformed values and
 * conflicts with variables the user already set are CONFIG errors.
 */
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "backends/nccl/nccl_impl.h"
#include "config.h"

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
    CHECK_OK(mlc_config_resolve(NULL, &cfg));
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK(!t.algo[0] && t.nchannels == 0 && t.buffsize == 0 && !t.debug, "defaults changed something");
    CHECK_OK(mlc_nccl_tuning_apply(&t));
    CHECK(!getenv("NCCL_ALGO") && !getenv("NCCL_DEBUG") && !getenv("NCCL_BUFFSIZE"), "exported defaults");

    /* Everything set. */
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "tree");
    cfg.log_level = MLC_LOG_DEBUG;
    setenv("MLC_NCCL_NCHANNELS", "4", 1);
    setenv("MLC_NCCL_BUFFSIZE", "8M", 1);
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_STR(t.algo, "allreduce:tree");
    CHECK(t.nchannels == 4 && t.buffsize == 8u << 20 && t.debug, "resolved %d %zu %d", t.nchannels, t.buffsize, t.debug);
    CHECK_OK(mlc_nccl_tuning_apply(&t));
    CHECK_STR(env("NCCL_ALGO"), "allreduce:tree");
    CHECK_STR(env("NCCL_MIN_NCHANNELS"), "4");
    CHECK_STR(env("NCCL_MAX_NCHANNELS"), "4");
    CHECK_STR(env("NCCL_BUFFSIZE"), "8388608");
    CHECK_STR(env("NCCL_DEBUG"), "INFO");
    /* Applying the same again is fine (a second communicator). */
    CHECK_OK(mlc_nccl_tuning_apply(&t));

    /* Older NCCL: the global spelling. */
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "ring");
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 21800, &t));
    CHECK_STR(t.algo, "Ring");
    /* ... which conflicts with what is exported now. */
    CHECK_ERR(mlc_nccl_tuning_apply(&t), MLC_ERR_CONFIG, "NCCL_ALGO=Ring but the environment has NCCL_ALGO=allreduce:tree");

    /* The user's own NCCL_DEBUG stands. */
    clear_env();
    setenv("NCCL_DEBUG", "WARN", 1);
    cfg.algo[MLC_COLL_ALLREDUCE][0] = '\0';
    CHECK_OK(mlc_nccl_tuning_resolve(&cfg, 22809, &t));
    CHECK_OK(mlc_nccl_tuning_apply(&t));
    CHECK_STR(env("NCCL_DEBUG"), "WARN");

    /* Malformed values name the variable. */
    snprintf(cfg.algo[MLC_COLL_ALLREDUCE], sizeof cfg.algo[0], "rabenseifner");
    CHECK_ERR(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_ALGO_ALLREDUCE=rabenseifner");
    cfg.algo[MLC_COLL_ALLREDUCE][0] = '\0';
    setenv("MLC_NCCL_NCHANNELS", "0", 1);
    CHECK_ERR(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='0'");
    setenv("MLC_NCCL_NCHANNELS", "four", 1);
    CHECK_ERR(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='four'");
    unsetenv("MLC_NCCL_NCHANNELS");
    setenv("MLC_NCCL_BUFFSIZE", "12Q", 1);
    CHECK_ERR(mlc_nccl_tuning_resolve(&cfg, 22809, &t), MLC_ERR_CONFIG, "MLC_NCCL_BUFFSIZE='12Q'");
    clear_env();
    return unit_result("nccl_tuning");
}
