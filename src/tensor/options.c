/* SPDX-License-Identifier: BSD-3-Clause */
/* Options of mlc_comm_create_from: strict parsing onto mlc_config_t fields. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "base/config.h"
#include "base/error.h"
#include "options.h"

typedef enum option_kind {
    OPTION_RANK,         /* integer >= 0 */
    OPTION_COUNT,        /* integer >= 1 */
    OPTION_STRING,
    OPTION_SECONDS,      /* number >= 0 */
    OPTION_LOG_LEVEL,    /* MLC_LOG_LEVEL_LIST name */
    OPTION_MEMORY,       /* MLC_MEMORY_LIST name */
    OPTION_THREAD_LEVEL, /* single, funneled, serialized, multiple (or 0..3) */
    OPTION_BOOL          /* 0 or 1 */
} option_kind_t;

typedef struct option_def {
    const char *key;
    option_kind_t kind;
    size_t offset; /* of the mlc_config_t field */
    const char *help;
} option_def_t;

static const option_def_t option_defs[] = {
#define MLC_X_DEF(key, kind, field, help) {key, OPTION_##kind, offsetof(mlc_config_t, field), help},
    MLC_OPTION_LIST(MLC_X_DEF)
#undef MLC_X_DEF
};
#define OPTION_COUNT_DEFS (sizeof option_defs / sizeof option_defs[0])

static const char *const log_level_names[] = {
#define MLC_X_NAME(name, str) str,
    MLC_LOG_LEVEL_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};
static const char *const memory_names[] = {
#define MLC_X_NAME(name, str) str,
    MLC_MEMORY_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};
static const char *const thread_level_names[] = {"single", "funneled", "serialized", "multiple"};
static const char *const coll_env_names[] = {
#define MLC_X_NAME(name, str, env) str,
    MLC_COLL_LIST(MLC_X_NAME)
#undef MLC_X_NAME
};

/* Index of value in names[0..n), or -1. */
static int name_index(const char *value, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(value, names[i]) == 0) return i;
    }
    return -1;
}

int mlc_options_algo_coll(const char *key)
{
    size_t plen = strlen(MLC_OPTION_ALGO_PREFIX);
    if (!key || strncmp(key, MLC_OPTION_ALGO_PREFIX, plen) != 0) return -1;
    return name_index(key + plen, coll_env_names, MLC_COLL_COUNT);
}

static mlc_status_t bad_value(const option_def_t *d, const char *value)
{
    return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: option \"%s\" = \"%s\" is not valid (%s)",
                     d->key, value, d->help);
}

static mlc_status_t parse_one(const option_def_t *d, const char *value, mlc_config_t *cfg)
{
    unsigned char *field = (unsigned char *)cfg + d->offset;
    long long i;
    double x;
    int idx;
    switch (d->kind) {
    case OPTION_RANK:
    case OPTION_COUNT:
        if (!mlc_parse_int(value, d->kind == OPTION_COUNT ? 1 : 0, 1 << 30, &i))
            return bad_value(d, value);
        *(int *)(void *)field = (int)i;
        return MLC_SUCCESS;
    case OPTION_STRING:
        *(const char **)(void *)field = value;
        return MLC_SUCCESS;
    case OPTION_SECONDS:
        if (!mlc_parse_double(value, 0.0, 1e9, &x)) return bad_value(d, value);
        *(double *)(void *)field = x;
        return MLC_SUCCESS;
    case OPTION_LOG_LEVEL:
        idx = name_index(value, log_level_names, MLC_LOG_LEVEL_COUNT);
        break;
    case OPTION_MEMORY:
        idx = name_index(value, memory_names, MLC_MEMORY_COUNT);
        break;
    case OPTION_THREAD_LEVEL:
        idx = name_index(value, thread_level_names, 4);
        if (idx < 0 && mlc_parse_int(value, 0, 3, &i)) idx = (int)i;
        break;
    case OPTION_BOOL:
        idx = mlc_parse_int(value, 0, 1, &i) ? (int)i : -1;
        break;
    default:
        return mlc_error(MLC_ERR_INTERNAL, "mlc_comm_create_from: option kind %d", (int)d->kind);
    }
    if (idx < 0) return bad_value(d, value);
    *(int *)(void *)field = idx;
    return MLC_SUCCESS;
}

static mlc_status_t unknown_key(const char *key)
{
    char known[512];
    size_t used = 0;
    known[0] = '\0';
    for (size_t k = 0; k < OPTION_COUNT_DEFS && used < sizeof known; k++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s, ", option_defs[k].key);
    if (used < sizeof known)
        snprintf(known + used, sizeof known - used, "%s<collective>", MLC_OPTION_ALGO_PREFIX);
    return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: unknown option \"%s\" (known: %s)", key,
                     known);
}

mlc_status_t mlc_options_apply(const mlc_option_t *options, size_t n, mlc_config_t *cfg,
                               size_t *algo_count)
{
    if (n > 0 && !options)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_create_from: options is NULL with %zu options",
                         n);
    bool seen[OPTION_COUNT_DEFS] = {false}, seen_algo[MLC_COLL_COUNT] = {false};
    mlc_config_t tmp = *cfg;
    size_t algos = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = options[i].key, *value = options[i].value;
        if (!key) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_create_from: options[%zu].key is NULL", i);
        if (!value)
            return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: option \"%s\" has no value (NULL)",
                             key);
        int coll = mlc_options_algo_coll(key);
        if (coll >= 0) {
            if (seen_algo[coll])
                return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: option \"%s\" is given twice",
                                 key);
            seen_algo[coll] = true;
            algos++;
            continue;
        }
        size_t k = 0;
        while (k < OPTION_COUNT_DEFS && strcmp(option_defs[k].key, key) != 0) k++;
        if (k == OPTION_COUNT_DEFS) return unknown_key(key);
        if (seen[k])
            return mlc_error(MLC_ERR_CONFIG, "mlc_comm_create_from: option \"%s\" is given twice", key);
        seen[k] = true;
        mlc_status_t st = parse_one(&option_defs[k], value, &tmp);
        if (st != MLC_SUCCESS) return st;
    }
    *cfg = tmp;
    *algo_count = algos;
    return MLC_SUCCESS;
}
