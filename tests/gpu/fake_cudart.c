/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test double of the CUDA runtime for machines without a GPU: "device"
 * memory is host memory the fake remembers, streams run copies at once,
 * events complete after a configurable number of queries. It lets the
 * loaders, the pinned pool, GPU-direct detection and the nccl backend run
 * their real code paths here. Built as a plain shared library and loaded
 * through MLC_CUDART_LIB, exactly like libcudart.
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=n      device count (default 1; 0 = cudaErrorNoDevice)
 *   FAKE_CUDA_PEER=0|1       cudaDeviceCanAccessPeer answer (default 1)
 *   FAKE_CUDA_EVENT_POLLS=k  an event reports "not ready" k times after a record
 *   FAKE_CUDA_EVENT_NEVER=1  events never complete until fake_cuda_release_events()
 *   FAKE_CUDA_HOSTALLOC_FAIL=1  cudaHostAlloc fails with cudaErrorMemoryAllocation
 *   FAKE_CUDA_GUARD=1        "device" memory is a memfd mapped twice: the
 *                            pointer handed out is PROT_NONE (any host access
 *                            to it crashes, as on a real GPU), the runtime's
 *                            copies go through a second, writable mapping;
 *                            IPC handles then work across processes
 *                            (/proc/<pid>/fd/<fd>), like CUDA IPC
 *   FAKE_CUDA_IPC_REFUSE=1   cudaIpcOpenMemHandle always fails (processes
 *                            that may not share memory, e.g. containers)
 *
 * Built with -DFAKE_HIP it is a HIP runtime instead (fake_names.h).
 * Built with -DFAKE_PARTIAL, it exports only the first few symbols of the
 * loader's list (cudaDriverGetVersion is the first one missing): the loader
 * must refuse it and name that symbol.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_names.h"

#define API __attribute__((visibility("default")))

enum { OK = 0, E_INVALID_VALUE = 1, E_MEMORY = 2, E_INVALID_DEVICE = 101, E_NO_DEVICE = 100,
       E_NOT_READY = 600, E_HOST_REGISTERED = 712 };

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? atoi(v) : dflt;
}

API const char *cudaGetErrorName(int e)
{
    switch (e) {
    case OK: return "cudaSuccess";
    case E_INVALID_VALUE: return "cudaErrorInvalidValue";
    case E_MEMORY: return "cudaErrorMemoryAllocation";
    case E_NO_DEVICE: return "cudaErrorNoDevice";
    case E_INVALID_DEVICE: return "cudaErrorInvalidDevice";
    case E_NOT_READY: return "cudaErrorNotReady";
    case E_HOST_REGISTERED: return "cudaErrorHostMemoryAlreadyRegistered";
    default: return "cudaErrorUnknown";
    }
}
API const char *cudaGetErrorString(int e)
{
    switch (e) {
    case E_NO_DEVICE: return "no CUDA-capable device is detected (fake)";
    case E_MEMORY: return "out of memory (fake)";
    default: return "fake CUDA runtime error";
    }
}

static __thread int last_error;
static int fail(int e)
{
    last_error = e;
    return e;
}
API int cudaGetLastError(void)
{
    int e = last_error;
    last_error = 0;
    return e;
}
API int cudaRuntimeGetVersion(int *v)
{
    *v = FAKE_RUNTIME_VERSION;
    return OK;
}
API int cudaGetDeviceCount(int *n)
{
    int d = env_int("FAKE_CUDA_DEVICES", 1);
    if (d <= 0) return fail(E_NO_DEVICE);
    *n = d;
    return OK;
}

#ifndef FAKE_PARTIAL
/* ---- allocations ------------------------------------------------------------ */
enum { MEM_DEVICE = 2, MEM_HOST = 1 };
typedef struct alloc {
    char *p;
    size_t n;
    int type, device;
    int registered; /* host memory registered in place (not ours to free) */
    char *rw;       /* FAKE_CUDA_GUARD: the writable view of p (NULL: p itself) */
    int fd;         /* FAKE_CUDA_GUARD: the memfd behind it (-1 for opened IPC memory) */
    int opened;     /* mapped from another process's IPC handle */
    uint64_t serial; /* FAKE_CUDA_GUARD: unique per allocation, as a real IPC handle is */
    struct alloc *next;
} alloc_t;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static alloc_t *allocs;
static __thread int cur_device;

API int fake_cuda_live_device_allocs, fake_cuda_live_host_allocs, fake_cuda_live_streams,
    fake_cuda_live_events, fake_cuda_host_allocs_total, fake_cuda_memcpy_calls;

static alloc_t *find(const void *p)
{
    for (alloc_t *a = allocs; a; a = a->next)
        if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) return a;
    return NULL;
}

/* Where the runtime itself reads or writes p (the writable view of guarded memory). */
static void *host_view(const void *p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    void *v = a && a->rw ? a->rw + ((const char *)p - a->p) : (void *)p;
    pthread_mutex_unlock(&lock);
    return v;
}

/* Guarded device memory: a memfd mapped PROT_NONE (handed out) and read-write (ours). */
static int guard_map(int fd, size_t n, char **p, char **rw)
{
    size_t len = n ? n : 1;
    *p = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
    if (*p == MAP_FAILED) return E_MEMORY;
    *rw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*rw == MAP_FAILED) {
        munmap(*p, len);
        return E_MEMORY;
    }
    return OK;
}

/* Exported for the fake NCCL: is p inside fake device memory (or pinned host)? */
API int fake_cuda_is_device(const void *p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int r = a != NULL;
    pthread_mutex_unlock(&lock);
    return r;
}

static int add_mapped(void *p, size_t n, int type, int registered, char *rw, int fd, int opened)
{
    alloc_t *a = calloc(1, sizeof *a);
    if (!a) return E_MEMORY;
    static uint64_t serials;
    *a = (alloc_t){p, n, type, cur_device, registered, rw, fd, opened, __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED), NULL};
    pthread_mutex_lock(&lock);
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&lock);
    return OK;
}
static int add(void *p, size_t n, int type, int registered)
{
    return add_mapped(p, n, type, registered, NULL, -1, 0);
}

static alloc_t *take(const void *p, int type)
{
    pthread_mutex_lock(&lock);
    alloc_t **pp = &allocs;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->p == p && (*pp)->type == type) {
            alloc_t *a = *pp;
            *pp = a->next;
            pthread_mutex_unlock(&lock);
            return a;
        }
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

API int cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}
API int cudaGetDevice(int *d)
{
    *d = cur_device;
    return OK;
}
API int cudaSetDevice(int d)
{
    if (d < 0 || d >= env_int("FAKE_CUDA_DEVICES", 1)) return fail(E_INVALID_DEVICE);
    cur_device = d;
    return OK;
}
API int cudaGetDeviceProperties(void *prop, int d)
{
    if (d < 0 || d >= env_int("FAKE_CUDA_DEVICES", 1)) return fail(E_INVALID_DEVICE);
    memset(prop, 0, 1008);
    snprintf(prop, 256, "Fake GPU %d", d);
    size_t mem = (size_t)16 << 30;
    memcpy((char *)prop + 288, &mem, sizeof mem);
    return OK;
}
API int cudaDeviceGetAttribute(int *v, int attr, int d)
{
    if (attr == 75) *v = 9;
    else if (attr == 76) *v = 0;
    else return fail(E_INVALID_VALUE);
    return OK;
}
API int cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x10 + d);
    return OK;
}
API int cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    *can = env_int("FAKE_CUDA_PEER", 1) != 0;
    return OK;
}
API int cudaPointerGetAttributes(void *attr, const void *p)
{
    int type = 0, dev = -2;
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    if (a) {
        type = a->type;
        dev = a->type == MEM_DEVICE ? a->device : -2;
    }
    pthread_mutex_unlock(&lock);
    memset(attr, 0, 88);
    memcpy(attr, &type, sizeof type);
    memcpy((char *)attr + 4, &dev, sizeof dev);
    return OK;
}
static int guarded_malloc(void **p, size_t n)
{
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return fail(E_MEMORY);
    char *m, *rw;
    if (ftruncate(fd, (off_t)(n ? n : 1)) != 0 || guard_map(fd, n, &m, &rw) != OK) {
        close(fd);
        return fail(E_MEMORY);
    }
    memset(rw, 0xa5, n);
    if (add_mapped(m, n, MEM_DEVICE, 0, rw, fd, 0) != OK) return fail(E_MEMORY);
    __atomic_add_fetch(&fake_cuda_live_device_allocs, 1, __ATOMIC_RELAXED);
    *p = m;
    return OK;
}

static void unmap_alloc(alloc_t *a)
{
    size_t len = a->n ? a->n : 1;
    munmap(a->p, len);
    munmap(a->rw, len);
    if (a->fd >= 0) close(a->fd);
}

API int cudaMalloc(void **p, size_t n)
{
    if (env_int("FAKE_CUDA_GUARD", 0)) return guarded_malloc(p, n);
    void *m = malloc(n ? n : 1);
    if (!m) return fail(E_MEMORY);
    /* Fill with garbage so a test cannot pass on zeroed memory by luck. */
    memset(m, 0xa5, n);
    if (add(m, n, MEM_DEVICE, 0) != OK) {
        free(m);
        return fail(E_MEMORY);
    }
    __atomic_add_fetch(&fake_cuda_live_device_allocs, 1, __ATOMIC_RELAXED);
    *p = m;
    return OK;
}
API int cudaFree(void *p)
{
    if (!p) return OK;
    alloc_t *a = take(p, MEM_DEVICE);
    if (!a || a->opened) return fail(E_INVALID_VALUE);
    if (a->rw) unmap_alloc(a);
    else free(a->p);
    free(a);
    __atomic_sub_fetch(&fake_cuda_live_device_allocs, 1, __ATOMIC_RELAXED);
    return OK;
}
API int cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    if (env_int("FAKE_CUDA_HOSTALLOC_FAIL", 0)) return fail(E_MEMORY);
    void *m = malloc(n ? n : 1);
    if (!m || add(m, n, MEM_HOST, 0) != OK) {
        free(m);
        return fail(E_MEMORY);
    }
    __atomic_add_fetch(&fake_cuda_live_host_allocs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fake_cuda_host_allocs_total, 1, __ATOMIC_RELAXED);
    *p = m;
    return OK;
}
API int cudaFreeHost(void *p)
{
    alloc_t *a = take(p, MEM_HOST);
    if (!a || a->registered) return fail(E_INVALID_VALUE);
    free(a->p);
    free(a);
    __atomic_sub_fetch(&fake_cuda_live_host_allocs, 1, __ATOMIC_RELAXED);
    return OK;
}
API int cudaHostRegister(void *p, size_t n, unsigned flags)
{
    if (fake_cuda_is_device(p)) return fail(E_HOST_REGISTERED);
    return add(p, n, MEM_HOST, 1) == OK ? OK : fail(E_MEMORY);
}
API int cudaHostUnregister(void *p)
{
    alloc_t *a = take(p, MEM_HOST);
    if (!a || !a->registered) return fail(E_INVALID_VALUE);
    free(a);
    return OK;
}
API int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    if (kind != 4) return fail(E_INVALID_VALUE);
    __atomic_add_fetch(&fake_cuda_memcpy_calls, 1, __ATOMIC_RELAXED);
    memmove(host_view(dst), host_view(src), n);
    return OK;
}
API int cudaMemsetAsync(void *dst, int v, size_t n, void *stream)
{
    memset(host_view(dst), v, n);
    return OK;
}

/* ---- streams and events ----------------------------------------------------------- */
typedef struct fake_stream {
    int magic;
} fake_stream_t;
API int cudaStreamCreateWithFlags(void **s, unsigned flags)
{
    fake_stream_t *st = calloc(1, sizeof *st);
    if (!st) return fail(E_MEMORY);
    st->magic = 0x5757;
    __atomic_add_fetch(&fake_cuda_live_streams, 1, __ATOMIC_RELAXED);
    *s = st;
    return OK;
}
API int cudaStreamDestroy(void *s)
{
    fake_stream_t *st = s;
    if (!st || st->magic != 0x5757) return fail(E_INVALID_VALUE);
    st->magic = 0;
    free(st);
    __atomic_sub_fetch(&fake_cuda_live_streams, 1, __ATOMIC_RELAXED);
    return OK;
}
API int cudaStreamSynchronize(void *s) { return OK; }
API int cudaStreamWaitEvent(void *s, void *e, unsigned flags) { return OK; }

typedef struct fake_event {
    int polls_left;
    int never;      /* recorded while FAKE_CUDA_EVENT_NEVER was set */
    int generation; /* of the record: a release ends every earlier one */
} fake_event_t;
static int generation;

/* What ncclCommAbort does to the kernels it kills: everything recorded so far ends. */
API void fake_cuda_release_events(void)
{
    pthread_mutex_lock(&lock);
    generation++;
    pthread_mutex_unlock(&lock);
}

API int cudaEventCreateWithFlags(void **e, unsigned flags)
{
    fake_event_t *ev = calloc(1, sizeof *ev);
    if (!ev) return fail(E_MEMORY);
    __atomic_add_fetch(&fake_cuda_live_events, 1, __ATOMIC_RELAXED);
    *e = ev;
    return OK;
}
API int cudaEventRecord(void *e, void *s)
{
    fake_event_t *ev = e;
    if (!ev) return fail(E_INVALID_VALUE);
    pthread_mutex_lock(&lock);
    ev->polls_left = env_int("FAKE_CUDA_EVENT_POLLS", 0);
    ev->never = env_int("FAKE_CUDA_EVENT_NEVER", 0);
    ev->generation = generation;
    pthread_mutex_unlock(&lock);
    return OK;
}
API int cudaEventQuery(void *e)
{
    fake_event_t *ev = e;
    int r = OK;
    pthread_mutex_lock(&lock);
    if (ev->never && ev->generation == generation) r = E_NOT_READY;
    else if (ev->polls_left > 0) {
        ev->polls_left--;
        r = E_NOT_READY;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
API int cudaEventSynchronize(void *e)
{
    fake_event_t *ev = e;
    ev->polls_left = 0;
    return OK;
}
API int cudaEventDestroy(void *e)
{
    free(e);
    __atomic_sub_fetch(&fake_cuda_live_events, 1, __ATOMIC_RELAXED);
    return OK;
}

/* ---- IPC ------------------------------------------------------------------------
 * Unguarded memory cannot be exported. Guarded: the handle names the owner's memfd, which another process of the same user
 * maps through /proc/<pid>/fd/<fd>, at the offset of the pointer. */
typedef struct { char reserved[64]; } ipc_handle_t;
typedef struct {
    uint32_t magic;
    int32_t pid, fd;
    uint64_t offset, size, serial;
} ipc_wire_t;
#define IPC_MAGIC 0x1bc0ffeeu

API int cudaIpcGetMemHandle(ipc_handle_t *h, void *p)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int ok = a && a->type == MEM_DEVICE;
    ipc_wire_t w = {0, 0, 0, 0, 0, 0};
    if (ok && a->rw) {
        if (a->opened) ok = 0; /* as CUDA: only the owner can export */
        w = (ipc_wire_t){IPC_MAGIC, (int32_t)getpid(), a->fd, (uint64_t)((char *)p - a->p),
                         (uint64_t)a->n, a->serial};
    }
    pthread_mutex_unlock(&lock);
    /* Unguarded memory is plain malloc: no other process could map it
     * (as memory from a pool that is not IPC-capable). */
    if (!ok || !w.magic) return fail(E_INVALID_VALUE);
    memcpy(h->reserved, &w, sizeof w);
    return OK;
}
API int fake_cuda_ipc_opens;

/* The driver call mlcomm uses to find an allocation's base (libcuda's, here in the double). */
API int cuMemGetAddressRange_v2(unsigned long long *base, size_t *size, unsigned long long ptr)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find((const void *)(uintptr_t)ptr);
    int ok = a && a->type == MEM_DEVICE;
    if (ok) {
        *base = (unsigned long long)(uintptr_t)a->p;
        *size = a->n;
    }
    pthread_mutex_unlock(&lock);
    return ok ? 0 : 1;
}

#ifdef FAKE_HIP
/* HIP's own range lookup (in the runtime, pointer-typed). */
API int hipMemGetAddressRange(void **base, size_t *size, void *ptr)
{
    unsigned long long b = 0;
    int e = cuMemGetAddressRange_v2(&b, size, (unsigned long long)(uintptr_t)ptr);
    if (e == 0) *base = (void *)(uintptr_t)b;
    return e;
}
#endif

API int cudaIpcOpenMemHandle(void **p, ipc_handle_t h, unsigned flags)
{
    __atomic_add_fetch(&fake_cuda_ipc_opens, 1, __ATOMIC_RELAXED);
    const char *refuse = getenv("FAKE_CUDA_IPC_REFUSE");
    if (refuse && strcmp(refuse, "1") == 0) return fail(E_INVALID_VALUE);
    ipc_wire_t w;
    memcpy(&w, h.reserved, sizeof w);
    if (w.magic != IPC_MAGIC) return fail(E_INVALID_VALUE);
    if (w.pid == getpid()) return fail(E_INVALID_VALUE); /* CUDA refuses a handle of this process */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return fail(E_INVALID_VALUE);
    char *m, *rw;
    int e = guard_map(fd, (size_t)w.size, &m, &rw);
    close(fd);
    if (e != OK) return fail(e);
    if (add_mapped(m, (size_t)w.size, MEM_DEVICE, 0, rw, -1, 1) != OK) return fail(E_MEMORY);
    *p = m + w.offset;
    return OK;
}
API int cudaIpcCloseMemHandle(void *p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int opened = a && a->opened;
    pthread_mutex_unlock(&lock);
    if (!opened) return OK; /* unguarded handles map nothing */
    a = take(a->p, MEM_DEVICE);
    if (!a) return fail(E_INVALID_VALUE);
    unmap_alloc(a);
    free(a);
    return OK;
}
#endif /* FAKE_PARTIAL */
