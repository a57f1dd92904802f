/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test double of the CUDA runtime for machines without a GPU: "device"
 * memory is host memory the fake remembers. Built as a plain shared library
 * and loaded through MLC_CUDART_LIB, exactly like libcudart.
 *
 * It is asynchronous as a GPU is: cudaMemcpyAsync, cudaMemsetAsync, event
 * records, cudaStreamWaitEvent and fake_cuda_enqueue_write (an application
 * kernel) are queued on their stream and run only when the process lets
 * the "GPU" move:
 *   - cudaStreamSynchronize / cudaEventSynchronize / cudaStreamDestroy run
 *     the stream up to that point (and what it depends on);
 *   - every cudaEventQuery / cudaStreamQuery is one tick: each stream runs
 *     the work at its head that may run (an operation queued with a lag of
 *     k ticks waits k ticks at the head first).
 * Ordering as CUDA's: a stream runs in order; the legacy default stream
 * (NULL, cudaStreamLegacy, cudaStreamPerThread here too) waits for earlier
 * work of the blocking streams of its device and they wait for its earlier
 * work; cudaStreamNonBlocking streams do not. Copies from or to pageable
 * host memory are synchronous (as CUDA's). Each thread has a current device
 * (cudaSetDevice); the first call that needs one creates the device's
 * primary context (counted: fake_cuda_contexts_created(dev)). Streams and
 * events belong to the device current at creation; recording an event on
 * another device's stream fails with cudaErrorInvalidResourceHandle (400).
 *
 * Environment:
 *   FAKE_CUDA_DEVICES=n      device count (default 1; 0: every call fails
 *                            with cudaErrorNoDevice, 100, as with no GPU)
 *   FAKE_CUDA_DRIVER_TOO_OLD=1  every call fails with cudaErrorInsufficientDriver
 *                            (35), as libcudart.so.13 on an R550 driver
 *   FAKE_CUDA_LAG=k          queued work waits k ticks at its stream's head
 *   FAKE_CUDA_IMMEDIATE=1    work runs when it is queued (for fake_nccl, which
 *                            moves data at call time)
 *   FAKE_CUDA_PEER=0|1       cudaDeviceCanAccessPeer answer (default 1)
 *   FAKE_CUDA_EVENT_POLLS=k  an event reports "not ready" k more times once
 *                            its work is done
 *   FAKE_CUDA_EVENT_NEVER=1  events never complete until fake_cuda_release_events()
 *   FAKE_CUDA_STUCK=1        work queued while it is set is stuck behind a hung
 *                            kernel: it never runs until fake_cuda_unstick().
 *                            Polls say "not ready"; a call that would wait for
 *                            it (stream / event synchronize, cudaFree's device
 *                            synchronization) returns without it and counts
 *                            fake_cuda_stuck_waits (on a GPU it never returns);
 *                            cudaStreamDestroy returns at once and the work
 *                            runs once released, as CUDA lets it finish later.
 *   FAKE_CUDA_HOSTALLOC_FAIL=1  cudaHostAlloc fails with cudaErrorMemoryAllocation
 *   FAKE_CUDA_GUARD=1        "device" memory is a memfd mapped twice: the
 *                            pointer handed out is PROT_NONE (any host access
 *                            to it crashes, as on a real GPU), the runtime's
 *                            copies go through a second, writable mapping;
 *                            IPC handles then work across processes
 *                            (/proc/<pid>/fd/<fd>), like CUDA IPC. A freed
 *                            allocation's address is reused by the next one
 *                            of the same size, as CUDA reuses addresses.
 *   FAKE_CUDA_IPC_REFUSE=1   cudaIpcOpenMemHandle always fails (processes
 *                            that may not share memory, e.g. containers)
 * cudaFree / cudaFreeHost of memory that queued work which has not run yet
 * still reads or writes is a use after free on a GPU: the double counts it
 * (fake_cuda_queued_frees) and says so on stderr.
 * Opening an IPC handle of an allocation (owner process, owner address)
 * already mapped here fails with cudaErrorAlreadyMapped (208);
 * cudaHostRegister of a range overlapping registered or pinned memory
 * fails with cudaErrorHostMemoryAlreadyRegistered (712).
 *
 * Built with -DFAKE_HIP it is a HIP runtime instead (fake_names.h); with
 * -DFAKE_DRIVER_TOO_OLD it always answers as FAKE_CUDA_DRIVER_TOO_OLD=1.
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

enum { OK = 0, E_INVALID_VALUE = 1, E_MEMORY = 2, E_INSUFFICIENT_DRIVER = 35, E_INVALID_DEVICE = 101,
       E_NO_DEVICE = 100, E_ALREADY_MAPPED = 208, E_INVALID_HANDLE = 400, E_NOT_READY = 600,
       E_HOST_REGISTERED = 712, E_UNKNOWN = 999 };
enum { MAX_DEVICES = 16 };

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
    case E_INSUFFICIENT_DRIVER: return "cudaErrorInsufficientDriver";
    case E_NO_DEVICE: return "cudaErrorNoDevice";
    case E_INVALID_DEVICE: return "cudaErrorInvalidDevice";
    case E_ALREADY_MAPPED: return "cudaErrorAlreadyMapped";
    case E_INVALID_HANDLE: return "cudaErrorInvalidResourceHandle";
    case E_NOT_READY: return "cudaErrorNotReady";
    case E_HOST_REGISTERED: return "cudaErrorHostMemoryAlreadyRegistered";
    default: return "cudaErrorUnknown";
    }
}
API const char *cudaGetErrorString(int e)
{
    switch (e) {
    case E_NO_DEVICE: return "no CUDA-capable device is detected (fake)";
    case E_INSUFFICIENT_DRIVER: return "CUDA driver version is insufficient for CUDA runtime version (fake)";
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

/* No usable device: the sticky error every call then returns (0: there is one). */
static int absent(void)
{
#ifdef FAKE_DRIVER_TOO_OLD
    return E_INSUFFICIENT_DRIVER;
#endif
    if (env_int("FAKE_CUDA_DRIVER_TOO_OLD", 0)) return E_INSUFFICIENT_DRIVER;
    if (env_int("FAKE_CUDA_DEVICES", 1) <= 0) return E_NO_DEVICE;
    return OK;
}
#define REQUIRE_DEVICE()                 \
    do {                                 \
        int absent_ = absent();          \
        if (absent_) return fail(absent_); \
    } while (0)

API int cudaGetDeviceCount(int *n)
{
    REQUIRE_DEVICE();
    *n = env_int("FAKE_CUDA_DEVICES", 1);
    return OK;
}

#ifndef FAKE_PARTIAL
/* ---- devices and their primary contexts --------------------------------------- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int cur_device;   /* 0 until cudaSetDevice, as CUDA's */
static __thread int thread_context; /* a context is current on this thread */
static int contexts[MAX_DEVICES]; /* primary contexts created (under lock) */

/* A call that needs a context: the current device's primary context exists from now on. */
static void need_context(void)
{
    thread_context = 1;
    pthread_mutex_lock(&lock);
    if (cur_device >= 0 && cur_device < MAX_DEVICES) contexts[cur_device] = 1;
    pthread_mutex_unlock(&lock);
}
/* For tests: whether this process created device dev's primary context (0 or 1). */
API int fake_cuda_contexts_created(int dev)
{
    pthread_mutex_lock(&lock);
    int n = dev >= 0 && dev < MAX_DEVICES ? contexts[dev] : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

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
    int32_t owner_pid;   /* opened: the exporting process ... */
    uint64_t owner_base; /* ... and the allocation's address there */
    struct alloc *next;
} alloc_t;
static alloc_t *allocs;

API int fake_cuda_live_device_allocs, fake_cuda_live_host_allocs, fake_cuda_live_streams,
    fake_cuda_live_events, fake_cuda_host_allocs_total, fake_cuda_memcpy_calls;
API int fake_cuda_queued_frees, fake_cuda_stuck_waits;

static alloc_t *find(const void *p)
{
    for (alloc_t *a = allocs; a; a = a->next)
        if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) return a;
    return NULL;
}

/* Where the runtime itself reads or writes p (the writable view of guarded memory). Lock held. */
static void *view_locked(const void *p)
{
    alloc_t *a = find(p);
    return a && a->rw ? a->rw + ((const char *)p - a->p) : (void *)p;
}

/* Guarded device memory: a memfd mapped PROT_NONE (handed out) and read-write (ours).
 * hint: an address to reuse (a freed allocation's), else NULL. */
static int guard_map(int fd, size_t n, char **p, char **rw, void *hint)
{
    size_t len = n ? n : 1;
    *p = MAP_FAILED;
    if (hint) *p = mmap(hint, len, PROT_NONE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (*p == MAP_FAILED) *p = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
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

static alloc_t *add_mapped(void *p, size_t n, int type, int registered, char *rw, int fd, int opened)
{
    alloc_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    static uint64_t serials;
    *a = (alloc_t){p, n, type, cur_device, registered, rw, fd, opened, __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED),
                   0, 0, NULL};
    pthread_mutex_lock(&lock);
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&lock);
    return a;
}
static int add(void *p, size_t n, int type, int registered)
{
    return add_mapped(p, n, type, registered, NULL, -1, 0) ? OK : E_MEMORY;
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
    *v = env_int("FAKE_CUDA_DRIVER_TOO_OLD", 0) ? 12040 : 13000;
    return OK;
}
/* As CUDA's: the thread's device, 0 when it never chose one; creates no context. */
API int cudaGetDevice(int *d)
{
    REQUIRE_DEVICE();
    *d = cur_device;
    return OK;
}
/* Since CUDA 12 cudaSetDevice creates the device's primary context. */
API int cudaSetDevice(int d)
{
    REQUIRE_DEVICE();
    if (d < 0 || d >= env_int("FAKE_CUDA_DEVICES", 1) || d >= MAX_DEVICES) return fail(E_INVALID_DEVICE);
    cur_device = d;
    need_context();
    return OK;
}
/* The driver's "is a context current on this thread" (libcuda's, here in the double). */
API int cuCtxGetCurrent(void **ctx)
{
    if (absent()) return absent() == E_NO_DEVICE ? 100 : 3 /* CUDA_ERROR_NOT_INITIALIZED */;
    *ctx = thread_context ? (void *)(uintptr_t)(0xc0 + cur_device) : NULL;
    return 0;
}
API int cudaGetDeviceProperties(void *prop, int d)
{
    REQUIRE_DEVICE();
    if (d < 0 || d >= env_int("FAKE_CUDA_DEVICES", 1)) return fail(E_INVALID_DEVICE);
    memset(prop, 0, 1008);
    snprintf(prop, 256, "Fake GPU %d", d);
    size_t mem = (size_t)16 << 30;
    memcpy((char *)prop + 288, &mem, sizeof mem);
    return OK;
}
API int cudaDeviceGetAttribute(int *v, int attr, int d)
{
    REQUIRE_DEVICE();
    if (attr == 75) *v = 9;
    else if (attr == 76) *v = 0;
    else return fail(E_INVALID_VALUE);
    return OK;
}
API int cudaDeviceGetPCIBusId(char *buf, int len, int d)
{
    REQUIRE_DEVICE();
    snprintf(buf, (size_t)len, "0000:%02x:00.0", 0x10 + d);
    return OK;
}
API int cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    REQUIRE_DEVICE();
    *can = env_int("FAKE_CUDA_PEER", 1) != 0;
    return OK;
}
API int cudaPointerGetAttributes(void *attr, const void *p)
{
    REQUIRE_DEVICE();
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

/* The address of the last guarded allocation freed, per size: CUDA hands it out again. */
static void *reuse_p;
static size_t reuse_n;

static int guarded_malloc(void **p, size_t n)
{
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0) return fail(E_MEMORY);
    char *m, *rw;
    pthread_mutex_lock(&lock);
    void *hint = reuse_n == n ? reuse_p : NULL;
    if (hint) reuse_p = NULL, reuse_n = 0;
    pthread_mutex_unlock(&lock);
    if (ftruncate(fd, (off_t)(n ? n : 1)) != 0 || guard_map(fd, n, &m, &rw, hint) != OK) {
        close(fd);
        return fail(E_MEMORY);
    }
    memset(rw, 0xa5, n);
    if (!add_mapped(m, n, MEM_DEVICE, 0, rw, fd, 0)) return fail(E_MEMORY);
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
    REQUIRE_DEVICE();
    need_context();
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
static void drain_all(void);
static void check_free(const char *call, const void *p);
API int cudaFree(void *p)
{
    REQUIRE_DEVICE();
    if (!p) return OK;
    drain_all(); /* cudaFree synchronizes the device */
    check_free("cudaFree", p);
    alloc_t *a = take(p, MEM_DEVICE);
    if (!a || a->opened) return fail(E_INVALID_VALUE);
    if (a->rw) {
        unmap_alloc(a);
        pthread_mutex_lock(&lock);
        reuse_p = a->p;
        reuse_n = a->n;
        pthread_mutex_unlock(&lock);
    } else {
        free(a->p);
    }
    free(a);
    __atomic_sub_fetch(&fake_cuda_live_device_allocs, 1, __ATOMIC_RELAXED);
    return OK;
}
API int cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    REQUIRE_DEVICE();
    need_context();
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
    REQUIRE_DEVICE();
    check_free("cudaFreeHost", p);
    alloc_t *a = take(p, MEM_HOST);
    if (!a || a->registered) return fail(E_INVALID_VALUE);
    free(a->p);
    free(a);
    __atomic_sub_fetch(&fake_cuda_live_host_allocs, 1, __ATOMIC_RELAXED);
    return OK;
}
API int cudaHostRegister(void *p, size_t n, unsigned flags)
{
    REQUIRE_DEVICE();
    need_context();
    const char *lo = p, *hi = lo + (n ? n : 1);
    int overlap = 0;
    pthread_mutex_lock(&lock);
    for (alloc_t *a = allocs; a && !overlap; a = a->next)
        overlap = lo < a->p + (a->n ? a->n : 1) && a->p < hi;
    pthread_mutex_unlock(&lock);
    if (overlap) return fail(E_HOST_REGISTERED);
    return add(p, n, MEM_HOST, 1) == OK ? OK : fail(E_MEMORY);
}
API int cudaHostUnregister(void *p)
{
    REQUIRE_DEVICE();
    alloc_t *a = take(p, MEM_HOST);
    if (!a || !a->registered) return fail(E_INVALID_VALUE);
    free(a);
    return OK;
}

/* ---- streams: queued work -------------------------------------------------------
 * Every queued operation has a process-wide sequence number (queue order). A
 * stream runs its operations in order; dependencies point to smaller numbers
 * only, so forcing a stream up to an operation always terminates. */
enum { OP_COPY, OP_SET, OP_WRITE, OP_MARK, OP_WAIT };
typedef struct op {
    int kind;
    uint64_t seq;
    int lag;             /* ticks it still waits at the head of its stream */
    int stuck;           /* queued under FAKE_CUDA_STUCK: runs only after fake_cuda_unstick() */
    void *dst;
    const void *src;
    size_t n;
    int value;
    char *data;          /* OP_WRITE: the bytes it writes (owned) */
    uint64_t wait_stream, wait_seq; /* OP_WAIT: runs once that stream got past wait_seq */
    struct op *next;
} op_t;

#define STREAM_MAGIC 0x5757
#define STREAM_NON_BLOCKING 1u
typedef struct fake_stream {
    int magic;
    unsigned flags;
    int device;
    int legacy;
    uint64_t id;
    op_t *head, *tail;
    struct fake_stream *next;
} fake_stream_t;
static fake_stream_t *streams; /* every stream of the process, the legacy ones too (and
                                 * destroyed ones whose stuck work has not run yet) */
static fake_stream_t *legacy_streams[MAX_DEVICES];
static uint64_t seqs, stream_ids;
static int unstuck; /* fake_cuda_unstick() was called: stuck work may run */

/* Stuck work that may not run yet. Lock held. */
static int held(const op_t *op) { return op->stuck && !unstuck; }

/* The hung kernel ends: stuck work runs at the next poll or synchronization. */
API void fake_cuda_unstick(void)
{
    pthread_mutex_lock(&lock);
    unstuck = 1;
    pthread_mutex_unlock(&lock);
}

static fake_stream_t *stream_by_id(uint64_t id)
{
    for (fake_stream_t *s = streams; s; s = s->next)
        if (s->id == id) return s;
    return NULL;
}
/* Lock held. */
static fake_stream_t *legacy_of(int dev)
{
    if (!legacy_streams[dev]) {
        fake_stream_t *s = calloc(1, sizeof *s);
        if (!s) return NULL;
        *s = (fake_stream_t){STREAM_MAGIC, 0, dev, 1, ++stream_ids, NULL, NULL, streams};
        streams = s;
        legacy_streams[dev] = s;
    }
    return legacy_streams[dev];
}
/* The stream a handle names (NULL, cudaStreamLegacy and cudaStreamPerThread: the legacy
 * stream of the current device); NULL when it is not a stream. Lock held. */
static fake_stream_t *resolve(void *handle)
{
    if ((uintptr_t)handle <= 2) return legacy_of(cur_device);
    fake_stream_t *s = handle;
    for (fake_stream_t *t = streams; t; t = t->next)
        if (t == s && s->magic == STREAM_MAGIC) return s;
    return NULL;
}
static int blocking(const fake_stream_t *s) { return !s->legacy && !(s->flags & STREAM_NON_BLOCKING); }

/* Has stream `id` run everything up to seq (a stream that is gone has)? Lock held. */
static int reached(uint64_t id, uint64_t seq)
{
    fake_stream_t *s = stream_by_id(id);
    return !s || !s->head || s->head->seq > seq;
}

/* May op, at the head of s, run now? Lock held. */
static int ready(const fake_stream_t *s, const op_t *op)
{
    if (held(op)) return 0;
    if (op->kind == OP_WAIT && !reached(op->wait_stream, op->wait_seq)) return 0;
    if (s->legacy) {
        for (fake_stream_t *t = streams; t; t = t->next)
            if (t->device == s->device && blocking(t) && t->head && t->head->seq < op->seq) return 0;
    } else if (blocking(s)) {
        fake_stream_t *l = legacy_streams[s->device];
        if (l && l->head && l->head->seq < op->seq) return 0;
    }
    return 1;
}

static void run_head(fake_stream_t *s)
{
    op_t *op = s->head;
    switch (op->kind) {
    case OP_COPY: memmove(view_locked(op->dst), view_locked(op->src), op->n); break;
    case OP_SET: memset(view_locked(op->dst), op->value, op->n); break;
    case OP_WRITE: memcpy(view_locked(op->dst), op->data, op->n); break;
    default: break;
    }
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    free(op->data);
    free(op);
}

/* Run s up to and including operation seq, with what it depends on (lags
 * ignored). Returns 0, or 1 when stuck work (or work that waits for it)
 * stopped it short. Lock held. */
static int run_until(fake_stream_t *s, uint64_t seq)
{
    while (s->head && s->head->seq <= seq) {
        op_t *op = s->head;
        if (op->kind == OP_WAIT) {
            fake_stream_t *w = stream_by_id(op->wait_stream);
            if (w) run_until(w, op->wait_seq);
        }
        if (s->legacy) {
            for (fake_stream_t *t = streams; t; t = t->next)
                if (t->device == s->device && blocking(t)) run_until(t, op->seq - 1);
        } else if (blocking(s) && legacy_streams[s->device]) {
            run_until(legacy_streams[s->device], op->seq - 1);
        }
        if (!ready(s, op)) return 1;
        run_head(s);
    }
    return 0;
}

/* A synchronizing call that stuck work stopped: on a GPU it would never return. Lock held. */
static void stuck_wait(int stopped)
{
    if (stopped) __atomic_add_fetch(&fake_cuda_stuck_waits, 1, __ATOMIC_RELAXED);
}

/* Does queued work that has not run yet read or write [p, p + n)? Lock held. */
static int queued_work_targets(const char *p, size_t n)
{
    const char *end = p + (n ? n : 1);
    for (fake_stream_t *s = streams; s; s = s->next)
        for (const op_t *op = s->head; op; op = op->next) {
            if (op->kind != OP_COPY && op->kind != OP_SET && op->kind != OP_WRITE) continue;
            const char *d = op->dst, *r = op->src;
            if (op->n && d < end && p < d + op->n) return 1;
            if (op->kind == OP_COPY && op->n && r < end && p < r + op->n) return 1;
        }
    return 0;
}

/* Freeing memory that queued work still targets: counted and reported. */
static void check_free(const char *call, const void *p)
{
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int bad = a && queued_work_targets(a->p, a->n);
    pthread_mutex_unlock(&lock);
    if (!bad) return;
    __atomic_add_fetch(&fake_cuda_queued_frees, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "fake CUDA: %s(%p) while queued work that has not run yet reads or writes it "
            "(a use after free on a GPU)\n", call, p);
}

/* One poll: every stream's head ages by a tick, then whatever may run runs. Lock held. */
static void tick(void)
{
    for (fake_stream_t *s = streams; s; s = s->next)
        if (s->head && s->head->lag > 0) s->head->lag--;
    for (int moved = 1; moved;) {
        moved = 0;
        for (fake_stream_t *s = streams; s; s = s->next)
            while (s->head && s->head->lag == 0 && ready(s, s->head)) {
                run_head(s);
                moved = 1;
            }
    }
}

static void drain_all(void)
{
    pthread_mutex_lock(&lock);
    int stopped = 0;
    for (fake_stream_t *s = streams; s; s = s->next) stopped |= run_until(s, UINT64_MAX);
    stuck_wait(stopped);
    pthread_mutex_unlock(&lock);
}

/* Queue op (a copy of *tmpl) on stream handle; its sequence number in *seq. */
static int enqueue(void *handle, const op_t *tmpl, int lag, uint64_t *seq, fake_stream_t **on)
{
    op_t *op = malloc(sizeof *op);
    if (!op) return E_MEMORY;
    *op = *tmpl;
    op->lag = lag;
    op->stuck = env_int("FAKE_CUDA_STUCK", 0);
    op->next = NULL;
    pthread_mutex_lock(&lock);
    fake_stream_t *s = resolve(handle);
    if (!s) {
        pthread_mutex_unlock(&lock);
        free(op);
        return E_INVALID_HANDLE;
    }
    op->seq = ++seqs;
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    if (seq) *seq = op->seq;
    if (on) *on = s;
    if (env_int("FAKE_CUDA_IMMEDIATE", 0)) run_until(s, op->seq);
    pthread_mutex_unlock(&lock);
    return OK;
}

/* Pageable host memory (neither device memory nor pinned)? */
static int pageable(const void *p)
{
    pthread_mutex_lock(&lock);
    int r = find(p) == NULL;
    pthread_mutex_unlock(&lock);
    return r;
}

/* Run stream handle up to seq (a copy from or to pageable memory is synchronous). */
static void run_to(void *handle, uint64_t seq)
{
    pthread_mutex_lock(&lock);
    fake_stream_t *s = resolve(handle);
    if (s) stuck_wait(run_until(s, seq));
    pthread_mutex_unlock(&lock);
}

API int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    REQUIRE_DEVICE();
    if (kind != 4) return fail(E_INVALID_VALUE);
    need_context();
    __atomic_add_fetch(&fake_cuda_memcpy_calls, 1, __ATOMIC_RELAXED);
    op_t op = {.kind = OP_COPY, .dst = dst, .src = src, .n = n};
    uint64_t seq;
    int e = enqueue(stream, &op, env_int("FAKE_CUDA_LAG", 0), &seq, NULL);
    if (e != OK) return fail(e);
    if (n && (pageable(dst) || pageable(src))) run_to(stream, seq);
    return OK;
}
API int cudaMemsetAsync(void *dst, int v, size_t n, void *stream)
{
    REQUIRE_DEVICE();
    need_context();
    op_t op = {.kind = OP_SET, .dst = dst, .n = n, .value = v};
    int e = enqueue(stream, &op, env_int("FAKE_CUDA_LAG", 0), NULL, NULL);
    return e == OK ? OK : fail(e);
}
/*
 * For tests: an application kernel still running on `stream` that will write
 * n bytes of src into device memory dst. It lands when that stream gets there
 * (a synchronization, or `polls` ticks after it reached the head).
 */
API int fake_cuda_enqueue_write(void *stream, void *dst, const void *src, size_t n, int polls)
{
    op_t op = {.kind = OP_WRITE, .dst = dst, .n = n, .data = malloc(n ? n : 1)};
    if (!op.data) return E_MEMORY;
    memcpy(op.data, src, n);
    int e = enqueue(stream, &op, polls, NULL, NULL);
    if (e != OK) free(op.data);
    return e;
}

API int cudaStreamCreateWithFlags(void **s, unsigned flags)
{
    REQUIRE_DEVICE();
    need_context();
    fake_stream_t *st = calloc(1, sizeof *st);
    if (!st) return fail(E_MEMORY);
    pthread_mutex_lock(&lock);
    *st = (fake_stream_t){STREAM_MAGIC, flags, cur_device, 0, ++stream_ids, NULL, NULL, streams};
    streams = st;
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(&fake_cuda_live_streams, 1, __ATOMIC_RELAXED);
    *s = st;
    return OK;
}
/* Work still queued completes first (CUDA lets it finish after the call returns). */
API int cudaStreamDestroy(void *s)
{
    REQUIRE_DEVICE();
    pthread_mutex_lock(&lock);
    fake_stream_t *st = (uintptr_t)s <= 2 ? NULL : resolve(s);
    if (!st) {
        pthread_mutex_unlock(&lock);
        return fail(E_INVALID_HANDLE);
    }
    st->magic = 0; /* the handle is gone either way */
    if (run_until(st, UINT64_MAX) == 0) {
        for (fake_stream_t **pp = &streams; *pp; pp = &(*pp)->next)
            if (*pp == st) {
                *pp = st->next;
                break;
            }
        free(st);
    } /* else it stays listed, without a handle, until its stuck work has run */
    pthread_mutex_unlock(&lock);
    __atomic_sub_fetch(&fake_cuda_live_streams, 1, __ATOMIC_RELAXED);
    return OK;
}
/* The work queued on the stream so far (and what it depends on); an empty stream
 * returns at once, whatever other streams still run. */
API int cudaStreamSynchronize(void *s)
{
    REQUIRE_DEVICE();
    pthread_mutex_lock(&lock);
    fake_stream_t *st = resolve(s);
    if (st && st->tail) stuck_wait(run_until(st, st->tail->seq));
    pthread_mutex_unlock(&lock);
    return st ? OK : fail(E_INVALID_HANDLE);
}
API int cudaStreamQuery(void *s)
{
    REQUIRE_DEVICE();
    pthread_mutex_lock(&lock);
    fake_stream_t *st = resolve(s);
    if (st) tick();
    int r = !st ? E_INVALID_HANDLE : st->head ? E_NOT_READY : OK;
    pthread_mutex_unlock(&lock);
    return r == OK || r == E_NOT_READY ? r : fail(r);
}

/* ---- events ---------------------------------------------------------------------- */
typedef struct fake_event {
    int device;
    int recorded;
    uint64_t stream, seq; /* the marker of the last record */
    int polls_left;
    int never;      /* recorded while FAKE_CUDA_EVENT_NEVER was set */
    int generation; /* of the record: a release ends every earlier one */
} fake_event_t;
static int generation;

API int cudaStreamWaitEvent(void *s, void *e, unsigned flags)
{
    REQUIRE_DEVICE();
    fake_event_t *ev = e;
    if (!ev) return fail(E_INVALID_HANDLE);
    pthread_mutex_lock(&lock);
    op_t wait = {.kind = OP_WAIT, .wait_stream = ev->stream, .wait_seq = ev->seq};
    int recorded = ev->recorded;
    pthread_mutex_unlock(&lock);
    if (!recorded) return OK; /* waiting for an event never recorded waits for nothing */
    int r = enqueue(s, &wait, 0, NULL, NULL);
    return r == OK ? OK : fail(r);
}

/* What ncclCommAbort does to the kernels it kills: everything recorded so far ends. */
API void fake_cuda_release_events(void)
{
    pthread_mutex_lock(&lock);
    generation++;
    pthread_mutex_unlock(&lock);
}

API int cudaEventCreateWithFlags(void **e, unsigned flags)
{
    REQUIRE_DEVICE();
    need_context();
    fake_event_t *ev = calloc(1, sizeof *ev);
    if (!ev) return fail(E_MEMORY);
    ev->device = cur_device;
    __atomic_add_fetch(&fake_cuda_live_events, 1, __ATOMIC_RELAXED);
    *e = ev;
    return OK;
}
/* As CUDA: the event and the stream must belong to the same device. */
API int cudaEventRecord(void *e, void *s)
{
    REQUIRE_DEVICE();
    fake_event_t *ev = e;
    if (!ev) return fail(E_INVALID_HANDLE);
    pthread_mutex_lock(&lock);
    fake_stream_t *st = resolve(s);
    int dev = st ? st->device : -1;
    pthread_mutex_unlock(&lock);
    if (!st || dev != ev->device) return fail(E_INVALID_HANDLE);
    op_t mark = {.kind = OP_MARK};
    uint64_t seq;
    int r = enqueue(s, &mark, 0, &seq, &st);
    if (r != OK) return fail(r);
    pthread_mutex_lock(&lock);
    ev->recorded = 1;
    ev->stream = st->id;
    ev->seq = seq;
    ev->polls_left = env_int("FAKE_CUDA_EVENT_POLLS", 0);
    ev->never = env_int("FAKE_CUDA_EVENT_NEVER", 0);
    ev->generation = generation;
    pthread_mutex_unlock(&lock);
    return OK;
}
API int cudaEventQuery(void *e)
{
    REQUIRE_DEVICE();
    fake_event_t *ev = e;
    int r = OK;
    pthread_mutex_lock(&lock);
    tick();
    if (ev->recorded && !reached(ev->stream, ev->seq)) r = E_NOT_READY;
    else if (ev->never && ev->generation == generation) r = E_NOT_READY;
    else if (ev->polls_left > 0) {
        ev->polls_left--;
        r = E_NOT_READY;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
API int cudaEventSynchronize(void *e)
{
    REQUIRE_DEVICE();
    fake_event_t *ev = e;
    pthread_mutex_lock(&lock);
    fake_stream_t *st = ev->recorded ? stream_by_id(ev->stream) : NULL;
    if (st) stuck_wait(run_until(st, ev->seq));
    ev->polls_left = 0;
    pthread_mutex_unlock(&lock);
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
    uint64_t offset, size, serial, base;
} ipc_wire_t;
#define IPC_MAGIC 0x1bc0ffeeu

API int cudaIpcGetMemHandle(ipc_handle_t *h, void *p)
{
    REQUIRE_DEVICE();
    memset(h, 0, sizeof *h);
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int ok = a && a->type == MEM_DEVICE;
    ipc_wire_t w = {0, 0, 0, 0, 0, 0, 0};
    if (ok && a->rw) {
        if (a->opened) ok = 0; /* as CUDA: only the owner can export */
        w = (ipc_wire_t){IPC_MAGIC, (int32_t)getpid(), a->fd, (uint64_t)((char *)p - a->p),
                         (uint64_t)a->n, a->serial, (uint64_t)(uintptr_t)a->p};
    }
    pthread_mutex_unlock(&lock);
    /* Unguarded memory is plain malloc: no other process could map it
     * (as memory from a pool that is not IPC-capable). */
    if (!ok || !w.magic) return fail(E_INVALID_VALUE);
    memcpy(h->reserved, &w, sizeof w);
    return OK;
}
API int fake_cuda_ipc_opens, fake_cuda_ipc_live;

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
    REQUIRE_DEVICE();
    need_context();
    __atomic_add_fetch(&fake_cuda_ipc_opens, 1, __ATOMIC_RELAXED);
    const char *refuse = getenv("FAKE_CUDA_IPC_REFUSE");
    if (refuse && strcmp(refuse, "1") == 0) return fail(E_INVALID_VALUE);
    ipc_wire_t w;
    memcpy(&w, h.reserved, sizeof w);
    if (w.magic != IPC_MAGIC) return fail(E_INVALID_VALUE);
    if (w.pid == getpid()) return fail(E_INVALID_VALUE); /* CUDA refuses a handle of this process */
    /* The owner's address range is mapped here already (the same handle, or a stale
     * mapping of memory the owner freed and allocated again at that address). */
    int mapped = 0;
    pthread_mutex_lock(&lock);
    for (alloc_t *a = allocs; a && !mapped; a = a->next)
        mapped = a->opened && a->owner_pid == w.pid && w.base < a->owner_base + a->n && a->owner_base < w.base + w.size;
    pthread_mutex_unlock(&lock);
    if (mapped) return fail(E_ALREADY_MAPPED);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return fail(E_INVALID_VALUE);
    char *m, *rw;
    int e = guard_map(fd, (size_t)w.size, &m, &rw, NULL);
    close(fd);
    if (e != OK) return fail(e);
    alloc_t *a = add_mapped(m, (size_t)w.size, MEM_DEVICE, 0, rw, -1, 1);
    if (!a) return fail(E_MEMORY);
    pthread_mutex_lock(&lock);
    a->owner_pid = w.pid;
    a->owner_base = w.base;
    pthread_mutex_unlock(&lock);
    __atomic_add_fetch(&fake_cuda_ipc_live, 1, __ATOMIC_RELAXED);
    *p = m + w.offset;
    return OK;
}
API int cudaIpcCloseMemHandle(void *p)
{
    REQUIRE_DEVICE();
    drain_all(); /* no queued copy may still read the mapping */
    pthread_mutex_lock(&lock);
    alloc_t *a = find(p);
    int opened = a && a->opened;
    pthread_mutex_unlock(&lock);
    if (!opened) return OK; /* unguarded handles map nothing */
    a = take(a->p, MEM_DEVICE);
    if (!a) return fail(E_INVALID_VALUE);
    unmap_alloc(a);
    free(a);
    __atomic_sub_fetch(&fake_cuda_ipc_live, 1, __ATOMIC_RELAXED);
    return OK;
}
#endif /* FAKE_PARTIAL */
