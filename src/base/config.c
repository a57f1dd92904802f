/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlc_config_resolve: caller field > environment variable > default, and the
 * mlc_env_* accessors over the table MLC_ENV_LIST (config.h). This file is
 * the only place in the library that reads or writes the environment
 * (.ci/env-reads.sh checks). Parsing is strict: a malformed value fails
 * with MLC_ERR_CONFIG naming the variable and the value, never silently
 * becomes a default. An empty variable counts as unset.
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend_names.h" /* MLC_BACKEND_LIST: the backend names */
#include "config.h"
#include "error.h"
#include "jobstate.h"

/* ---- names ------------------------------------------------------------------ */
#define MLC_X_STR(id) #id,
static const char *const mlc_backend_names[] = {"auto", MLC_BACKEND_LIST(MLC_X_STR) NULL};
#undef MLC_X_STR
#define MLC_X_BACKEND_TEXT(id) ", " #id
#define MLC_BACKEND_NAMES_TEXT "auto" MLC_BACKEND_LIST(MLC_X_BACKEND_TEXT)

#define MLC_X_STR(id, str) str,
static const char *const mlc_log_level_names[] = {MLC_LOG_LEVEL_LIST(MLC_X_STR) NULL};
static const char *const mlc_memory_names[] = {MLC_MEMORY_LIST(MLC_X_STR) NULL};
/* MPI thread levels in MPI_THREAD_* order: the value is the index. */
#define MLC_THREAD_LEVEL_LIST(X) X(0, "single") X(1, "funneled") X(2, "serialized") X(3, "multiple")
static const char *const mlc_thread_level_names[] = {MLC_THREAD_LEVEL_LIST(MLC_X_STR) NULL};
#undef MLC_X_STR
static const char *const mlc_cuda_aware_names[] = {"auto", "0", "1", NULL};
static const char *const mlc_stages_names[] = {"auto", "on", "off", NULL}; /* MLC_STAGES_AUTO, _ON, _OFF */
static const char *const mlc_stage_stores_names[] = {"auto", "plain", "streaming", NULL}; /* MLC_STAGE_STORES_* */

/* ---- the table ------------------------------------------------------------- */
#define MLC_PUB(field) #field, offsetof(mlc_config_t, field)
#define MLC_NOPUB NULL, 0
#define MLC_AGREE(field) true, offsetof(mlc_cfg_t, field), sizeof(((mlc_cfg_t *)0)->field)
#define MLC_LOCAL false, 0, 0
const mlc_env_var_t mlc_env_vars[] = {
#define MLC_X_ROW(id, name, type, def, lo, hi, choices, pub, agree, help) \
    [MLC_ENV_##id] = {name, def, help, MLC_ENV_TYPE_##type, lo, hi, choices, pub, agree},
    MLC_ENV_LIST(MLC_X_ROW)
#undef MLC_X_ROW
    [MLC_ENV_COUNT] = {NULL, NULL, NULL, MLC_ENV_TYPE_STR, 0, 0, NULL, NULL, 0, false, 0, 0}};
#undef MLC_PUB
#undef MLC_NOPUB
#undef MLC_AGREE
#undef MLC_LOCAL

/* The MLC_ALGO_<COLL> row of a collective kind (the table lists them in kind order). */
static mlc_env_id_t mlc_algo_var(int coll) { return (mlc_env_id_t)(MLC_ENV_ALGO_BROADCAST + coll); }

/*
 * Launcher variable families after mlcomm-run's own MLC_* set, in the order
 * they are tried: X(rank_source, rank, world size, local rank, local size).
 * Slurm's local size is derived (see mlc_slurm_local_size).
 */
#define MLC_RANK_FAMILY_LIST(X)                                                          \
    X("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")                \
    X("open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",                        \
      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")                        \
    X("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")             \
    X("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL)

typedef struct mlc_rank_family {
    const char *source;
    const char *var[4]; /* rank, world size, local rank, local size */
} mlc_rank_family_t;

static const mlc_rank_family_t mlc_rank_families[] = {
#define MLC_X_ROW(src, r, s, lr, ls) {src, {r, s, lr, ls}},
    MLC_RANK_FAMILY_LIST(MLC_X_ROW)
#undef MLC_X_ROW
};
#define MLC_NFAMILIES (sizeof mlc_rank_families / sizeof mlc_rank_families[0])

/* ---- small helpers ------------------------------------------------------- */

/* The value of an environment variable; an empty value counts as unset. */
static const char *mlc_env(const char *name)
{
    const char *v = getenv(name);
    return (v != NULL && v[0] != '\0') ? v : NULL;
}

/* Index of `value` in a NULL-terminated name table (case-insensitive), or -1. */
static int mlc_choice(const char *value, const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++)
        if (strcasecmp(value, names[i]) == 0) return i;
    return -1;
}

/* "a, b, c" from a NULL-terminated name table. */
static const char *mlc_choices_text(const char *const *names, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] != NULL && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", names[i]);
    return buf;
}

/* Copy a string into a fixed field; false when it does not fit. */
static bool mlc_copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len) return false;
    memcpy(dst, src, n + 1);
    return true;
}

static uint64_t mlc_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define MLC_FNV_OFFSET 0xcbf29ce484222325ull

/* ---- typed access to one row ---------------------------------------------- */

_Static_assert(MLC_ENV_ALGO_SENDRECV - MLC_ENV_ALGO_BROADCAST == MLC_COLL_COUNT - 1,
               "one MLC_ALGO_<COLL> row per collective kind, in kind order");

const char *mlc_env_text(mlc_env_id_t id)
{
    if ((int)id < 0 || id >= MLC_ENV_COUNT) return NULL;
    return mlc_env(mlc_env_vars[id].name);
}

/* "64", "4K", "1G": a byte count as the variables accept it. */
static const char *mlc_size_text(long long n, char *buf, size_t len)
{
    static const char suffix[] = "KMGT";
    int k = -1;
    while (n >= 1024 && n % 1024 == 0 && k < 3) n /= 1024, k++;
    if (k < 0) snprintf(buf, len, "%lld", n);
    else snprintf(buf, len, "%lld%c", n, suffix[k]);
    return buf;
}

/* MLC_ERR_CONFIG naming the variable, its value and what the row accepts. */
static mlc_status_t mlc_env_bad(const mlc_env_var_t *v, const char *text)
{
    char lo[32], hi[32], names[256];
    switch (v->type) {
    case MLC_ENV_TYPE_INT:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not an integer in [%lld, %lld]", v->name, text, v->lo, v->hi);
    case MLC_ENV_TYPE_BOOL:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not 0 or 1", v->name, text);
    case MLC_ENV_TYPE_SIZE:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not a size from %s to %s bytes (K/M/G suffixes allowed)",
                         v->name, text, mlc_size_text(v->lo, lo, sizeof lo), mlc_size_text(v->hi, hi, sizeof hi));
    case MLC_ENV_TYPE_SECONDS:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not a number of seconds in [%lld, %g] (0 = never)", v->name,
                         text, v->lo, (double)v->hi);
    case MLC_ENV_TYPE_CHOICE:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not one of: %s", v->name, text,
                         v->choices ? mlc_choices_text(v->choices, names, sizeof names) : "?");
    default:
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is malformed", v->name, text);
    }
}

/* Parse `text` (the value, or the row's default when NULL) by the row's type. */
static mlc_status_t mlc_env_parse(mlc_env_id_t id, mlc_env_type_t want, long long *i, size_t *z, double *d,
                                  bool *set)
{
    if ((int)id < 0 || id >= MLC_ENV_COUNT)
        return mlc_error(MLC_ERR_INTERNAL, "environment variable #%d is not in the table", (int)id);
    const mlc_env_var_t *v = &mlc_env_vars[id];
    bool is_int = v->type == MLC_ENV_TYPE_INT || v->type == MLC_ENV_TYPE_BOOL;
    if (want == MLC_ENV_TYPE_INT ? !is_int : v->type != want)
        return mlc_error(MLC_ERR_INTERNAL, "%s is not read as that type", v->name);
    const char *text = mlc_env(v->name);
    if (set) *set = text != NULL;
    if (text == NULL) text = v->default_text;
    if (text[0] == '\0') { /* unset, no default */
        if (i) *i = 0;
        if (z) *z = 0;
        if (d) *d = 0;
        return MLC_SUCCESS;
    }
    switch (want) {
    case MLC_ENV_TYPE_INT:
        if (!mlc_parse_int(text, v->lo, v->hi, i)) return mlc_env_bad(v, text);
        return MLC_SUCCESS;
    case MLC_ENV_TYPE_SIZE:
        if (!mlc_parse_size(text, z) || *z < (size_t)v->lo || *z > (size_t)v->hi) return mlc_env_bad(v, text);
        return MLC_SUCCESS;
    default:
        if (!mlc_parse_double(text, (double)v->lo, (double)v->hi, d)) return mlc_env_bad(v, text);
        return MLC_SUCCESS;
    }
}

mlc_status_t mlc_env_int(mlc_env_id_t id, long long *out, bool *set)
{
    return mlc_env_parse(id, MLC_ENV_TYPE_INT, out, NULL, NULL, set);
}

mlc_status_t mlc_env_size(mlc_env_id_t id, size_t *out, bool *set)
{
    return mlc_env_parse(id, MLC_ENV_TYPE_SIZE, NULL, out, NULL, set);
}

mlc_status_t mlc_env_seconds(mlc_env_id_t id, double *out, bool *set)
{
    return mlc_env_parse(id, MLC_ENV_TYPE_SECONDS, NULL, NULL, out, set);
}

size_t mlc_env_default_size(mlc_env_id_t id)
{
    size_t z = 0;
    if (id < MLC_ENV_COUNT && mlc_env_vars[id].type == MLC_ENV_TYPE_SIZE) mlc_parse_size(mlc_env_vars[id].default_text, &z);
    return z;
}

double mlc_env_default_seconds(mlc_env_id_t id)
{
    double d = 0;
    if (id < MLC_ENV_COUNT && mlc_env_vars[id].type == MLC_ENV_TYPE_SECONDS)
        mlc_parse_double(mlc_env_vars[id].default_text, 0.0, 1e18, &d);
    return d;
}

mlc_status_t mlc_env_export(mlc_env_id_t id, const char *value)
{
    if ((int)id < 0 || id >= MLC_ENV_COUNT || value == NULL)
        return mlc_error(MLC_ERR_INTERNAL, "mlc_env_export: bad variable #%d", (int)id);
    if (setenv(mlc_env_vars[id].name, value, 0) != 0)
        return mlc_error(MLC_ERR_SYSTEM, "setenv(%s): out of memory", mlc_env_vars[id].name);
    return MLC_SUCCESS;
}

/* An integer variable in [lo, INT_MAX]; *found = false when unset. */
static mlc_status_t mlc_launcher_int(const char *name, long long lo, int *out, bool *found)
{
    const char *v = mlc_env(name);
    *found = v != NULL;
    if (v == NULL) return MLC_SUCCESS;
    long long x;
    if (!mlc_parse_int(v, lo, INT_MAX, &x))
        return mlc_error(MLC_ERR_CONFIG, "%s='%s' is not an integer in [%lld, %d]", name, v, lo,
                         INT_MAX);
    *out = (int)x;
    return MLC_SUCCESS;
}

/* ---- rank, size and their local counterparts --------------------------- */

enum { MLC_R_RANK, MLC_R_SIZE, MLC_R_LRANK, MLC_R_LSIZE, MLC_R_COUNT };
static const long long mlc_rank_lo[MLC_R_COUNT] = {0, 1, 0, 1};

typedef struct mlc_rank_env {
    int value[MLC_R_COUNT];
    bool found[MLC_R_COUNT];
    const char *var[MLC_R_COUNT]; /* where each value came from */
    const char *source;           /* NULL: no launcher variables */
} mlc_rank_env_t;

/* Slurm's tasks on this node: SLURM_NTASKS_PER_NODE, else the first number
 * of SLURM_TASKS_PER_NODE ("2(x3),1" -> 2). */
static mlc_status_t mlc_slurm_local_size(mlc_rank_env_t *re)
{
    bool found;
    mlc_status_t st = mlc_launcher_int("SLURM_NTASKS_PER_NODE", 1, &re->value[MLC_R_LSIZE], &found);
    if (st != MLC_SUCCESS || found) {
        re->found[MLC_R_LSIZE] = found;
        re->var[MLC_R_LSIZE] = "SLURM_NTASKS_PER_NODE";
        return st;
    }
    const char *v = mlc_env("SLURM_TASKS_PER_NODE");
    re->var[MLC_R_LSIZE] = "SLURM_TASKS_PER_NODE";
    if (v == NULL) return MLC_SUCCESS;
    char first[32];
    size_t n = strspn(v, "0123456789");
    long long x;
    bool tail_ok = v[n] == '\0' || v[n] == '(' || v[n] == ',';
    if (n == 0 || n >= sizeof first || !tail_ok)
        return mlc_error(MLC_ERR_CONFIG,
                         "SLURM_TASKS_PER_NODE='%s' does not start with a task count", v);
    memcpy(first, v, n);
    first[n] = '\0';
    if (!mlc_parse_int(first, 1, INT_MAX, &x))
        return mlc_error(MLC_ERR_CONFIG, "SLURM_TASKS_PER_NODE='%s' has a bad task count", v);
    re->value[MLC_R_LSIZE] = (int)x;
    re->found[MLC_R_LSIZE] = true;
    return MLC_SUCCESS;
}

/*
 * Read one family's variables. A family is present when its rank or
 * local-rank variable is set (mlcomm-run's: any of its four); world sizes
 * alone are allocation facts, e.g. SLURM_NTASKS in an salloc shell. Only a
 * present family is parsed, so a stray variable of an unused launcher does
 * not fail the job.
 */
static mlc_status_t mlc_read_family(const char *source, const char *const var[MLC_R_COUNT],
                                    bool any_var_present, mlc_rank_env_t *re)
{
    memset(re, 0, sizeof *re);
    bool present = mlc_env(var[MLC_R_RANK]) != NULL || mlc_env(var[MLC_R_LRANK]) != NULL;
    if (any_var_present)
        for (int i = 0; i < MLC_R_COUNT; i++) present |= var[i] != NULL && mlc_env(var[i]) != NULL;
    if (!present) return MLC_SUCCESS;
    re->source = source;
    for (int i = 0; i < MLC_R_COUNT; i++) {
        re->var[i] = var[i];
        if (var[i] == NULL) continue;
        mlc_status_t st = mlc_launcher_int(var[i], mlc_rank_lo[i], &re->value[i], &re->found[i]);
        if (st != MLC_SUCCESS) return st;
    }
    if (var[MLC_R_LSIZE] == NULL) return mlc_slurm_local_size(re);
    return MLC_SUCCESS;
}

/* First required variable missing from a family, or NULL when complete. */
static const char *mlc_family_missing(const mlc_rank_env_t *re)
{
    for (int i = 0; i < MLC_R_COUNT; i++)
        if (!re->found[i]) return re->var[i];
    return NULL;
}

/*
 * Rank variables from the environment: mlcomm-run's MLC_* set if any of it is
 * set (MLC_RANK and MLC_WORLD_SIZE required; MLC_LOCAL_RANK/SIZE both or
 * neither), else the first complete launcher family; a family that is only
 * partly set is an error when no complete one exists.
 */
static mlc_status_t mlc_rank_from_env(mlc_rank_env_t *out)
{
    const char *const mlc_vars[MLC_R_COUNT] = {
        mlc_env_vars[MLC_ENV_RANK].name, mlc_env_vars[MLC_ENV_WORLD_SIZE].name,
        mlc_env_vars[MLC_ENV_LOCAL_RANK].name, mlc_env_vars[MLC_ENV_LOCAL_SIZE].name};
    mlc_rank_env_t re;
    mlc_status_t st = mlc_read_family("mlcomm-run", mlc_vars, true, &re);
    if (st != MLC_SUCCESS) return st;
    if (re.source != NULL) {
        for (int i = MLC_R_RANK; i <= MLC_R_SIZE; i++)
            if (!re.found[i])
                return mlc_error(MLC_ERR_CONFIG,
                                 "%s is not set but other MLC_RANK/MLC_WORLD_SIZE/MLC_LOCAL_* "
                                 "variables are: set %s too",
                                 re.var[i], re.var[i]);
        if (re.found[MLC_R_LRANK] != re.found[MLC_R_LSIZE]) {
            int missing = re.found[MLC_R_LRANK] ? MLC_R_LSIZE : MLC_R_LRANK;
            int other = missing == MLC_R_LSIZE ? MLC_R_LRANK : MLC_R_LSIZE;
            return mlc_error(MLC_ERR_CONFIG, "%s is set but %s is not: set both or neither",
                             re.var[other], re.var[missing]);
        }
        *out = re;
        return MLC_SUCCESS;
    }

    const mlc_rank_family_t *partial = NULL;
    mlc_rank_env_t partial_env;
    for (size_t f = 0; f < MLC_NFAMILIES; f++) {
        st = mlc_read_family(mlc_rank_families[f].source, mlc_rank_families[f].var, false, &re);
        if (st != MLC_SUCCESS) return st;
        if (re.source == NULL) continue;
        if (mlc_family_missing(&re) == NULL) {
            *out = re;
            return MLC_SUCCESS;
        }
        if (partial == NULL) {
            partial = &mlc_rank_families[f];
            partial_env = re;
        }
    }
    if (partial != NULL) {
        const char *missing = mlc_family_missing(&partial_env);
        return mlc_error(MLC_ERR_CONFIG,
                         "%s variables are only partly set: %s is set but %s is not (set "
                         "MLC_RANK and MLC_WORLD_SIZE to override)",
                         partial->source,
                         partial_env.found[MLC_R_RANK] ? partial->var[MLC_R_RANK]
                                                       : partial->var[MLC_R_LRANK],
                         missing);
    }
    memset(out, 0, sizeof *out);
    return MLC_SUCCESS;
}

/*
 * "rank 2 from OMPI_COMM_WORLD_RANK, size 4 from OMPI_COMM_WORLD_SIZE
 * (open-mpi's variables)", or, when nothing named them, the variables that
 * were looked for: several processes started without a launcher each
 * become a 1-rank job, and this says why.
 */
static void mlc_describe_rank_origin(mlc_cfg_t *r, const char *const from[MLC_R_COUNT],
                                     const char *source)
{
    char *b = r->rank_origin;
    size_t len = sizeof r->rank_origin;
    int n = snprintf(b, len, "rank %d from %s, size %d from %s", r->rank, from[MLC_R_RANK],
                     r->world_size, from[MLC_R_SIZE]);
    if (n < 0 || (size_t)n >= len) return;
    if (source != NULL) {
        snprintf(b + n, len - (size_t)n, " (%s's variables)", source);
        return;
    }
    if (strcmp(from[MLC_R_RANK], "the default") != 0 || strcmp(from[MLC_R_SIZE], "the default") != 0)
        return;
    size_t used = (size_t)n;
    n = snprintf(b + used, len - used, ": no launcher's variables are set (MLC_RANK");
    for (size_t f = 0; f < MLC_NFAMILIES && n > 0 && (used += (size_t)n) < len; f++)
        n = snprintf(b + used, len - used, ", %s", mlc_rank_families[f].var[MLC_R_RANK]);
    if (n > 0 && (used += (size_t)n) < len) snprintf(b + used, len - used, ")");
}

static mlc_status_t mlc_resolve_ranks(const mlc_config_t *cfg, mlc_cfg_t *r)
{
    static const char *const fields[MLC_R_COUNT] = {"cfg->rank", "cfg->world_size",
                                                    "cfg->local_rank", "cfg->local_size"};
    mlc_rank_env_t re;
    mlc_status_t st = mlc_rank_from_env(&re);
    if (st != MLC_SUCCESS) return st;

    int caller[MLC_R_COUNT] = {MLC_UNSET, MLC_UNSET, MLC_UNSET, MLC_UNSET};
    if (cfg != NULL) {
        caller[MLC_R_RANK] = cfg->rank;
        caller[MLC_R_SIZE] = cfg->world_size;
        caller[MLC_R_LRANK] = cfg->local_rank;
        caller[MLC_R_LSIZE] = cfg->local_size;
    }
    int v[MLC_R_COUNT];
    const char *from[MLC_R_COUNT];
    bool env_used = false;
    for (int i = 0; i < MLC_R_COUNT; i++) {
        if (caller[i] != MLC_UNSET) {
            if (caller[i] < mlc_rank_lo[i])
                return mlc_error(MLC_ERR_INVALID_ARG, "%s is %d (must be >= %lld or MLC_UNSET)",
                                 fields[i], caller[i], mlc_rank_lo[i]);
            v[i] = caller[i];
            from[i] = fields[i];
        } else if (re.found[i]) {
            v[i] = re.value[i];
            from[i] = re.var[i];
            env_used = true;
        } else {
            v[i] = MLC_UNSET;
            from[i] = "the default";
        }
    }
    /* Defaults: a one-rank job; without local information, one host. */
    if (v[MLC_R_RANK] == MLC_UNSET) v[MLC_R_RANK] = 0;
    if (v[MLC_R_SIZE] == MLC_UNSET) v[MLC_R_SIZE] = 1;
    if (v[MLC_R_LRANK] == MLC_UNSET) {
        v[MLC_R_LRANK] = v[MLC_R_RANK];
        from[MLC_R_LRANK] = from[MLC_R_RANK];
    }
    if (v[MLC_R_LSIZE] == MLC_UNSET) {
        v[MLC_R_LSIZE] = v[MLC_R_SIZE];
        from[MLC_R_LSIZE] = from[MLC_R_SIZE];
    }
    mlc_status_t bad = env_used ? MLC_ERR_CONFIG : MLC_ERR_INVALID_ARG;
    if (v[MLC_R_RANK] >= v[MLC_R_SIZE])
        return mlc_error(bad, "rank %d (from %s) is not below the world size %d (from %s)",
                         v[MLC_R_RANK], from[MLC_R_RANK], v[MLC_R_SIZE], from[MLC_R_SIZE]);
    if (v[MLC_R_LRANK] >= v[MLC_R_LSIZE])
        return mlc_error(bad, "local rank %d (from %s) is not below the local size %d (from %s)",
                         v[MLC_R_LRANK], from[MLC_R_LRANK], v[MLC_R_LSIZE], from[MLC_R_LSIZE]);
    if (v[MLC_R_LSIZE] > v[MLC_R_SIZE])
        return mlc_error(bad, "local size %d (from %s) is larger than the world size %d (from %s)",
                         v[MLC_R_LSIZE], from[MLC_R_LSIZE], v[MLC_R_SIZE], from[MLC_R_SIZE]);
    r->rank = v[MLC_R_RANK];
    r->world_size = v[MLC_R_SIZE];
    r->local_rank = v[MLC_R_LRANK];
    r->local_size = v[MLC_R_LSIZE];
    if (caller[MLC_R_RANK] != MLC_UNSET)
        r->rank_source = "config";
    else
        r->rank_source = re.source != NULL ? re.source : "default";
    mlc_describe_rank_origin(r, from, re.source);
    return MLC_SUCCESS;
}

/* ---- job id ------------------------------------------------------------- */

#define MLC_JOB_ID_MAX 64

/* Keep [A-Za-z0-9_.-] (others become '_'); an id longer than 64 keeps its
 * first 47 characters plus '-' and a 16-digit hash of the whole. */
static void mlc_sanitize_job_id(const char *src, char *dst)
{
    size_t n = strlen(src);
    size_t keep = n <= MLC_JOB_ID_MAX ? n : MLC_JOB_ID_MAX - 17;
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (isalnum(c) && c < 0x80) || c == '_' || c == '.' || c == '-' ? (char)c : '_';
    }
    if (n > MLC_JOB_ID_MAX)
        snprintf(dst + keep, 18, "-%016llx",
                 (unsigned long long)mlc_fnv1a(MLC_FNV_OFFSET, src, n));
    else
        dst[keep] = '\0';
}

/* The job id from the environment: ours, else the launcher's ("" if none). */
static void mlc_job_id_from_env(char *buf, size_t len)
{
    const char *v;
    buf[0] = '\0';
    if ((v = mlc_env_text(MLC_ENV_JOB_ID)) != NULL) {
        snprintf(buf, len, "%s", v);
    } else if ((v = mlc_env("TORCHELASTIC_RUN_ID")) != NULL && strcmp(v, "none") != 0) {
        /* torchrun's default run id is "none": shared by unrelated jobs */
        snprintf(buf, len, "%s", v);
    } else if (mlc_env_text(MLC_ENV_MASTER_ADDR) != NULL && mlc_env_text(MLC_ENV_MASTER_PORT) != NULL) {
        snprintf(buf, len, "%s:%s", mlc_env_text(MLC_ENV_MASTER_ADDR), mlc_env_text(MLC_ENV_MASTER_PORT));
    } else if ((v = mlc_env("PMIX_NAMESPACE")) != NULL) {
        snprintf(buf, len, "%s", v);
    } else if ((v = mlc_env("OMPI_MCA_ess_base_jobid")) != NULL) {
        snprintf(buf, len, "%s", v);
    } else if ((v = mlc_env("SLURM_JOB_ID")) != NULL) {
        const char *step = mlc_env("SLURM_STEP_ID");
        if (step == NULL) step = mlc_env("SLURM_STEPID");
        if (step != NULL)
            snprintf(buf, len, "%s.%s", v, step);
        else
            snprintf(buf, len, "%s", v);
    }
}

/* A launcher that names no job (MPICH's Hydra sets only PMI_RANK/PMI_SIZE):
 * its ranks on this host are children of one process (hydra_pmi_proxy,
 * slurmstepd, torchrun's agent), whose pid and start time name the job. The
 * shm rendezvous adds an unguessable nonce (docs/ENGINE.md "Segment"). */
static void mlc_job_id_from_parent(const char *source, char *buf, size_t len)
{
    int ppid = (int)getppid();
    unsigned long long start = (unsigned long long)mlc_proc_start_time(ppid);
    if (ppid > 1 && start != 0) snprintf(buf, len, "%s-p%d-%llu", source, ppid, start);
}

/* ---- the other variables -------------------------------------------------- */

/* A CHOICE row, from the caller's int field or the environment; the default is the row's. */
static mlc_status_t mlc_resolve_choice(int caller, mlc_env_id_t id, int *out)
{
    const mlc_env_var_t *row = &mlc_env_vars[id];
    const char *const *names = row->choices;
    int count = 0;
    while (names[count] != NULL) count++;
    char choices[256];
    if (caller != MLC_UNSET) {
        if (caller < 0 || caller >= count)
            return mlc_error(MLC_ERR_INVALID_ARG, "cfg->%s is %d (expected 0..%d: %s, or MLC_UNSET)",
                             row->public_field, caller, count - 1,
                             mlc_choices_text(names, choices, sizeof choices));
        *out = caller;
        return MLC_SUCCESS;
    }
    const char *v = mlc_env_text(id);
    int i = mlc_choice(v != NULL ? v : row->default_text, names);
    if (i < 0) return mlc_env_bad(row, v != NULL ? v : row->default_text);
    *out = i;
    return MLC_SUCCESS;
}

static mlc_status_t mlc_resolve_backend(const mlc_config_t *cfg, mlc_cfg_t *r)
{
    const char *v = cfg != NULL && cfg->backend != NULL && cfg->backend[0] != '\0' ? cfg->backend
                                                                                   : NULL;
    bool from_caller = v != NULL;
    if (v == NULL) v = mlc_env_text(MLC_ENV_BACKEND);
    if (v == NULL) v = mlc_env_vars[MLC_ENV_BACKEND].default_text;
    int i = mlc_choice(v, mlc_backend_names);
    if (i < 0) {
        if (from_caller)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "backend '%s' is not one of: " MLC_BACKEND_NAMES_TEXT, v);
        return mlc_error(MLC_ERR_CONFIG, "MLC_BACKEND='%s' is not one of: " MLC_BACKEND_NAMES_TEXT,
                         v);
    }
    mlc_copy(r->backend, sizeof r->backend, mlc_backend_names[i]);
    return MLC_SUCCESS;
}

static mlc_status_t mlc_resolve_timeout(const mlc_config_t *cfg, mlc_cfg_t *r)
{
    if (cfg != NULL && !(cfg->timeout_s < 0)) { /* NaN is not "unset" */
        const mlc_env_var_t *row = &mlc_env_vars[MLC_ENV_TIMEOUT]; /* the same range as MLC_TIMEOUT */
        if (!isfinite(cfg->timeout_s) || cfg->timeout_s > (double)row->hi)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "cfg->timeout_s is %g (seconds 0..%lld, 0 = never, < 0 = unset)",
                             cfg->timeout_s, row->hi);
        r->timeout_s = cfg->timeout_s;
        return MLC_SUCCESS;
    }
    return mlc_env_seconds(MLC_ENV_TIMEOUT, &r->timeout_s, NULL);
}

/* A file name from the caller (NULL = unset; "" = explicitly none) or the environment. */
static mlc_status_t mlc_resolve_path(const char *caller, mlc_env_id_t id, char *dst, size_t len)
{
    const mlc_env_var_t *row = &mlc_env_vars[id];
    const char *v = caller != NULL ? caller : mlc_env_text(id);
    if (v == NULL) v = row->default_text;
    if (!mlc_copy(dst, len, v)) {
        if (caller != NULL)
            return mlc_error(MLC_ERR_INVALID_ARG, "cfg->%s '%.64s...' is longer than %zu characters",
                             row->public_field, v, len - 1);
        return mlc_error(MLC_ERR_CONFIG, "%s='%.64s...' is longer than %zu characters", row->name, v,
                         len - 1);
    }
    return MLC_SUCCESS;
}

/* A BOOL row, from the caller's int field (MLC_UNSET = unset) or the environment. */
static mlc_status_t mlc_resolve_bool(int caller, mlc_env_id_t id, int *out)
{
    if (caller != MLC_UNSET) {
        if (caller != 0 && caller != 1)
            return mlc_error(MLC_ERR_INVALID_ARG, "cfg->%s is %d (expected 0, 1 or MLC_UNSET)",
                             mlc_env_vars[id].public_field, caller);
        *out = caller;
        return MLC_SUCCESS;
    }
    long long x;
    mlc_status_t st = mlc_env_int(id, &x, NULL);
    if (st == MLC_SUCCESS) *out = (int)x;
    return st;
}

/* MLC_DEVICE: "auto" (or unset) is -1; else a device number (checked against the count at init). */
static mlc_status_t mlc_resolve_device(int *out)
{
    const char *v = mlc_env_text(MLC_ENV_DEVICE);
    long long x;
    *out = -1;
    if (v == NULL || strcmp(v, "auto") == 0) return MLC_SUCCESS;
    if (!mlc_parse_int(v, 0, INT_MAX, &x))
        return mlc_error(MLC_ERR_CONFIG, "MLC_DEVICE='%s' is not 'auto' or a device number (0, 1, ...)", v);
    *out = (int)x;
    return MLC_SUCCESS;
}

static mlc_status_t mlc_resolve_misc(const mlc_config_t *cfg, mlc_cfg_t *r)
{
    bool found;
    long long x;
    mlc_status_t st = mlc_env_int(MLC_ENV_JOB_FD, &x, &found);
    if (st != MLC_SUCCESS) return st;
    r->job_fd = found ? (int)x : -1;

    st = mlc_resolve_choice(cfg ? cfg->log_level : MLC_UNSET, MLC_ENV_LOG_LEVEL, &r->log_level);
    if (st != MLC_SUCCESS) return st;
    st = mlc_resolve_choice(cfg ? cfg->memory : MLC_UNSET, MLC_ENV_MEMORY, &r->memory);
    if (st != MLC_SUCCESS) return st;

    /* MPI thread level: a name or its number */
    int caller_tl = cfg ? cfg->mpi_thread_level : MLC_UNSET;
    const mlc_env_var_t *tl_row = &mlc_env_vars[MLC_ENV_MPI_THREAD_LEVEL];
    const char *tl = mlc_env_text(MLC_ENV_MPI_THREAD_LEVEL);
    if (caller_tl == MLC_UNSET && tl != NULL && mlc_parse_int(tl, tl_row->lo, tl_row->hi, &x))
        r->mpi_thread_level = (int)x;
    else {
        st = mlc_resolve_choice(caller_tl, MLC_ENV_MPI_THREAD_LEVEL, &r->mpi_thread_level);
        if (st != MLC_SUCCESS) return st;
    }

    /* Staging chunk for device buffers on host backends: 0 = unset (the default applies). */
    st = mlc_env_size(MLC_ENV_STAGE_CHUNK, &r->stage_chunk, &found);
    if (st != MLC_SUCCESS) return st;
    if (!found) r->stage_chunk = 0;

    /* CUDA-aware MPI: auto (-1: ask the library), 0 or 1 */
    int ca;
    st = mlc_resolve_choice(MLC_UNSET, MLC_ENV_MPI_CUDA_AWARE, &ca);
    if (st != MLC_SUCCESS) return st;
    r->mpi_cuda_aware = ca - 1;

    if ((st = mlc_resolve_bool(MLC_UNSET, MLC_ENV_CUDA_IPC, &r->cuda_ipc)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_device(&r->device)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_bool(MLC_UNSET, MLC_ENV_CHECK, &r->check)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_bool(cfg ? cfg->cma : MLC_UNSET, MLC_ENV_CMA, &r->cma)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_choice(MLC_UNSET, MLC_ENV_STAGES, &r->stages)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_choice(MLC_UNSET, MLC_ENV_STAGE_STORES, &r->stage_stores)) != MLC_SUCCESS) return st;

    st = mlc_resolve_path(cfg ? cfg->log_file : NULL, MLC_ENV_LOG_FILE, r->log_file, sizeof r->log_file);
    if (st != MLC_SUCCESS) return st;
    return mlc_resolve_path(cfg ? cfg->profile : NULL, MLC_ENV_PROFILE, r->profile, sizeof r->profile);
}

/* MLC_ALGO_<COLL>: a lowercase name of [a-z0-9_]; "auto" means no override. */
static mlc_status_t mlc_resolve_algos(mlc_cfg_t *r)
{
    for (int c = 0; c < MLC_COLL_COUNT; c++) {
        const char *var = mlc_env_vars[mlc_algo_var(c)].name;
        r->algo[c][0] = '\0';
        const char *v = mlc_env_text(mlc_algo_var(c));
        if (v == NULL) continue;
        size_t n = strlen(v);
        if (n >= sizeof r->algo[c])
            return mlc_error(MLC_ERR_CONFIG, "%s='%s' is longer than %zu characters",
                             var, v, sizeof r->algo[c] - 1);
        for (size_t i = 0; i < n; i++) {
            char ch = (char)tolower((unsigned char)v[i]);
            if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'))
                return mlc_error(MLC_ERR_CONFIG,
                                 "%s='%s' is not an algorithm name (letters, digits, '_')",
                                 var, v);
            r->algo[c][i] = ch;
        }
        r->algo[c][n] = '\0';
        if (strcmp(r->algo[c], "auto") == 0) r->algo[c][0] = '\0';
    }
    return MLC_SUCCESS;
}

static mlc_status_t mlc_check_caller_config(const mlc_config_t *cfg)
{
    if (cfg->magic != MLC_CONFIG_MAGIC)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "cfg->magic is 0x%08x, not MLC_CONFIG_MAGIC 0x%08x: initialize the "
                         "config with MLC_CONFIG_INIT",
                         (unsigned)cfg->magic, (unsigned)MLC_CONFIG_MAGIC);
    if (cfg->size < sizeof(mlc_config_t))
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "cfg->size is %zu, smaller than this library's mlc_config_t (%zu bytes): "
                         "initialize the config with MLC_CONFIG_INIT",
                         cfg->size, sizeof(mlc_config_t));
    /* A newer caller's fields would be silently ignored here: refuse them. */
    if (cfg->version != MLC_CONFIG_VERSION)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "cfg->version is %u, this library understands version %u: initialize the "
                         "config with MLC_CONFIG_INIT and build against this library's mlcomm.h",
                         (unsigned)cfg->version, (unsigned)MLC_CONFIG_VERSION);
    return MLC_SUCCESS;
}

/* launchers: whether ranks come from the environment (else the caller's
 * arguments name them and no launcher variable is read). */
static mlc_status_t resolve(const mlc_config_t *cfg, mlc_cfg_t *out, bool launchers)
{
    if (out == NULL) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_config_resolve: out is NULL");
    mlc_status_t st;
    if (cfg != NULL && (st = mlc_check_caller_config(cfg)) != MLC_SUCCESS) return st;

    mlc_cfg_t r;
    memset(&r, 0, sizeof r);
    if ((st = mlc_resolve_backend(cfg, &r)) != MLC_SUCCESS) return st;
    if (launchers && (st = mlc_resolve_ranks(cfg, &r)) != MLC_SUCCESS) return st;

    char raw[1024];
    if (cfg != NULL && cfg->job_id != NULL && cfg->job_id[0] != '\0')
        snprintf(raw, sizeof raw, "%s", cfg->job_id);
    else
        mlc_job_id_from_env(raw, sizeof raw);
    if (raw[0] == '\0' && r.rank_source != NULL &&
        (strcmp(r.rank_source, "mpich") == 0 || strcmp(r.rank_source, "slurm") == 0 ||
         strcmp(r.rank_source, "torchrun") == 0 || strcmp(r.rank_source, "open-mpi") == 0))
        mlc_job_id_from_parent(r.rank_source, raw, sizeof raw);
    mlc_sanitize_job_id(raw, r.job_id);

    if ((st = mlc_resolve_timeout(cfg, &r)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_misc(cfg, &r)) != MLC_SUCCESS) return st;
    if ((st = mlc_resolve_algos(&r)) != MLC_SUCCESS) return st;
    *out = r;
    return MLC_SUCCESS;
}

mlc_status_t mlc_config_resolve(const mlc_config_t *cfg, mlc_cfg_t *out) { return resolve(cfg, out, true); }

mlc_status_t mlc_config_resolve_given_ranks(const mlc_config_t *cfg, mlc_cfg_t *out)
{
    return resolve(cfg, out, false);
}

/* ---- agreement across ranks ------------------------------------------------ */
/*
 * The collective-relevant settings are the table's AGREE rows: the backend,
 * the world size, the memory kind and staging chunk (they shape every staged
 * collective), MLC_CHECK (it adds collectives to every call) and every
 * MLC_ALGO_<COLL> (the algorithm a collective runs). Hash, diff and the
 * message text all walk those rows, reading the resolved mlc_cfg_t field.
 */

/* The field's value as the message shows it: 'name', a number, or "unset (...)". */
static void mlc_agree_text(const mlc_cfg_t *c, const mlc_env_var_t *v, char *buf, size_t len)
{
    const char *field = (const char *)c + v->agree_offset;
    int i;
    size_t z;
    switch (v->type) {
    case MLC_ENV_TYPE_INT:
    case MLC_ENV_TYPE_BOOL:
        memcpy(&i, field, sizeof i);
        snprintf(buf, len, "%d", i);
        break;
    case MLC_ENV_TYPE_CHOICE:
        if (v->agree_size != sizeof(int)) { /* the name itself (backend) */
            snprintf(buf, len, "'%.*s'", (int)strnlen(field, v->agree_size), field);
            break;
        }
        memcpy(&i, field, sizeof i);
        int count = 0;
        while (v->choices[count] != NULL) count++;
        if (i >= 0 && i < count) snprintf(buf, len, "'%s'", v->choices[i]);
        else snprintf(buf, len, "%d", i);
        break;
    case MLC_ENV_TYPE_SIZE:
        memcpy(&z, field, sizeof z);
        if (z) snprintf(buf, len, "%zu", z);
        else snprintf(buf, len, "unset (default)");
        break;
    default: { /* a name, "" = auto */
        size_t n = strnlen(field, v->agree_size);
        if (n) snprintf(buf, len, "'%.*s'", (int)n, field);
        else snprintf(buf, len, "unset (auto)");
    }
    }
}

uint64_t mlc_config_hash(const mlc_cfg_t *cfg)
{
    uint64_t h = MLC_FNV_OFFSET;
    char text[64];
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++) {
        if (!v->agree) continue;
        mlc_agree_text(cfg, v, text, sizeof text);
        h = mlc_fnv1a(h, text, strlen(text) + 1);
    }
    return h;
}

const char *mlc_config_diff(const mlc_cfg_t *a, const mlc_cfg_t *b)
{
    return mlc_config_diff_text(a, b, NULL, NULL, 0);
}

const char *mlc_config_diff_text(const mlc_cfg_t *a, const mlc_cfg_t *b, char *a_text, char *b_text,
                                 size_t len)
{
    char ta[64], tb[64];
    for (const mlc_env_var_t *v = mlc_env_vars; v->name != NULL; v++) {
        if (!v->agree) continue;
        mlc_agree_text(a, v, ta, sizeof ta);
        mlc_agree_text(b, v, tb, sizeof tb);
        if (strcmp(ta, tb) == 0) continue;
        if (a_text && len) snprintf(a_text, len, "%s", ta);
        if (b_text && len) snprintf(b_text, len, "%s", tb);
        return v->name;
    }
    return NULL;
}
