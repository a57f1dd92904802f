/* SPDX-License-Identifier: BSD-3-Clause */
#include "gpu/dynlib.h"
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "log.h"

static void copy_text(char *dst, size_t len, const char *src)
{
    if (len == 0) return;
    snprintf(dst, len, "%s", src ? src : "");
}

/* dlopen one name; on failure keep dlerror's text. */
static void *open_one(const char *name, char *err, size_t err_len)
{
    dlerror();
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) copy_text(err, err_len, dlerror());
    return h;
}

/* Resolve every symbol into `tmp`; on a missing required one, name it. */
static bool resolve_all(void *h, const char *file, const mlc_dynsym_t *syms, size_t nsyms,
                        unsigned char *tmp, char *why, size_t why_len)
{
    for (size_t i = 0; i < nsyms; i++) {
        dlerror();
        void *addr = dlsym(h, syms[i].name);
        if (!addr && syms[i].required) {
            const char *e = dlerror();
            /* A truncated message still names file and symbol first. */
            if (snprintf(why, why_len, "%s lacks required symbol %s (%s)", file, syms[i].name,
                         e ? e : "resolved to NULL") >= (int)why_len)
                why[why_len - 1] = '\0';
            return false;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
        memcpy(tmp + syms[i].offset, &addr, sizeof addr);
    }
    return true;
}

/* The file the loader really mapped (dlopen may have searched the path). */
static void real_path(void *h, const char *fallback, char *out, size_t len)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        copy_text(out, len, lm->l_name);
    else
        copy_text(out, len, fallback);
}

mlc_status_t mlc_dynlib_open(const char *what, mlc_env_id_t env_var, const char *const *candidates,
                             const mlc_dynsym_t *syms, size_t nsyms, void *table, size_t table_size,
                             mlc_dynlib_t *lib, char *why, size_t why_len)
{
    char err[1024] = "";
    const char *opened = NULL;
    void *h = NULL;
    const char *override = env_var != MLC_ENV_COUNT ? mlc_env_text(env_var) : NULL;
    const char *env_name = env_var != MLC_ENV_COUNT ? mlc_env_vars[env_var].name : NULL;

    if (override && override[0]) {
        h = open_one(override, err, sizeof err);
        if (!h) {
            snprintf(why, why_len, "%s: %s=%s cannot be opened: %s", what, env_name, override, err);
            return MLC_ERR_UNAVAILABLE;
        }
        opened = override;
    } else {
        char first_err[384] = "";
        char tried[256] = "";
        size_t used = 0;
        for (size_t i = 0; candidates[i] && !h; i++) {
            h = open_one(candidates[i], err, sizeof err);
            if (h) {
                opened = candidates[i];
                break;
            }
            if (!first_err[0]) copy_text(first_err, sizeof first_err, err);
            int n = snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "",
                             candidates[i]);
            if (n > 0 && (size_t)n < sizeof tried - used) used += (size_t)n;
        }
        if (!h) {
            snprintf(why, why_len, "%s: none of %s could be opened (%s)%s%s", what, tried, first_err,
                     env_name ? "; set " : "", env_name ? env_name : "");
            return MLC_ERR_UNAVAILABLE;
        }
    }

    unsigned char *tmp = calloc(1, table_size);
    if (!tmp) {
        dlclose(h);
        snprintf(why, why_len, "%s: out of memory for the symbol table", what);
        return MLC_ERR_NO_MEMORY;
    }
    char file[512];
    real_path(h, opened, file, sizeof file);
    if (!resolve_all(h, file, syms, nsyms, tmp, err, sizeof err)) {
        snprintf(why, why_len, "%s: %s", what, err);
        free(tmp);
        dlclose(h);
        return MLC_ERR_UNAVAILABLE;
    }
    memcpy(table, tmp, table_size);
    lib->handle = h;
    copy_text(lib->name, sizeof lib->name, opened);
    copy_text(lib->path, sizeof lib->path, file);
    free(tmp);
    MLC_DEBUG("%s loaded from %s", what, lib->path);
    return MLC_SUCCESS;
}

void mlc_dynlib_close(mlc_dynlib_t *lib)
{
    if (lib && lib->handle) {
        dlclose(lib->handle);
        lib->handle = NULL;
    }
}
