/* SPDX-License-Identifier: BSD-3-Clause */
#include "gpudirect.h"
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Kernel modules that let a NIC reach GPU memory, newest first. */
static const char *const peermem_modules[] = {"nvidia_peermem", "nv_peer_mem", NULL};

const char *mlc_capability_name(mlc_capability_t c)
{
    return c == MLC_CAP_YES ? "yes" : c == MLC_CAP_NO ? "no" : "unknown";
}

/* Append to an evidence string, never overflowing. */
static void add(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(char *buf, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= MLC_GPUDIRECT_EVIDENCE) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, MLC_GPUDIRECT_EVIDENCE - used, fmt, ap);
    va_end(ap);
}

static void path_of(char *out, size_t len, const char *sysroot, const char *path)
{
    snprintf(out, len, "%s%s", sysroot ? sysroot : "", path);
}

/* Is `module` loaded: a line of /proc/modules or a /sys/module/<name> folder. */
static const char *module_loaded(const char *sysroot, const char *module)
{
    char path[1024];
    path_of(path, sizeof path, sysroot, "/proc/modules");
    FILE *f = fopen(path, "r");
    if (f) {
        char line[512];
        size_t n = strlen(module);
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, module, n) == 0 && line[n] == ' ') {
                fclose(f);
                return "/proc/modules";
            }
        }
        fclose(f);
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "/sys/module/%s", module);
    path_of(path, sizeof path, sysroot, dir);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return "/sys/module";
    return NULL;
}

static void detect_rdma(const char *sysroot, mlc_gpudirect_t *out)
{
    char *ev = out->rdma_evidence;
    ev[0] = '\0';
    const char *module = NULL, *where = NULL;
    for (int i = 0; peermem_modules[i] && !module; i++) {
        where = module_loaded(sysroot, peermem_modules[i]);
        if (where) module = peermem_modules[i];
    }
    if (module) add(ev, "module %s loaded (%s)", module, where);
    else add(ev, "no peer-memory module (nvidia_peermem / nv_peer_mem) loaded");

    char path[1024];
    path_of(path, sizeof path, sysroot, "/sys/class/infiniband");
    DIR *d = opendir(path);
    int ndev = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            add(ev, "%s%s", ndev == 0 ? "; InfiniBand/RoCE devices: " : ", ", e->d_name);
            ndev++;
        }
        closedir(d);
    }
    if (ndev == 0) add(ev, "; no InfiniBand/RoCE device in /sys/class/infiniband");
    out->rdma = module && ndev > 0 ? MLC_CAP_YES : MLC_CAP_NO;
}

static void detect_peer(const mlc_gpurt_t *rt, mlc_gpudirect_t *out)
{
    char *ev = out->peer_evidence;
    ev[0] = '\0';
    out->peer_access = MLC_CAP_UNKNOWN;
    if (!rt) {
        add(ev, "no GPU runtime loaded");
        return;
    }
    int n = 0;
    int e = rt->get_device_count(&n);
    if (e != MLC_GPU_SUCCESS) {
        char buf[256];
        rt->get_last_error();
        add(ev, "%sGetDeviceCount: %s", rt->prefix, mlc_gpurt_strerror(rt, e, buf, sizeof buf));
        return;
    }
    if (n < 2) {
        out->peer_access = MLC_CAP_NO;
        add(ev, "%d %s device%s: no pair to connect", n, rt->name, n == 1 ? "" : "s");
        return;
    }
    if (!rt->device_can_access_peer) {
        add(ev, "%s runtime lacks %sDeviceCanAccessPeer", rt->name, rt->prefix);
        return;
    }
    int pairs = 0, yes = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            if (i == j) continue;
            int can = 0;
            if (rt->device_can_access_peer(&can, i, j) != MLC_GPU_SUCCESS) {
                rt->get_last_error();
                can = 0;
            }
            pairs++;
            if (can) yes++;
            else add(ev, "%s%d->%d no", strlen(ev) ? ", " : "", i, j);
        }
    }
    char head[128];
    snprintf(head, sizeof head, "%d of %d device pairs can access each other%s", yes, pairs,
             yes == pairs ? "" : ": ");
    char rest[MLC_GPUDIRECT_EVIDENCE];
    memcpy(rest, ev, sizeof rest);
    ev[0] = '\0';
    add(ev, "%s%s", head, rest);
    out->peer_access = yes == pairs ? MLC_CAP_YES : MLC_CAP_NO;
}

static void detect_ipc(const mlc_gpurt_t *rt, mlc_gpudirect_t *out)
{
    char *ev = out->ipc_evidence;
    ev[0] = '\0';
    out->ipc = MLC_CAP_UNKNOWN;
    if (!rt) {
        add(ev, "no GPU runtime loaded");
        return;
    }
    if (!rt->ipc_get_mem_handle || !rt->ipc_open_mem_handle || !rt->ipc_close_mem_handle) {
        out->ipc = MLC_CAP_NO;
        add(ev, "%s runtime lacks %sIpcGetMemHandle/OpenMemHandle/CloseMemHandle", rt->name,
            rt->prefix);
        return;
    }
    int n = 0;
    int e = rt->get_device_count(&n);
    if (e != MLC_GPU_SUCCESS || n < 1) {
        char buf[256];
        rt->get_last_error();
        out->ipc = MLC_CAP_NO;
        add(ev, "IPC functions present but no device (%sGetDeviceCount: %s)", rt->prefix,
            e != MLC_GPU_SUCCESS ? mlc_gpurt_strerror(rt, e, buf, sizeof buf) : "0 devices");
        return;
    }
    out->ipc = MLC_CAP_YES;
    add(ev, "%sIpcGetMemHandle/OpenMemHandle present, %d device%s", rt->prefix, n,
        n == 1 ? "" : "s");
}

static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_capability_t mpi_aware = MLC_CAP_UNKNOWN;
static char mpi_evidence[MLC_GPUDIRECT_EVIDENCE] = "the MPI module has not reported (MPI not loaded)";

void mlc_gpudirect_set_mpi(mlc_capability_t aware, const char *evidence)
{
    pthread_mutex_lock(&mpi_lock);
    mpi_aware = aware;
    snprintf(mpi_evidence, sizeof mpi_evidence, "%s", evidence ? evidence : "");
    pthread_mutex_unlock(&mpi_lock);
}

void mlc_gpudirect_detect(const mlc_gpurt_t *rt, const char *sysroot, mlc_gpudirect_t *out)
{
    detect_rdma(sysroot, out);
    detect_peer(rt, out);
    detect_ipc(rt, out);
    pthread_mutex_lock(&mpi_lock);
    out->cuda_aware_mpi = mpi_aware;
    snprintf(out->mpi_evidence, sizeof out->mpi_evidence, "%s", mpi_evidence);
    pthread_mutex_unlock(&mpi_lock);
}
