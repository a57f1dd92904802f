/* SPDX-License-Identifier: BSD-3-Clause */
#include "pinned.h"
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "base/config.h"
#include "base/error.h"
#include "gpurt.h"
#include "base/log.h"

#define PIN_PAGE ((size_t)4096)
#define PIN_NCLASS 208
#define PIN_HASH 1024

typedef enum blk_state { BLK_IN_USE, BLK_CACHED, BLK_REGISTERED } blk_state_t;

typedef struct pin_block {
    void *ptr;        /* what the user sees */
    void *base;       /* what was pinned (page-aligned start for mlock'ed registrations) */
    size_t size;      /* bytes counted against the limit */
    mlc_pinned_mode_t how; /* CUDA, HIP or MLOCK */
    blk_state_t state;
    unsigned cls;
    struct pin_block *hnext;              /* hash chain by ptr */
    struct pin_block *lru_prev, *lru_next; /* cached: all classes, most recent first */
    struct pin_block *cprev, *cnext;      /* cached: same class, most recent first */
} pin_block_t;

struct mlc_pinned_pool {
    pthread_mutex_t lock;
    size_t limit;
    mlc_pinned_mode_t mode;
    size_t in_use, cached, reserved; /* reserved: being pinned right now, counts against the limit */
    uint64_t hits, misses, evictions, blocks_in_use, blocks_cached, regions;
    pin_block_t *hash[PIN_HASH];
    pin_block_t *lru_head, *lru_tail;
    pin_block_t *classes[PIN_NCLASS];
};

/* The system calls themselves: sanitizer runtimes replace mlock() with a no-op,
 * which would hide both the pinning and RLIMIT_MEMLOCK from sanitized builds. */
static int lock_pages(void *p, size_t n) { return (int)syscall(SYS_mlock, p, n); }
static int unlock_pages(void *p, size_t n) { return (int)syscall(SYS_munlock, p, n); }

const char *mlc_pinned_mode_name(mlc_pinned_mode_t mode)
{
    switch (mode) {
#define MLC_X_CASE(name, text) \
    case name:                 \
        return text;
        MLC_PINNED_MODE_LIST(MLC_X_CASE)
#undef MLC_X_CASE
    }
    return "unknown";
}

/* ---- size classes ------------------------------------------------------- */
/* Up to 16 KiB: page multiples (classes 0..3). Above: 4 classes per power of
 * two, (1.25, 1.5, 1.75, 2) x 2^k, so rounding wastes at most 25%. */
static bool class_of(size_t n, size_t *size, unsigned *cls)
{
    if (n == 0 || n > ((size_t)1 << 62)) return false;
    if (n <= 4 * PIN_PAGE) {
        size_t pages = (n + PIN_PAGE - 1) / PIN_PAGE;
        *size = pages * PIN_PAGE;
        *cls = (unsigned)(pages - 1);
        return true;
    }
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 2);
    size_t j = (n + step - 1) / step; /* 5..8 */
    *size = j * step;
    *cls = 4 + (k - 14) * 4 + (unsigned)(j - 5);
    return true;
}

size_t mlc_pinned_class_size(size_t bytes)
{
    size_t size = 0;
    unsigned cls;
    return class_of(bytes, &size, &cls) ? size : 0;
}

/* ---- lists --------------------------------------------------------------- */
static unsigned hash_ptr(const void *p)
{
    uintptr_t v = (uintptr_t)p >> 12;
    v ^= v >> 17;
    v *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(v >> 40) % PIN_HASH;
}

static void hash_insert(mlc_pinned_pool_t *pool, pin_block_t *b)
{
    unsigned h = hash_ptr(b->ptr);
    b->hnext = pool->hash[h];
    pool->hash[h] = b;
}

static pin_block_t *hash_find(mlc_pinned_pool_t *pool, const void *ptr, bool unlink)
{
    pin_block_t **pp = &pool->hash[hash_ptr(ptr)];
    for (; *pp; pp = &(*pp)->hnext) {
        if ((*pp)->ptr == ptr) {
            pin_block_t *b = *pp;
            if (unlink) *pp = b->hnext;
            return b;
        }
    }
    return NULL;
}

static void cache_push(mlc_pinned_pool_t *pool, pin_block_t *b)
{
    b->state = BLK_CACHED;
    b->lru_prev = NULL;
    b->lru_next = pool->lru_head;
    if (pool->lru_head) pool->lru_head->lru_prev = b;
    pool->lru_head = b;
    if (!pool->lru_tail) pool->lru_tail = b;
    b->cprev = NULL;
    b->cnext = pool->classes[b->cls];
    if (b->cnext) b->cnext->cprev = b;
    pool->classes[b->cls] = b;
    pool->cached += b->size;
    pool->blocks_cached++;
}

static void cache_remove(mlc_pinned_pool_t *pool, pin_block_t *b)
{
    if (b->lru_prev) b->lru_prev->lru_next = b->lru_next;
    else pool->lru_head = b->lru_next;
    if (b->lru_next) b->lru_next->lru_prev = b->lru_prev;
    else pool->lru_tail = b->lru_prev;
    if (b->cprev) b->cprev->cnext = b->cnext;
    else pool->classes[b->cls] = b->cnext;
    if (b->cnext) b->cnext->cprev = b->cprev;
    b->lru_prev = b->lru_next = b->cprev = b->cnext = NULL;
    pool->cached -= b->size;
    pool->blocks_cached--;
}

/* ---- pinning ------------------------------------------------------------- */
static const mlc_gpurt_t *rt_of(mlc_pinned_mode_t how)
{
    return mlc_gpurt_peek(how == MLC_PINNED_HIP ? MLC_GPU_HIP : MLC_GPU_CUDA);
}

/* A loaded runtime pins only with a device behind it (no driver, no GPU: every call fails). */
static bool has_device(const mlc_gpurt_t *rt)
{
    int n = 0;
    if (!rt) return false;
    if (rt->get_device_count(&n) == MLC_GPU_SUCCESS && n > 0) return true;
    rt->get_last_error();
    return false;
}

/* The pinning method for a new block now. */
static mlc_pinned_mode_t current_how(const mlc_pinned_pool_t *pool)
{
    if (pool->mode != MLC_PINNED_AUTO) return pool->mode;
    if (has_device(mlc_gpurt_peek(MLC_GPU_CUDA))) return MLC_PINNED_CUDA;
    if (has_device(mlc_gpurt_peek(MLC_GPU_HIP))) return MLC_PINNED_HIP;
    return MLC_PINNED_MLOCK;
}

static mlc_status_t mlock_error(int err, size_t bytes, const char *what)
{
    struct rlimit rl;
    char soft[32] = "unknown", hard[32] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY) snprintf(soft, sizeof soft, "unlimited");
        else snprintf(soft, sizeof soft, "%llu", (unsigned long long)rl.rlim_cur);
        if (rl.rlim_max == RLIM_INFINITY) snprintf(hard, sizeof hard, "unlimited");
        else snprintf(hard, sizeof hard, "%llu", (unsigned long long)rl.rlim_max);
    }
    /* How much this process has locked already (VmLck in /proc/self/status). */
    char locked[32] = "unknown";
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "VmLck: %llu kB", &kb) == 1) {
                snprintf(locked, sizeof locked, "%llu", kb * 1024ull);
                break;
            }
        }
        fclose(f);
    }
    mlc_status_t st = err == EPERM ? MLC_ERR_SYSTEM : MLC_ERR_NO_MEMORY;
    return mlc_error(st,
                     "pinned memory: %s of %zu bytes failed: %s (errno %d): RLIMIT_MEMLOCK is "
                     "%s bytes (hard %s), the process already locks %s bytes; raise the limit "
                     "(ulimit -l, or memlock in /etc/security/limits.conf, or grant "
                     "CAP_IPC_LOCK) or lower MLC_PINNED_LIMIT",
                     what, bytes, strerror(err), err, soft, hard, locked);
}

static mlc_status_t rt_error(const mlc_gpurt_t *rt, int e, const char *fn, size_t bytes)
{
    char buf[256];
    rt->get_last_error();
    /* cudaErrorMemoryAllocation / hipErrorOutOfMemory are 2 in both APIs */
    return mlc_error(e == 2 ? MLC_ERR_NO_MEMORY : MLC_ERR_BACKEND, "pinned memory: %s%s(%zu bytes): %s",
                     rt->prefix, fn, bytes, mlc_gpurt_strerror(rt, e, buf, sizeof buf));
}

static mlc_status_t pin_new(mlc_pinned_mode_t how, size_t size, void **out)
{
    if (how == MLC_PINNED_MLOCK) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return mlc_error(MLC_ERR_NO_MEMORY, "pinned memory: mmap of %zu bytes failed: %s", size,
                             strerror(errno));
        if (lock_pages(p, size) != 0) {
            int err = errno;
            munmap(p, size);
            return mlock_error(err, size, "mlock");
        }
        *out = p;
        return MLC_SUCCESS;
    }
    const mlc_gpurt_t *rt = rt_of(how);
    void *p = NULL;
    int e = rt->host_alloc(&p, size, MLC_GPU_HOST_ALLOC_PORTABLE);
    if (e != MLC_GPU_SUCCESS) return rt_error(rt, e, how == MLC_PINNED_HIP ? "HostMalloc" : "HostAlloc", size);
    *out = p;
    return MLC_SUCCESS;
}

static void unpin(pin_block_t *b)
{
    if (b->state == BLK_REGISTERED) {
        if (b->how == MLC_PINNED_MLOCK) unlock_pages(b->base, b->size);
        else rt_of(b->how)->host_unregister(b->ptr);
    } else if (b->how == MLC_PINNED_MLOCK) {
        unlock_pages(b->ptr, b->size);
        munmap(b->ptr, b->size);
    } else {
        rt_of(b->how)->free_host(b->ptr);
    }
    free(b);
}

/*
 * Make room for `need` more bytes under the limit by taking the least
 * recently freed cached blocks off the lists; they are returned in *victims
 * (linked by lru_next) to be unpinned outside the lock. Lock held.
 */
static bool make_room(mlc_pinned_pool_t *pool, size_t need, pin_block_t **victims)
{
    *victims = NULL;
    if (need > pool->limit) return false;
    while (pool->in_use + pool->cached + pool->reserved + need > pool->limit) {
        pin_block_t *b = pool->lru_tail;
        if (!b) return false;
        cache_remove(pool, b);
        hash_find(pool, b->ptr, true);
        b->lru_next = *victims;
        *victims = b;
        pool->evictions++;
    }
    return true;
}

static void unpin_all(pin_block_t *list)
{
    while (list) {
        pin_block_t *next = list->lru_next;
        unpin(list);
        list = next;
    }
}

static mlc_status_t limit_error(mlc_pinned_pool_t *pool, size_t requested, size_t size)
{
    return mlc_error(MLC_ERR_NO_MEMORY,
                     "pinned memory limit reached: %zu bytes requested (%zu with size-class "
                     "rounding), limit %zu bytes (MLC_PINNED_LIMIT), %zu bytes in use, %zu being "
                     "pinned, no cached block left to evict",
                     requested, size, pool->limit, pool->in_use, pool->reserved);
}

/* Lock held: reserve `size` bytes under the limit (evicting cached blocks),
 * then unlock and unpin the evicted ones outside the lock. `requested` is the
 * caller's size, for the message when even eviction cannot make room. */
static mlc_status_t reserve_and_unlock(mlc_pinned_pool_t *pool, size_t requested, size_t size)
{
    pin_block_t *victims;
    bool fits = make_room(pool, size, &victims);
    mlc_status_t st = MLC_SUCCESS;
    if (!fits) st = limit_error(pool, requested, size);
    else pool->reserved += size;
    pthread_mutex_unlock(&pool->lock);
    unpin_all(victims);
    return st;
}

/* ---- public -------------------------------------------------------------- */
mlc_status_t mlc_pinned_pool_create(size_t limit, mlc_pinned_mode_t mode, mlc_pinned_pool_t **out)
{
    if (!out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_pinned_pool_create: pool is NULL");
    if (mode < MLC_PINNED_AUTO || mode > MLC_PINNED_MLOCK)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_pinned_pool_create: unknown mode %d", (int)mode);
    if (limit == 0) {
        mlc_status_t st = mlc_env_size(MLC_ENV_PINNED_LIMIT, &limit, NULL);
        if (st != MLC_SUCCESS) return st;
    }
    if (mode == MLC_PINNED_CUDA || mode == MLC_PINNED_HIP) {
        const mlc_gpurt_t *rt;
        mlc_status_t st = mlc_gpurt_get(mode == MLC_PINNED_CUDA ? MLC_GPU_CUDA : MLC_GPU_HIP, &rt);
        if (st != MLC_SUCCESS) return st;
    }
    mlc_pinned_pool_t *pool = calloc(1, sizeof *pool);
    if (!pool) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_pinned_pool_create: out of memory");
    pthread_mutex_init(&pool->lock, NULL);
    pool->limit = limit;
    pool->mode = mode;
    *out = pool;
    return MLC_SUCCESS;
}

void mlc_pinned_pool_destroy(mlc_pinned_pool_t *pool)
{
    if (!pool) return;
    if (pool->blocks_in_use || pool->regions)
        MLC_WARN("pinned memory pool destroyed with %llu blocks in use and %llu registered regions",
                 (unsigned long long)pool->blocks_in_use, (unsigned long long)pool->regions);
    for (unsigned h = 0; h < PIN_HASH; h++) {
        pin_block_t *b = pool->hash[h];
        while (b) {
            pin_block_t *next = b->hnext;
            unpin(b);
            b = next;
        }
    }
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static mlc_pinned_pool_t *default_pool;
static mlc_status_t default_status;
static char default_why[512];

static void make_default(void)
{
    default_status = mlc_pinned_pool_create(0, MLC_PINNED_AUTO, &default_pool);
    if (default_status != MLC_SUCCESS) snprintf(default_why, sizeof default_why, "%s", mlc_last_error());
}

mlc_status_t mlc_pinned_default(mlc_pinned_pool_t **pool)
{
    pthread_once(&default_once, make_default);
    if (default_status != MLC_SUCCESS) return mlc_error(default_status, "%s", default_why);
    *pool = default_pool;
    return MLC_SUCCESS;
}

mlc_status_t mlc_pinned_alloc(mlc_pinned_pool_t *pool, size_t bytes, void **ptr)
{
    if (!pool || !ptr) return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: pool or ptr is NULL");
    size_t size;
    unsigned cls;
    if (!class_of(bytes, &size, &cls))
        return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: bad size %zu bytes", bytes);

    pthread_mutex_lock(&pool->lock);
    mlc_pinned_mode_t how = current_how(pool);
    for (pin_block_t *b = pool->classes[cls]; b; b = b->cnext) {
        if (b->how != how) continue;
        cache_remove(pool, b);
        b->state = BLK_IN_USE;
        pool->in_use += b->size;
        pool->blocks_in_use++;
        pool->hits++;
        pthread_mutex_unlock(&pool->lock);
        *ptr = b->ptr;
        return MLC_SUCCESS;
    }
    mlc_status_t st = reserve_and_unlock(pool, bytes, size);
    if (st != MLC_SUCCESS) return st;

    /* Pin outside the lock: cudaHostAlloc can take milliseconds. */
    pin_block_t *b = calloc(1, sizeof *b);
    void *p = NULL;
    if (!b) st = mlc_error(MLC_ERR_NO_MEMORY, "pinned pool: out of memory");
    else st = pin_new(how, size, &p);

    pthread_mutex_lock(&pool->lock);
    pool->reserved -= size;
    if (st == MLC_SUCCESS) {
        *b = (pin_block_t){.ptr = p, .base = p, .size = size, .how = how, .state = BLK_IN_USE, .cls = cls};
        hash_insert(pool, b);
        pool->in_use += size;
        pool->blocks_in_use++;
        pool->misses++;
    }
    pthread_mutex_unlock(&pool->lock);
    if (st != MLC_SUCCESS) {
        free(b);
        return st;
    }
    *ptr = p;
    return MLC_SUCCESS;
}

mlc_status_t mlc_pinned_free(mlc_pinned_pool_t *pool, void *ptr)
{
    if (!pool) return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: pool is NULL");
    if (!ptr) return MLC_SUCCESS;
    pthread_mutex_lock(&pool->lock);
    pin_block_t *b = hash_find(pool, ptr, false);
    if (!b || b->state != BLK_IN_USE) {
        const char *why = !b ? "was not allocated by this pool"
                          : b->state == BLK_CACHED ? "was already freed"
                                                   : "is registered user memory (use mlc_pinned_unregister)";
        pthread_mutex_unlock(&pool->lock);
        return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: %p %s", ptr, why);
    }
    pool->in_use -= b->size;
    pool->blocks_in_use--;
    cache_push(pool, b);
    pthread_mutex_unlock(&pool->lock);
    return MLC_SUCCESS;
}

mlc_status_t mlc_pinned_register(mlc_pinned_pool_t *pool, void *ptr, size_t bytes)
{
    if (!pool || !ptr || bytes == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: pool, ptr or bytes is NULL/0");
    uintptr_t start = (uintptr_t)ptr & ~(uintptr_t)(PIN_PAGE - 1);
    uintptr_t end = ((uintptr_t)ptr + bytes + PIN_PAGE - 1) & ~(uintptr_t)(PIN_PAGE - 1);

    pthread_mutex_lock(&pool->lock);
    mlc_pinned_mode_t how = current_how(pool);
    size_t size = how == MLC_PINNED_MLOCK ? (size_t)(end - start) : bytes;
    if (hash_find(pool, ptr, false)) {
        pthread_mutex_unlock(&pool->lock);
        return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: %p is already pinned by this pool", ptr);
    }
    mlc_status_t st = reserve_and_unlock(pool, bytes, size);
    if (st != MLC_SUCCESS) return st;

    pin_block_t *b = calloc(1, sizeof *b);
    if (!b) {
        st = mlc_error(MLC_ERR_NO_MEMORY, "pinned pool: out of memory");
    } else if (how == MLC_PINNED_MLOCK) {
        if (lock_pages((void *)start, size) != 0) st = mlock_error(errno, size, "mlock of user memory");
    } else {
        const mlc_gpurt_t *rt = rt_of(how);
        int e = rt->host_register(ptr, bytes, MLC_GPU_HOST_REGISTER_PORTABLE);
        if (e != MLC_GPU_SUCCESS) st = rt_error(rt, e, "HostRegister", bytes);
    }

    pthread_mutex_lock(&pool->lock);
    pool->reserved -= size;
    if (st == MLC_SUCCESS) {
        *b = (pin_block_t){.ptr = ptr, .base = (void *)start, .size = size, .how = how,
                           .state = BLK_REGISTERED};
        hash_insert(pool, b);
        pool->in_use += size;
        pool->regions++;
    }
    pthread_mutex_unlock(&pool->lock);
    if (st != MLC_SUCCESS) free(b);
    return st;
}

mlc_status_t mlc_pinned_unregister(mlc_pinned_pool_t *pool, void *ptr)
{
    if (!pool || !ptr) return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: pool or ptr is NULL");
    pthread_mutex_lock(&pool->lock);
    pin_block_t *b = hash_find(pool, ptr, false);
    if (!b || b->state != BLK_REGISTERED) {
        pthread_mutex_unlock(&pool->lock);
        return mlc_error(MLC_ERR_INVALID_ARG, "pinned pool: %p was not registered with this pool", ptr);
    }
    hash_find(pool, ptr, true);
    pool->in_use -= b->size;
    pool->regions--;
    pthread_mutex_unlock(&pool->lock);
    unpin(b);
    return MLC_SUCCESS;
}

void mlc_pinned_trim(mlc_pinned_pool_t *pool)
{
    if (!pool) return;
    pin_block_t *victims = NULL;
    pthread_mutex_lock(&pool->lock);
    while (pool->lru_tail) {
        pin_block_t *b = pool->lru_tail;
        cache_remove(pool, b);
        hash_find(pool, b->ptr, true);
        b->lru_next = victims;
        victims = b;
    }
    pthread_mutex_unlock(&pool->lock);
    unpin_all(victims);
}

void mlc_pinned_get_stats(mlc_pinned_pool_t *pool, mlc_pinned_stats_t *stats)
{
    if (!pool || !stats) return;
    pthread_mutex_lock(&pool->lock);
    *stats = (mlc_pinned_stats_t){
        .limit = pool->limit,
        .bytes_pinned = pool->in_use + pool->cached,
        .bytes_in_use = pool->in_use,
        .bytes_cached = pool->cached,
        .hits = pool->hits,
        .misses = pool->misses,
        .evictions = pool->evictions,
        .blocks_in_use = pool->blocks_in_use,
        .blocks_cached = pool->blocks_cached,
        .regions_registered = pool->regions,
    };
    pthread_mutex_unlock(&pool->lock);
}

mlc_pinned_mode_t mlc_pinned_pool_mode(mlc_pinned_pool_t *pool)
{
    pthread_mutex_lock(&pool->lock);
    mlc_pinned_mode_t m = current_how(pool);
    pthread_mutex_unlock(&pool->lock);
    return m;
}
