/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_config_resolve: caller > environment > default, strict parsing of each
 * variable, the launcher families, job ids, hash/diff. Every case starts
 * from an environment cleared of every variable the resolver reads.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "base/config.h"
#include "unit.h"

static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEPID", NULL};

static void clear_env(void)
{
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++) unsetenv(v->name);
#define X_UNSET(id, str, env) unsetenv("MLC_ALGO_" env);
    MLC_COLL_LIST(X_UNSET)
#undef X_UNSET
    for (int i = 0; launcher_vars[i] != NULL; i++) unsetenv(launcher_vars[i]);
}

static void set(const char *name, const char *value) { setenv(name, value, 1); }

/* Resolve from the environment (cfg may be NULL) and expect success. */
static mlc_cfg_t resolve_ok(const mlc_config_t *cfg, int line)
{
    mlc_cfg_t out;
    memset(&out, 0x5a, sizeof out);
    mlc_status_t st = mlc_config_resolve(cfg, &out);
    CHECK(st == MLC_SUCCESS, "line %d: resolve -> %s: %s", line, mlc_status_name(st),
          mlc_last_error());
    return out;
}
#define RESOLVE(cfg) resolve_ok(cfg, __LINE__)

/* Expect a failure naming `needle`, with the output untouched. */
#define RESOLVE_FAILS(cfg, code, needle)                                                  \
    do {                                                                                  \
        mlc_cfg_t out_, before_;                                                          \
        memset(&out_, 0x5a, sizeof out_);                                                 \
        before_ = out_;                                                                   \
        CHECK_ERR_MSG(mlc_config_resolve((cfg), &out_), (code), (needle));                \
        CHECK(memcmp(&out_, &before_, sizeof out_) == 0, "output written on failure");    \
    } while (0)

static void test_env_table(void)
{
    int n = 0;
#define X_COUNT(...) n++;
    MLC_ENV_LIST(X_COUNT)
#undef X_COUNT
    int m = 0;
    bool timeout_seen = false;
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++, m++) {
        CHECK(v->default_text != NULL && v->help != NULL && v->help[0], "%s has text", v->name);
        if (strcmp(v->name, "MLC_TIMEOUT") == 0) timeout_seen = strcmp(v->default_text, "600") == 0;
    }
    CHECK(m == n, "table has %d of %d variables", m, n);
    CHECK(timeout_seen, "MLC_TIMEOUT with default 600");

    /* Every mlc_config_t field after size/magic/version is one row's public field, at its offset. */
    static const struct {
        const char *field;
        size_t offset;
    } pub[] = {{"backend", offsetof(mlc_config_t, backend)},     {"rank", offsetof(mlc_config_t, rank)},
               {"world_size", offsetof(mlc_config_t, world_size)}, {"local_rank", offsetof(mlc_config_t, local_rank)},
               {"local_size", offsetof(mlc_config_t, local_size)}, {"job_id", offsetof(mlc_config_t, job_id)},
               {"timeout_s", offsetof(mlc_config_t, timeout_s)},   {"log_level", offsetof(mlc_config_t, log_level)},
               {"log_file", offsetof(mlc_config_t, log_file)},     {"profile", offsetof(mlc_config_t, profile)},
               {"memory", offsetof(mlc_config_t, memory)},
               {"mpi_thread_level", offsetof(mlc_config_t, mpi_thread_level)},
               {"cma", offsetof(mlc_config_t, cma)}};
    int npub = 0;
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++) {
        if (!v->public_field) continue;
        npub++;
        bool found = false;
        for (size_t k = 0; k < sizeof pub / sizeof pub[0]; k++)
            found |= strcmp(pub[k].field, v->public_field) == 0 && pub[k].offset == v->public_offset;
        CHECK(found, "%s: public field %s at %zu", v->name, v->public_field, v->public_offset);
    }
    CHECK(npub == (int)(sizeof pub / sizeof pub[0]), "%d public fields in the table", npub);

    /* The rows compared across ranks, and the accessors' ids. */
    int nagree = 0;
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++) nagree += v->agree;
    CHECK(nagree == 6 + MLC_COLL_COUNT, "%d rows must agree", nagree);
    CHECK(mlc_env_vars[MLC_ENV_STAGE_CHUNK].agree && mlc_env_vars[MLC_ENV_STAGES].agree && !mlc_env_vars[MLC_ENV_TIMEOUT].agree, "agree column");
    CHECK_STR(mlc_env_vars[MLC_ENV_PINNED_LIMIT].name, "MLC_PINNED_LIMIT");
    CHECK(mlc_env_default_size(MLC_ENV_PINNED_LIMIT) == (size_t)1 << 30, "pinned default");
    CHECK(mlc_env_default_seconds(MLC_ENV_TIMEOUT) == 600, "timeout default");
}

/* The typed accessors: default when unset, range from the row, errors naming the value. */
static void test_env_accessors(void)
{
    clear_env();
    size_t z = 1;
    bool is_set = true;
    long long x = 1;
    double d = 0;
    CHECK_OK(mlc_env_size(MLC_ENV_PINNED_LIMIT, &z, &is_set));
    CHECK(z == (size_t)1 << 30 && !is_set, "unset: default %zu", z);
    CHECK_OK(mlc_env_int(MLC_ENV_NCCL_NCHANNELS, &x, &is_set));
    CHECK(x == 0 && !is_set, "unset without default: 0");
    CHECK(mlc_env_text(MLC_ENV_FAULT_INIT) == NULL, "unset text");
    set("MLC_PINNED_LIMIT", "16M");
    CHECK_OK(mlc_env_size(MLC_ENV_PINNED_LIMIT, &z, &is_set));
    CHECK(z == 16u << 20 && is_set, "16M");
    set("MLC_PINNED_LIMIT", "");
    CHECK_OK(mlc_env_size(MLC_ENV_PINNED_LIMIT, &z, &is_set));
    CHECK(!is_set, "empty counts as unset");
    set("MLC_NCCL_NCHANNELS", "65");
    CHECK_ERR_MSG(mlc_env_int(MLC_ENV_NCCL_NCHANNELS, &x, NULL), MLC_ERR_CONFIG, "MLC_NCCL_NCHANNELS='65' is not an integer in [1, 64]");
    set("MLC_NCCL_BUFFSIZE", "1K");
    CHECK_ERR_MSG(mlc_env_size(MLC_ENV_NCCL_BUFFSIZE, &z, NULL), MLC_ERR_CONFIG, "from 4K to 2G");
    set("MLC_TIMEOUT", "7.5");
    CHECK_OK(mlc_env_seconds(MLC_ENV_TIMEOUT, &d, &is_set));
    CHECK(d == 7.5 && is_set, "seconds");
    CHECK_ERR_MSG(mlc_env_int(MLC_ENV_TIMEOUT, &x, NULL), MLC_ERR_INTERNAL, "MLC_TIMEOUT");
    clear_env();
}

static void test_defaults(void)
{
    clear_env();
    mlc_cfg_t c = RESOLVE(NULL);
    CHECK_STR(c.backend, "auto");
    CHECK(c.rank == 0 && c.world_size == 1 && c.local_rank == 0 && c.local_size == 1,
          "one-rank job: %d/%d %d/%d", c.rank, c.world_size, c.local_rank, c.local_size);
    CHECK_STR(c.rank_source, "default");
    CHECK_STR(c.job_id, "");
    CHECK(c.job_fd == -1, "job_fd %d", c.job_fd);
    CHECK(c.timeout_s == 600, "timeout %g", c.timeout_s);
    CHECK(c.log_level == MLC_LOG_WARN, "log level %d", c.log_level);
    CHECK_STR(c.log_file, "");
    CHECK_STR(c.profile, "");
    CHECK(c.memory == MLC_MEMORY_HOST, "memory %d", c.memory);
    CHECK(c.mpi_thread_level == 3, "thread level %d", c.mpi_thread_level);
    CHECK(c.cma == 1, "cma %d", c.cma);
    CHECK(c.stage_stores == MLC_STAGE_STORES_AUTO, "stage stores %d", c.stage_stores);
    for (int k = 0; k < MLC_COLL_COUNT; k++) CHECK_STR(c.algo[k], "");

    mlc_config_t init = MLC_CONFIG_INIT;
    mlc_cfg_t d = RESOLVE(&init);
    CHECK(memcmp(c.algo, d.algo, sizeof c.algo) == 0 && c.timeout_s == d.timeout_s &&
              strcmp(c.backend, d.backend) == 0 && d.rank == 0 && d.world_size == 1,
          "MLC_CONFIG_INIT means all unset");
}

static void test_env_values(void)
{
    clear_env();
    set("MLC_BACKEND", "SHM");
    set("MLC_JOB_ID", "job-7");
    set("MLC_JOB_FD", "5");
    set("MLC_TIMEOUT", "2.5");
    set("MLC_LOG_LEVEL", "debug");
    set("MLC_LOG_FILE", "/tmp/mlc-%h-%p.log");
    set("MLC_PROFILE", "trace-%r.json");
    set("MLC_MEMORY", "cuda");
    set("MLC_MPI_THREAD_LEVEL", "funneled");
    set("MLC_CMA", "0");
    set("MLC_ALGO_ALLREDUCE", "Ring");
    set("MLC_ALGO_BROADCAST", "auto");
    set("MLC_ALGO_ALLGATHERV", "recursive_doubling");
    set("MLC_STAGE_STORES", "streaming");
    mlc_cfg_t c = RESOLVE(NULL);
    CHECK_STR(c.backend, "shm");
    CHECK_STR(c.job_id, "job-7");
    CHECK(c.job_fd == 5, "job_fd %d", c.job_fd);
    CHECK(c.timeout_s == 2.5, "timeout");
    CHECK(c.log_level == MLC_LOG_DEBUG, "log level");
    CHECK_STR(c.log_file, "/tmp/mlc-%h-%p.log");
    CHECK_STR(c.profile, "trace-%r.json");
    CHECK(c.memory == MLC_MEMORY_CUDA, "memory");
    CHECK(c.mpi_thread_level == 1, "thread level %d", c.mpi_thread_level);
    CHECK(c.cma == 0, "cma");
    CHECK_STR(c.algo[MLC_COLL_ALLREDUCE], "ring");
    CHECK_STR(c.algo[MLC_COLL_BROADCAST], "");
    CHECK_STR(c.algo[MLC_COLL_ALLGATHERV], "recursive_doubling");
    CHECK(c.stage_stores == MLC_STAGE_STORES_STREAMING, "stage stores %d", c.stage_stores);

    set("MLC_MPI_THREAD_LEVEL", "2");
    set("MLC_TIMEOUT", "0");
    c = RESOLVE(NULL);
    CHECK(c.mpi_thread_level == 2, "numeric thread level");
    CHECK(c.timeout_s == 0, "timeout 0 = never");

    set("MLC_TIMEOUT", ""); /* empty counts as unset */
    c = RESOLVE(NULL);
    CHECK(c.timeout_s == 600, "empty MLC_TIMEOUT is unset: the default");
}

static void test_precedence(void)
{
    clear_env();
    set("MLC_BACKEND", "shm");
    set("MLC_TIMEOUT", "7");
    set("MLC_LOG_LEVEL", "trace");
    set("MLC_LOG_FILE", "env.log");
    set("MLC_PROFILE", "env.json");
    set("MLC_MEMORY", "rocm");
    set("MLC_MPI_THREAD_LEVEL", "single");
    set("MLC_CMA", "0");
    set("MLC_JOB_ID", "envjob");
    set("MLC_RANK", "1");
    set("MLC_WORLD_SIZE", "4");
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "threads";
    cfg.timeout_s = 5;
    cfg.log_level = MLC_LOG_ERROR;
    cfg.log_file = "cfg.log";
    cfg.profile = ""; /* explicitly off beats the environment */
    cfg.memory = MLC_MEMORY_AUTO;
    cfg.mpi_thread_level = 3;
    cfg.cma = 1;
    cfg.job_id = "cfgjob";
    cfg.rank = 2;
    mlc_cfg_t c = RESOLVE(&cfg);
    CHECK_STR(c.backend, "threads");
    CHECK(c.timeout_s == 5, "timeout");
    CHECK(c.log_level == MLC_LOG_ERROR, "log level");
    CHECK_STR(c.log_file, "cfg.log");
    CHECK_STR(c.profile, "");
    CHECK(c.memory == MLC_MEMORY_AUTO, "memory");
    CHECK(c.mpi_thread_level == 3, "thread level");
    CHECK(c.cma == 1, "cma");
    CHECK_STR(c.job_id, "cfgjob");
    CHECK(c.rank == 2 && c.world_size == 4, "rank from cfg, size from env: %d/%d", c.rank,
          c.world_size);
    CHECK_STR(c.rank_source, "config");

    /* Unset caller fields fall back to the environment. */
    mlc_config_t init = MLC_CONFIG_INIT;
    c = RESOLVE(&init);
    CHECK_STR(c.backend, "shm");
    CHECK(c.timeout_s == 7 && c.log_level == MLC_LOG_TRACE && c.memory == MLC_MEMORY_ROCM &&
              c.mpi_thread_level == 0 && c.cma == 0 && c.rank == 1,
          "environment values");
    CHECK_STR(c.profile, "env.json");
    CHECK_STR(c.job_id, "envjob");
    CHECK_STR(c.rank_source, "mlcomm-run");
}

static void test_malformed(void)
{
    static const struct {
        const char *var, *value;
    } cases[] = {
        {"MLC_TIMEOUT", "abc"},      {"MLC_TIMEOUT", "-1"},         {"MLC_TIMEOUT", "5s"},
        {"MLC_TIMEOUT", "nan"},      {"MLC_TIMEOUT", "inf"},        {"MLC_TIMEOUT", " 5"},
        {"MLC_LOG_LEVEL", "loud"},   {"MLC_BACKEND", "foo"},        {"MLC_MEMORY", "gpu"},
        {"MLC_MPI_THREAD_LEVEL", "7"}, {"MLC_MPI_THREAD_LEVEL", "high"}, {"MLC_CMA", "2"},
        {"MLC_CMA", "yes"},          {"MLC_JOB_FD", "x"},           {"MLC_JOB_FD", "-1"},
        {"MLC_ALGO_ALLREDUCE", "ring-2"}, {"MLC_ALGO_BARRIER", "a b"},
        {"MLC_ALGO_SCATTERV", "0123456789012345678901234567890123"}, {"MLC_STAGE_STORES", "nt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        set(cases[i].var, cases[i].value);
        char needle[128];
        snprintf(needle, sizeof needle, "%s='%s'", cases[i].var, cases[i].value);
        RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, needle);
    }
    /* rank variables */
    static const struct {
        const char *rank, *size;
    } ranks[] = {{"-3", "4"}, {"1", "0"}, {"x", "4"}, {"1", "4x"}, {"1", "99999999999"}};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        clear_env();
        set("MLC_RANK", ranks[i].rank);
        set("MLC_WORLD_SIZE", ranks[i].size);
        mlc_cfg_t out;
        mlc_status_t st = mlc_config_resolve(NULL, &out);
        CHECK(st == MLC_ERR_CONFIG, "MLC_RANK=%s MLC_WORLD_SIZE=%s -> %s", ranks[i].rank,
              ranks[i].size, mlc_status_name(st));
        CHECK(strstr(mlc_last_error(), "MLC_RANK='-3'") || strstr(mlc_last_error(), "='"),
              "message names the value: %s", mlc_last_error());
    }
    clear_env();
    set("MLC_RANK", "-3");
    set("MLC_WORLD_SIZE", "4");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_RANK='-3'");

    clear_env();
    char longname[400];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    set("MLC_LOG_FILE", longname);
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_LOG_FILE");
    clear_env();
    set("MLC_PROFILE", longname);
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_PROFILE");

    clear_env();
    set("MLC_RANK", "4");
    set("MLC_WORLD_SIZE", "4");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_RANK");
    clear_env();
    set("MLC_RANK", "1");
    set("MLC_WORLD_SIZE", "4");
    set("MLC_LOCAL_RANK", "2");
    set("MLC_LOCAL_SIZE", "2");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_LOCAL_RANK");
    set("MLC_LOCAL_RANK", "0");
    set("MLC_LOCAL_SIZE", "8");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "MLC_LOCAL_SIZE");
}

static void test_caller_struct(void)
{
    clear_env();
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.magic = 0x1234;
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "magic");
    cfg = (mlc_config_t)MLC_CONFIG_INIT;
    cfg.size = sizeof cfg - 8;
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "size");
    cfg = (mlc_config_t)MLC_CONFIG_INIT;
    cfg.version = 0;
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "version");

    /* A newer caller with a larger struct is fine. */
    struct {
        mlc_config_t base;
        int newer_field;
    } big = {MLC_CONFIG_INIT, 42};
    big.base.size = sizeof big;
    big.base.rank = 0;
    mlc_cfg_t c = RESOLVE(&big.base);
    CHECK(c.rank == 0, "bigger struct");

    static const struct {
        const char *field;
        int which, value;
    } bad[] = {{"cfg->rank", 0, -5},       {"cfg->world_size", 1, 0}, {"cfg->log_level", 2, 9},
               {"cfg->memory", 3, 7},      {"cfg->cma", 4, 3},       {"cfg->mpi_thread_level", 5, 4},
               {"cfg->local_size", 6, -2}, {"cfg->rank", 0, 3}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg = (mlc_config_t)MLC_CONFIG_INIT;
        int *fields[] = {&cfg.rank, &cfg.world_size, &cfg.log_level, &cfg.memory,
                         &cfg.cma,  &cfg.mpi_thread_level, &cfg.local_size};
        *fields[bad[i].which] = bad[i].value;
        RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, bad[i].field);
    }
    cfg = (mlc_config_t)MLC_CONFIG_INIT;
    cfg.timeout_s = NAN;
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "cfg->timeout_s");
    cfg.timeout_s = INFINITY;
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "cfg->timeout_s");
    cfg.timeout_s = 1e300; /* finite, but past MLC_TIMEOUT's range: bindings convert it */
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "0..1000000000");
    cfg = (mlc_config_t)MLC_CONFIG_INIT;
    cfg.backend = "gloo";
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "backend 'gloo' is not one of");
    RESOLVE_FAILS(&cfg, MLC_ERR_INVALID_ARG, "threads");
    CHECK_ERR_MSG(mlc_config_resolve(NULL, NULL), MLC_ERR_INVALID_ARG, "NULL");
}

typedef struct family_case {
    const char *source;
    const char *vars[8][2];
    int rank, size, lrank, lsize;
} family_case_t;

static void test_families(void)
{
    static const family_case_t ok[] = {
        {"mlcomm-run",
         {{"MLC_RANK", "3"}, {"MLC_WORLD_SIZE", "8"}, {"MLC_LOCAL_RANK", "1"}, {"MLC_LOCAL_SIZE", "2"}},
         3, 8, 1, 2},
        {"mlcomm-run", {{"MLC_RANK", "3"}, {"MLC_WORLD_SIZE", "8"}}, 3, 8, 3, 8},
        {"torchrun",
         {{"RANK", "5"}, {"WORLD_SIZE", "6"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "3"}},
         5, 6, 2, 3},
        {"open-mpi",
         {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
         1, 2, 1, 2},
        {"mpich",
         {{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}},
         2, 4, 0, 2},
        {"slurm",
         {{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"},
          {"SLURM_NTASKS_PER_NODE", "4"}},
         7, 8, 3, 4},
        {"slurm",
         {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"},
          {"SLURM_TASKS_PER_NODE", "2(x3),1"}},
         4, 7, 1, 2},
        /* mlcomm-run's variables beat a launcher's */
        {"mlcomm-run",
         {{"MLC_RANK", "0"}, {"MLC_WORLD_SIZE", "2"}, {"RANK", "5"}, {"WORLD_SIZE", "6"},
          {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "3"}},
         0, 2, 0, 2},
        /* torchrun before Open MPI */
        {"torchrun",
         {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
          {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "3"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}},
         1, 2, 1, 2},
        /* a partial torchrun set loses to a complete Open MPI set */
        {"open-mpi",
         {{"LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}},
         2, 3, 2, 3},
        /* an salloc shell: allocation sizes but no task id is a one-rank job */
        {"default", {{"SLURM_NTASKS", "8"}, {"SLURM_TASKS_PER_NODE", "8"}, {"WORLD_SIZE", "4"}},
         0, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        clear_env();
        for (int k = 0; k < 8 && ok[i].vars[k][0]; k++) set(ok[i].vars[k][0], ok[i].vars[k][1]);
        mlc_cfg_t c = RESOLVE(NULL);
        CHECK(c.rank == ok[i].rank && c.world_size == ok[i].size && c.local_rank == ok[i].lrank &&
                  c.local_size == ok[i].lsize,
              "case %zu (%s): %d/%d %d/%d", i, ok[i].source, c.rank, c.world_size, c.local_rank,
              c.local_size);
        CHECK_STR(c.rank_source, ok[i].source);
    }

    static const struct {
        const char *vars[4][2];
        const char *missing;
    } partial[] = {
        {{{"RANK", "1"}}, "WORLD_SIZE"},
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}}, "LOCAL_RANK"},
        {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, "LOCAL_WORLD_SIZE"},
        {{{"OMPI_COMM_WORLD_RANK", "1"}}, "OMPI_COMM_WORLD_SIZE"},
        {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}, "MPI_LOCALRANKID"},
        {{{"SLURM_PROCID", "0"}}, "SLURM_NTASKS"},
        {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}},
         "SLURM_TASKS_PER_NODE"},
        {{{"MLC_RANK", "1"}}, "MLC_WORLD_SIZE"},
        {{{"MLC_WORLD_SIZE", "2"}}, "MLC_RANK"},
        {{{"MLC_RANK", "1"}, {"MLC_WORLD_SIZE", "2"}, {"MLC_LOCAL_RANK", "1"}}, "MLC_LOCAL_SIZE"},
        {{{"MLC_RANK", "1"}, {"MLC_WORLD_SIZE", "2"}, {"MLC_LOCAL_SIZE", "1"}}, "MLC_LOCAL_RANK"},
    };
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        clear_env();
        for (int k = 0; k < 4 && partial[i].vars[k][0]; k++)
            set(partial[i].vars[k][0], partial[i].vars[k][1]);
        char needle[64];
        snprintf(needle, sizeof needle, "%s is not", partial[i].missing);
        RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, needle);
    }

    /* consistency across the set */
    clear_env();
    set("RANK", "2"), set("WORLD_SIZE", "2"), set("LOCAL_RANK", "0"), set("LOCAL_WORLD_SIZE", "1");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "RANK");
    clear_env();
    set("SLURM_PROCID", "0"), set("SLURM_NTASKS", "2"), set("SLURM_LOCALID", "0");
    set("SLURM_TASKS_PER_NODE", "(x2)");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "SLURM_TASKS_PER_NODE='(x2)'");
    /* a stray malformed variable of an absent family is ignored */
    clear_env();
    set("WORLD_SIZE", "lots");
    mlc_cfg_t c = RESOLVE(NULL);
    CHECK(c.world_size == 1, "absent family not parsed");
    /* ... but a present family is parsed strictly */
    set("RANK", "0");
    RESOLVE_FAILS(NULL, MLC_ERR_CONFIG, "WORLD_SIZE='lots'");
}

static void test_job_id(void)
{
    static const struct {
        const char *vars[3][2];
        const char *want;
    } cases[] = {
        {{{"MLC_JOB_ID", "mine"}, {"TORCHELASTIC_RUN_ID", "te"}}, "mine"},
        {{{"TORCHELASTIC_RUN_ID", "te-1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}, "te-1"},
        {{{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500"}},
         "node1_29500"},
        {{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"PMIX_NAMESPACE", "ns"}},
         "10.0.0.1_29500"},
        {{{"MASTER_ADDR", "10.0.0.1"}, {"PMIX_NAMESPACE", "prterun-host-123@1"}},
         "prterun-host-123_1"},
        {{{"OMPI_MCA_ess_base_jobid", "4242"}, {"SLURM_JOB_ID", "9"}}, "4242"},
        {{{"SLURM_JOB_ID", "991"}, {"SLURM_STEP_ID", "3"}}, "991.3"},
        {{{"SLURM_JOB_ID", "991"}, {"SLURM_STEPID", "4"}}, "991.4"},
        {{{"SLURM_JOB_ID", "991"}}, "991"},
        {{{"MLC_JOB_ID", "a/b c:d"}}, "a_b_c_d"},
        {{{"MASTER_PORT", "1"}}, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        for (int k = 0; k < 3 && cases[i].vars[k][0]; k++) set(cases[i].vars[k][0], cases[i].vars[k][1]);
        mlc_cfg_t c = RESOLVE(NULL);
        CHECK(strcmp(c.job_id, cases[i].want) == 0, "case %zu: job id '%s', expected '%s'", i,
              c.job_id, cases[i].want);
    }
    /* Long ids are cut to 64 characters but stay distinct. */
    clear_env();
    char a[200], b[200];
    memset(a, 'x', sizeof a - 1), a[sizeof a - 1] = '\0';
    memcpy(b, a, sizeof a), b[150] = 'y';
    set("MLC_JOB_ID", a);
    mlc_cfg_t ca = RESOLVE(NULL);
    set("MLC_JOB_ID", b);
    mlc_cfg_t cb = RESOLVE(NULL);
    CHECK(strlen(ca.job_id) == 64 && strlen(cb.job_id) == 64, "cut to 64: %zu",
          strlen(ca.job_id));
    CHECK(strcmp(ca.job_id, cb.job_id) != 0, "distinct after cutting");
    CHECK(strncmp(ca.job_id, a, 40) == 0, "keeps the start");
    set("MLC_JOB_ID", "x@y");
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.job_id = "caller id!";
    mlc_cfg_t cc = RESOLVE(&cfg);
    CHECK_STR(cc.job_id, "caller_id_");
}

static void test_hash_diff(void)
{
    clear_env();
    set("MLC_WORLD_SIZE", "4"), set("MLC_RANK", "0");
    mlc_cfg_t a = RESOLVE(NULL);
    set("MLC_RANK", "3");
    set("MLC_TIMEOUT", "9"); /* not collective-relevant */
    mlc_cfg_t b = RESOLVE(NULL);
    CHECK(mlc_config_hash(&a) == mlc_config_hash(&b), "rank and timeout are not hashed");
    CHECK(mlc_config_diff(&a, &b) == NULL, "no difference");

    set("MLC_ALGO_ALLREDUCE", "ring");
    b = RESOLVE(NULL);
    CHECK(mlc_config_hash(&a) != mlc_config_hash(&b), "algo hashed");
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_ALGO_ALLREDUCE");
    set("MLC_ALGO_ALLREDUCE", "auto");
    b = RESOLVE(NULL);
    CHECK(mlc_config_diff(&a, &b) == NULL, "auto is the same as unset");

    set("MLC_ALGO_ALLREDUCE", "");
    set("MLC_ALGO_GATHERV", "linear");
    b = RESOLVE(NULL);
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_ALGO_GATHERV");

    unsetenv("MLC_ALGO_GATHERV");
    set("MLC_WORLD_SIZE", "5");
    b = RESOLVE(NULL);
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_WORLD_SIZE");
    CHECK(mlc_config_hash(&a) != mlc_config_hash(&b), "world size hashed");

    set("MLC_WORLD_SIZE", "4");
    set("MLC_BACKEND", "shm");
    b = RESOLVE(NULL);
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_BACKEND");
    CHECK(mlc_config_hash(&a) != mlc_config_hash(&b), "backend hashed");

    /* Every variable the diff names is hashed too (init compares hashes first). */
    unsetenv("MLC_BACKEND");
    set("MLC_STAGE_CHUNK", "8K");
    b = RESOLVE(NULL);
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_STAGE_CHUNK");
    CHECK(mlc_config_hash(&a) != mlc_config_hash(&b), "staging chunk hashed");
    unsetenv("MLC_STAGE_CHUNK");
    set("MLC_MEMORY", "auto");
    b = RESOLVE(NULL);
    CHECK_STR(mlc_config_diff(&a, &b), "MLC_MEMORY");
    CHECK(mlc_config_hash(&a) != mlc_config_hash(&b), "memory kind hashed");
    unsetenv("MLC_MEMORY");

    /* Both values, as the init message shows them. */
    set("MLC_ALGO_ALLREDUCE", "ring");
    b = RESOLVE(NULL);
    char va[64], vb[64];
    CHECK_STR(mlc_config_diff_text(&a, &b, va, vb, sizeof va), "MLC_ALGO_ALLREDUCE");
    CHECK_STR(va, "unset (auto)");
    CHECK_STR(vb, "'ring'");
    unsetenv("MLC_ALGO_ALLREDUCE");
}

int main(void)
{
    test_env_table();
    test_env_accessors();
    test_defaults();
    test_env_values();
    test_precedence();
    test_malformed();
    test_caller_struct();
    test_families();
    test_job_id();
    test_hash_diff();
    clear_env();
    return unit_result("unit_config");
}
