/* SPDX-License-Identifier: BSD-3-Clause */
#include "backends/nccl/ncclapi.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "error.h"
#include "log.h"

#define REQ MLC_DYNSYM_REQUIRED
#define OPT MLC_DYNSYM_OPTIONAL
#define MLC_X_SYM(symbol, req, ret, params) {#symbol, offsetof(mlc_nccl_api_t, symbol), req},
static const mlc_dynsym_t nccl_syms[] = {MLC_NCCL_SYMBOLS(MLC_X_SYM)};
#undef MLC_X_SYM
#undef REQ
#undef OPT

static const char *const nccl_sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
static const char *const rccl_sonames[] = {"librccl.so.1", "librccl.so", NULL};

typedef struct flavor_desc {
    const char *name, *what;
    mlc_env_id_t env;
    const char *const *sonames;
} flavor_desc_t;
static const flavor_desc_t flavors[MLC_NCCL_FLAVOR_COUNT] = {
    [MLC_NCCL_FLAVOR_NCCL] = {"NCCL", "NCCL library", MLC_ENV_NCCL_LIB, nccl_sonames},
    [MLC_NCCL_FLAVOR_RCCL] = {"RCCL", "RCCL library", MLC_ENV_RCCL_LIB, rccl_sonames},
};

int mlc_nccl_version_code(int major, int minor, int patch)
{
    return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch
                                      : major * 10000 + minor * 100 + patch;
}

void mlc_nccl_version_text(int code, char *buf, size_t len)
{
    if (code <= 0) snprintf(buf, len, "unknown");
    else if (code >= 10000) snprintf(buf, len, "%d.%d.%d", code / 10000, (code % 10000) / 100, code % 100);
    else snprintf(buf, len, "%d.%d.%d", code / 1000, (code % 1000) / 100, code % 100);
}

mlc_status_t mlc_nccl_api_open(mlc_nccl_flavor_t flavor, const char *path, mlc_nccl_api_t *api,
                               char *why, size_t why_len)
{
    if (flavor < 0 || flavor >= MLC_NCCL_FLAVOR_COUNT) {
        snprintf(why, why_len, "unknown NCCL flavor %d", (int)flavor);
        return MLC_ERR_INVALID_ARG;
    }
    const flavor_desc_t *d = &flavors[flavor];
    const char *const only[] = {path, NULL};
    mlc_nccl_api_t tmp;
    memset(&tmp, 0, sizeof tmp);
    mlc_status_t st = mlc_dynlib_open(d->what, path ? MLC_ENV_COUNT : d->env, path ? only : d->sonames,
                                      nccl_syms, sizeof nccl_syms / sizeof nccl_syms[0], &tmp,
                                      sizeof tmp, &tmp.lib, why, why_len);
    if (st != MLC_SUCCESS) return st;
    tmp.name = d->name;
    int v = 0;
    mlc_ncclResult_t r = tmp.ncclGetVersion(&v);
    if (r != mlc_ncclSuccess) {
        snprintf(why, why_len, "%s: %s: ncclGetVersion failed: %s", d->what, tmp.lib.path,
                 tmp.ncclGetErrorString(r));
        mlc_dynlib_close(&tmp.lib);
        return MLC_ERR_UNAVAILABLE;
    }
    tmp.version = v;
    *api = tmp;
    return MLC_SUCCESS;
}

typedef struct api_cache {
    pthread_once_t once;
    mlc_status_t status;
    atomic_bool loaded;
    char why[768];
    mlc_nccl_api_t api;
} api_cache_t;
static api_cache_t caches[MLC_NCCL_FLAVOR_COUNT] = {
    [MLC_NCCL_FLAVOR_NCCL] = {.once = PTHREAD_ONCE_INIT},
    [MLC_NCCL_FLAVOR_RCCL] = {.once = PTHREAD_ONCE_INIT},
};

static void load_flavor(mlc_nccl_flavor_t f)
{
    api_cache_t *c = &caches[f];
    c->status = mlc_nccl_api_open(f, NULL, &c->api, c->why, sizeof c->why);
    if (c->status == MLC_SUCCESS) {
        char ver[32];
        mlc_nccl_version_text(c->api.version, ver, sizeof ver);
        MLC_INFO("%s %s loaded from %s", c->api.name, ver, c->api.lib.path);
        atomic_store(&c->loaded, true);
    }
}
static void load_nccl(void) { load_flavor(MLC_NCCL_FLAVOR_NCCL); }
static void load_rccl(void) { load_flavor(MLC_NCCL_FLAVOR_RCCL); }

mlc_status_t mlc_nccl_api_get(mlc_nccl_flavor_t flavor, const mlc_nccl_api_t **api)
{
    if (flavor < 0 || flavor >= MLC_NCCL_FLAVOR_COUNT)
        return mlc_error(MLC_ERR_INVALID_ARG, "unknown NCCL flavor %d", (int)flavor);
    api_cache_t *c = &caches[flavor];
    pthread_once(&c->once, flavor == MLC_NCCL_FLAVOR_NCCL ? load_nccl : load_rccl);
    if (c->status != MLC_SUCCESS) return mlc_error(c->status, "%s", c->why);
    *api = &c->api;
    return MLC_SUCCESS;
}

const mlc_nccl_api_t *mlc_nccl_api_peek(mlc_nccl_flavor_t flavor)
{
    if (flavor < 0 || flavor >= MLC_NCCL_FLAVOR_COUNT) return NULL;
    return atomic_load(&caches[flavor].loaded) ? &caches[flavor].api : NULL;
}
