/* SPDX-License-Identifier: BSD-3-Clause */
#include "gpurt.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "base/error.h"
#include "gpurt_syms.h"
#include "base/log.h"

#define REQ MLC_DYNSYM_REQUIRED
#define OPT MLC_DYNSYM_OPTIONAL
#define MLC_X_SYM(symbol, field, req) {#symbol, offsetof(mlc_gpurt_t, field), req},
static const mlc_dynsym_t cudart_syms[] = {MLC_CUDART_SYMBOLS(MLC_X_SYM)};
static const mlc_dynsym_t hiprt_syms[] = {MLC_HIPRT_SYMBOLS(MLC_X_SYM)};
#undef MLC_X_SYM
#undef REQ
#undef OPT

static const char *const cudart_sonames[] = {"libcudart.so.13", "libcudart.so.12",
                                             "libcudart.so.11", "libcudart.so", NULL};
static const char *const hiprt_sonames[] = {"libamdhip64.so.6", "libamdhip64.so.5",
                                            "libamdhip64.so", NULL};

typedef struct gpurt_desc {
    const char *name, *prefix, *what;
    mlc_env_id_t env;
    const char *const *sonames;
    const mlc_dynsym_t *syms;
    size_t nsyms;
} gpurt_desc_t;

static const gpurt_desc_t descs[MLC_GPU_KIND_COUNT] = {
    [MLC_GPU_CUDA] = {"CUDA", "cuda", "CUDA runtime", MLC_ENV_CUDART_LIB, cudart_sonames, cudart_syms,
                      sizeof cudart_syms / sizeof cudart_syms[0]},
    [MLC_GPU_HIP] = {"HIP", "hip", "HIP runtime", MLC_ENV_HIPRT_LIB, hiprt_sonames, hiprt_syms,
                     sizeof hiprt_syms / sizeof hiprt_syms[0]},
};

const char *mlc_gpu_kind_name(mlc_gpu_kind_t kind)
{
    return kind >= 0 && kind < MLC_GPU_KIND_COUNT ? descs[kind].name : "unknown";
}

const char *mlc_gpu_mem_name(mlc_gpu_mem_t m)
{
    switch (m) {
#define MLC_X_CASE(name, text) \
    case name:                 \
        return text;
        MLC_GPU_MEM_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    }
    return "unknown memory";
}

mlc_status_t mlc_gpurt_open(mlc_gpu_kind_t kind, const char *path, mlc_gpurt_t *rt, char *why,
                            size_t why_len)
{
    if (kind < 0 || kind >= MLC_GPU_KIND_COUNT) {
        snprintf(why, why_len, "unknown GPU runtime kind %d", (int)kind);
        return MLC_ERR_INVALID_ARG;
    }
    const gpurt_desc_t *d = &descs[kind];
    const char *const only[] = {path, NULL};
    mlc_gpurt_t tmp;
    /*
     * A runtime newer than the driver loads but answers "insufficient driver"
     * to everything (libcudart.so.13 needs R580; an R550 node has .so.12 too):
     * then the next soname is tried; if none loads, the first such one is kept
     * so its error is what the caller sees.
     */
    int start = 0, too_new = -1;
    for (;;) {
        memset(&tmp, 0, sizeof tmp);
        mlc_status_t st = mlc_dynlib_open(d->what, path ? MLC_ENV_COUNT : d->env, path ? only : d->sonames + start,
                                          d->syms, d->nsyms, &tmp, sizeof tmp, &tmp.lib, why, why_len);
        if (st != MLC_SUCCESS && too_new >= 0) {
            start = too_new; /* nothing after it loads: back to it */
            too_new = -2;
            continue;
        }
        if (st != MLC_SUCCESS) return st;
        int idx = -1;
        for (int i = start; !path && d->sonames[i] && idx < 0; i++)
            if (strcmp(tmp.lib.name, d->sonames[i]) == 0) idx = i;
        if (idx < 0 || too_new == -2 || !d->sonames[idx + 1]) break; /* a file named by the user, or the last */
        int n = 0, e = tmp.get_device_count(&n);
        if (e != MLC_GPU_ERROR_INSUFFICIENT_DRIVER) break;
        tmp.get_last_error();
        MLC_INFO("%s %s: the driver is too old for it; trying %s", d->what, tmp.lib.path, d->sonames[idx + 1]);
        mlc_dynlib_close(&tmp.lib);
        if (too_new < 0) too_new = idx;
        start = idx + 1;
    }
    tmp.kind = kind;
    tmp.name = d->name;
    tmp.prefix = d->prefix;
    int v = 0;
    if (tmp.runtime_get_version(&v) == MLC_GPU_SUCCESS) tmp.runtime_version = v;
    tmp.legacy_mem_types = kind == MLC_GPU_HIP && tmp.runtime_version < 60000000;
    /* totalGlobalMem follows name[256] (HIP 5 layout) or name, uuid, luid,
     * luidDeviceNodeMask (CUDA 10+ and HIP 6 R0600 layout). */
    if (kind == MLC_GPU_HIP && !tmp.get_device_properties) tmp.props_mem_offset = 256;
    else tmp.props_mem_offset = 288;
    *rt = tmp;
    return MLC_SUCCESS;
}

void mlc_gpurt_close(mlc_gpurt_t *rt)
{
    if (rt) mlc_dynlib_close(&rt->lib);
}

/* ---- the process-wide, load-once runtimes ----------------------------- */
typedef struct gpurt_cache {
    pthread_once_t once;
    mlc_status_t status;
    atomic_bool loaded;
    atomic_bool tried;
    char why[768];
    mlc_gpurt_t rt;
} gpurt_cache_t;

static gpurt_cache_t caches[MLC_GPU_KIND_COUNT] = {
    [MLC_GPU_CUDA] = {.once = PTHREAD_ONCE_INIT},
    [MLC_GPU_HIP] = {.once = PTHREAD_ONCE_INIT},
};

static void load_kind(mlc_gpu_kind_t kind)
{
    gpurt_cache_t *c = &caches[kind];
    c->status = mlc_gpurt_open(kind, NULL, &c->rt, c->why, sizeof c->why);
    if (c->status == MLC_SUCCESS) {
        char ver[32];
        mlc_gpurt_version_text(kind, c->rt.runtime_version, ver, sizeof ver);
        MLC_INFO("%s runtime %s loaded from %s", c->rt.name, ver, c->rt.lib.path);
        atomic_store(&c->loaded, true);
    } else {
        MLC_DEBUG("%s", c->why);
    }
    atomic_store(&c->tried, true);
}
static void load_cuda(void) { load_kind(MLC_GPU_CUDA); }
static void load_hip(void) { load_kind(MLC_GPU_HIP); }

mlc_status_t mlc_gpurt_get(mlc_gpu_kind_t kind, const mlc_gpurt_t **rt)
{
    if (kind < 0 || kind >= MLC_GPU_KIND_COUNT)
        return mlc_error(MLC_ERR_INVALID_ARG, "unknown GPU runtime kind %d", (int)kind);
    gpurt_cache_t *c = &caches[kind];
    pthread_once(&c->once, kind == MLC_GPU_CUDA ? load_cuda : load_hip);
    if (c->status != MLC_SUCCESS) return mlc_error(c->status, "%s", c->why);
    *rt = &c->rt;
    return MLC_SUCCESS;
}

const mlc_gpurt_t *mlc_gpurt_peek(mlc_gpu_kind_t kind)
{
    if (kind < 0 || kind >= MLC_GPU_KIND_COUNT) return NULL;
    return atomic_load(&caches[kind].loaded) ? &caches[kind].rt : NULL;
}

const char *mlc_gpurt_why(mlc_gpu_kind_t kind)
{
    if (kind < 0 || kind >= MLC_GPU_KIND_COUNT) return "";
    gpurt_cache_t *c = &caches[kind];
    /* `tried` is stored (release) after `why` was written. */
    return atomic_load(&c->tried) && c->status != MLC_SUCCESS ? c->why : "";
}

/* ---- helpers ------------------------------------------------------------ */
const char *mlc_gpurt_strerror(const mlc_gpurt_t *rt, int err, char *buf, size_t len)
{
    const char *name = rt->get_error_name ? rt->get_error_name(err) : NULL;
    const char *text = rt->get_error_string ? rt->get_error_string(err) : NULL;
    snprintf(buf, len, "%s (%d): %s", name ? name : "error", err, text ? text : "no description");
    return buf;
}

mlc_status_t mlc_gpurt_device_count(const mlc_gpurt_t *rt, int *count)
{
    int n = 0;
    int e = rt->get_device_count(&n);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error(); /* clear the runtime's record of it */
        return mlc_error(MLC_ERR_UNAVAILABLE, "no %s device: %sGetDeviceCount: %s", rt->name,
                         rt->prefix, mlc_gpurt_strerror(rt, e, buf, sizeof buf));
    }
    if (n <= 0)
        return mlc_error(MLC_ERR_UNAVAILABLE, "no %s device: %sGetDeviceCount reports 0 devices",
                         rt->name, rt->prefix);
    *count = n;
    return MLC_SUCCESS;
}

mlc_status_t mlc_gpurt_pointer_kind(const mlc_gpurt_t *rt, const void *ptr, mlc_gpu_mem_t *mem,
                                    int *device)
{
    /* Larger than any cudaPointerAttributes / hipPointerAttribute_t; both
     * start with { int type; int device; }. */
    _Alignas(16) unsigned char attr[256];
    memset(attr, 0, sizeof attr);
    int e = rt->pointer_get_attributes(attr, ptr);
    if (e == MLC_GPU_ERROR_INVALID_VALUE) {
        /* CUDA < 11 and HIP < 6 answer "invalid value" for pageable host memory. */
        rt->get_last_error();
        *mem = MLC_GPU_MEM_UNREGISTERED;
        *device = -1;
        return MLC_SUCCESS;
    }
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error();
        return mlc_error(MLC_ERR_BACKEND, "%sPointerGetAttributes(%p): %s", rt->prefix, ptr,
                         mlc_gpurt_strerror(rt, e, buf, sizeof buf));
    }
    int type, dev;
    memcpy(&type, attr, sizeof type);
    memcpy(&dev, attr + sizeof type, sizeof dev);
    mlc_gpu_mem_t m;
    if (rt->legacy_mem_types) {
        /* HIP 5: Host 0, Device 1, Array 2, Unified 3, Managed 4 */
        static const mlc_gpu_mem_t legacy[] = {MLC_GPU_MEM_HOST, MLC_GPU_MEM_DEVICE,
                                               MLC_GPU_MEM_DEVICE, MLC_GPU_MEM_MANAGED,
                                               MLC_GPU_MEM_MANAGED};
        m = type >= 0 && type < 5 ? legacy[type] : MLC_GPU_MEM_UNREGISTERED;
    } else {
        /* CUDA 11+ and HIP 6: Unregistered 0, Host 1, Device 2, Managed 3, (HIP) Array 10, Unified 11 */
        switch (type) {
        case 1: m = MLC_GPU_MEM_HOST; break;
        case 2: case 10: m = MLC_GPU_MEM_DEVICE; break;
        case 3: case 11: m = MLC_GPU_MEM_MANAGED; break;
        default: m = MLC_GPU_MEM_UNREGISTERED; break;
        }
    }
    *mem = m;
    *device = m == MLC_GPU_MEM_DEVICE ? dev : -1;
    return MLC_SUCCESS;
}

/* cuCtxGetCurrent / hipCtxGetCurrent, looked up once per kind (NULL: none). */
static void *ctx_get_current(const mlc_gpurt_t *rt)
{
    static void *fn[MLC_GPU_KIND_COUNT];
    static atomic_int looked[MLC_GPU_KIND_COUNT];
    int k = rt->kind;
    if (atomic_load(&looked[k])) return fn[k];
    const char *name = k == MLC_GPU_HIP ? "hipCtxGetCurrent" : "cuCtxGetCurrent";
    void *f = rt->lib.handle ? dlsym(rt->lib.handle, name) : NULL;
    if (!f && k == MLC_GPU_CUDA) {
        /* libcudart has loaded the driver already: look, do not load */
        void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (drv) f = dlsym(drv, name);
    }
    fn[k] = f;
    atomic_store(&looked[k], 1);
    return f;
}

bool mlc_gpurt_thread_has_context(const mlc_gpurt_t *rt)
{
    void *f = ctx_get_current(rt);
    if (!f) return true;
    int (*get)(void **);
    *(void **)&get = f;
    void *ctx = NULL;
    return get(&ctx) != 0 || ctx != NULL;
}

mlc_status_t mlc_gpurt_device_info(const mlc_gpurt_t *rt, int device, mlc_gpu_device_info_t *info)
{
    mlc_gpu_device_info_t out;
    memset(&out, 0, sizeof out);
    out.cc_major = out.cc_minor = -1;
    int (*props_fn)(void *, int) =
        rt->get_device_properties ? rt->get_device_properties : rt->get_device_properties_legacy;
    if (props_fn) {
        /* Larger than any version of cudaDeviceProp / hipDeviceProp_t. */
        static _Thread_local _Alignas(16) unsigned char props[8192];
        memset(props, 0, sizeof props);
        int e = props_fn(props, device);
        if (e != MLC_GPU_SUCCESS) {
            char buf[256];
            rt->get_last_error();
            return mlc_error(MLC_ERR_BACKEND, "%sGetDeviceProperties(%d): %s", rt->prefix, device,
                             mlc_gpurt_strerror(rt, e, buf, sizeof buf));
        }
        memcpy(out.name, props, sizeof out.name - 1);
        memcpy(&out.total_mem, props + rt->props_mem_offset, sizeof out.total_mem);
    } else {
        snprintf(out.name, sizeof out.name, "%s device %d", rt->name, device);
    }
    if (rt->device_get_attribute && rt->kind == MLC_GPU_CUDA) {
        /* cudaDevAttrComputeCapabilityMajor / Minor */
        int major = -1, minor = -1;
        if (rt->device_get_attribute(&major, 75, device) == MLC_GPU_SUCCESS &&
            rt->device_get_attribute(&minor, 76, device) == MLC_GPU_SUCCESS) {
            out.cc_major = major;
            out.cc_minor = minor;
        } else {
            rt->get_last_error();
        }
    }
    if (rt->device_get_pci_bus_id &&
        rt->device_get_pci_bus_id(out.bus_id, (int)sizeof out.bus_id, device) != MLC_GPU_SUCCESS) {
        out.bus_id[0] = '\0';
        rt->get_last_error();
    }
    *info = out;
    return MLC_SUCCESS;
}

void mlc_gpurt_version_text(mlc_gpu_kind_t kind, int code, char *buf, size_t len)
{
    if (code <= 0)
        snprintf(buf, len, "unknown");
    else if (kind == MLC_GPU_HIP)
        snprintf(buf, len, "%d.%d.%d", code / 10000000, (code / 100000) % 100, code % 100000);
    else
        snprintf(buf, len, "%d.%d", code / 1000, (code % 1000) / 10);
}
