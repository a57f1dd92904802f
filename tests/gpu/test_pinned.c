/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The pinned-memory pool: size classes, reuse (hits), LRU eviction at the
 * limit, the limit error, registration of user memory, statistics, thread
 * safety, MLC_PINNED_LIMIT, and RLIMIT_MEMLOCK reported precisely.
 *
 *   test_pinned mlock   mmap + mlock (every machine)
 *   test_pinned cuda    through the CUDA runtime (MLC_CUDART_LIB = the fake)
 */
#include <dlfcn.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../unit/unit.h"
#include "devrt/gpurt.h"
#include "devrt/pinned.h"

#define K 1024u

static void test_classes(void)
{
    static const size_t in[] = {1, 4096, 4097, 16384, 16385, 32768, 32769, 100000, (size_t)1 << 30};
    static const size_t out[] = {4096, 4096, 8192, 16384, 20480, 32768, 40960, 114688, (size_t)1 << 30};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK(mlc_pinned_class_size(in[i]) == out[i], "class of %zu is %zu, expected %zu", in[i],
              mlc_pinned_class_size(in[i]), out[i]);
    CHECK(mlc_pinned_class_size(0) == 0, "class of 0");
    /* Rounding never wastes more than a quarter above 16 KiB. */
    for (size_t n = 16385; n < 4u << 20; n = n * 5 / 4 + 7) {
        size_t c = mlc_pinned_class_size(n);
        CHECK(c >= n && (c - n) * 4 <= c, "class %zu for %zu", c, n);
    }
}

static void test_reuse_and_lru(mlc_pinned_mode_t mode)
{
    mlc_pinned_pool_t *pool;
    const size_t blk = 64 * K;
    CHECK_OK(mlc_pinned_pool_create(3 * blk, mode, &pool));
    void *a, *b, *c, *d, *e;
    mlc_pinned_stats_t s;
    CHECK_OK(mlc_pinned_alloc(pool, blk, &a));
    memset(a, 0x5a, blk); /* pinned memory is ordinary, writable memory */
    CHECK_OK(mlc_pinned_alloc(pool, blk - 100, &b));
    CHECK_OK(mlc_pinned_alloc(pool, blk, &c));
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.bytes_in_use == 3 * blk && s.misses == 3 && s.hits == 0, "in use %zu misses %llu", s.bytes_in_use,
          (unsigned long long)s.misses);
    /* Full: one more block cannot be pinned, and the message says why. */
    CHECK_ERR_MSG(mlc_pinned_alloc(pool, 1, &d), MLC_ERR_NO_MEMORY, "limit 196608 bytes");
    CHECK(strstr(mlc_last_error(), "196608 bytes in use") != NULL, "%s", mlc_last_error());
    CHECK_ERR_MSG(mlc_pinned_alloc(pool, 4 * blk, &d), MLC_ERR_NO_MEMORY, "262144 bytes requested");

    CHECK_OK(mlc_pinned_free(pool, a));
    CHECK_OK(mlc_pinned_free(pool, b));
    CHECK_OK(mlc_pinned_free(pool, c));
    CHECK_ERR_MSG(mlc_pinned_free(pool, c), MLC_ERR_INVALID_ARG, "already freed");
    int local;
    CHECK_ERR_MSG(mlc_pinned_free(pool, &local), MLC_ERR_INVALID_ARG, "not allocated by this pool");
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.bytes_cached == 3 * blk && s.bytes_in_use == 0 && s.blocks_cached == 3, "cached %zu", s.bytes_cached);

    /* 128 KiB needs two 64 KiB blocks evicted: the two freed first (a, b). */
    CHECK_OK(mlc_pinned_alloc(pool, 2 * blk, &d));
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.evictions == 2 && s.blocks_cached == 1, "evictions %llu cached %llu",
          (unsigned long long)s.evictions, (unsigned long long)s.blocks_cached);
    /* The survivor is c, the most recently freed: a hit, same address. */
    CHECK_OK(mlc_pinned_alloc(pool, blk, &e));
    CHECK(e == c, "LRU kept the wrong block (%p, expected %p)", e, c);
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.hits == 1 && s.bytes_pinned == 3 * blk && s.bytes_cached == 0, "hits %llu pinned %zu",
          (unsigned long long)s.hits, s.bytes_pinned);
    CHECK_OK(mlc_pinned_free(pool, d));
    CHECK_OK(mlc_pinned_free(pool, e));

    /* Registration counts against the limit and evicts cached blocks. */
    char *user = aligned_alloc(4096, 2 * blk);
    CHECK_OK(mlc_pinned_register(pool, user, 2 * blk));
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.regions_registered == 1 && s.bytes_in_use == 2 * blk && s.bytes_pinned <= 3 * blk,
          "registered: in use %zu pinned %zu", s.bytes_in_use, s.bytes_pinned);
    CHECK_ERR_MSG(mlc_pinned_register(pool, user, 16), MLC_ERR_INVALID_ARG, "already pinned");
    CHECK_ERR_MSG(mlc_pinned_free(pool, user), MLC_ERR_INVALID_ARG, "mlc_pinned_unregister");
    CHECK_OK(mlc_pinned_unregister(pool, user));
    CHECK_ERR_MSG(mlc_pinned_unregister(pool, user), MLC_ERR_INVALID_ARG, "was not registered");
    free(user);

    mlc_pinned_trim(pool);
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.bytes_pinned == 0 && s.blocks_cached == 0, "after trim: %zu pinned", s.bytes_pinned);
    CHECK_ERR_MSG(mlc_pinned_alloc(pool, 0, &d), MLC_ERR_INVALID_ARG, "bad size 0");
    mlc_pinned_pool_destroy(pool);
}

typedef struct worker {
    mlc_pinned_pool_t *pool;
    unsigned seed;
    int errors;
} worker_t;

static void *churn(void *p)
{
    worker_t *w = p;
    void *held[8] = {0};
    size_t sizes[8] = {0};
    for (int i = 0; i < 400; i++) {
        int slot = (int)(rand_r(&w->seed) % 8);
        if (held[slot]) {
            /* The block must still hold what we wrote: no one else got it. */
            if (((unsigned char *)held[slot])[sizes[slot] - 1] != (unsigned char)slot) w->errors++;
            if (mlc_pinned_free(w->pool, held[slot]) != MLC_SUCCESS) w->errors++;
            held[slot] = NULL;
        } else {
            size_t n = 1 + rand_r(&w->seed) % (96 * K);
            if (mlc_pinned_alloc(w->pool, n, &held[slot]) == MLC_SUCCESS) {
                sizes[slot] = n;
                memset(held[slot], slot, n);
            } else {
                held[slot] = NULL; /* limit reached: allowed under contention */
            }
        }
    }
    for (int s = 0; s < 8; s++)
        if (held[s] && mlc_pinned_free(w->pool, held[s]) != MLC_SUCCESS) w->errors++;
    return NULL;
}

static void test_threads(mlc_pinned_mode_t mode)
{
    mlc_pinned_pool_t *pool;
    CHECK_OK(mlc_pinned_pool_create(2u << 20, mode, &pool));
    pthread_t t[4];
    worker_t w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_t){pool, 1234u + (unsigned)i, 0};
        pthread_create(&t[i], NULL, churn, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].errors == 0, "worker %d saw %d errors", i, w[i].errors);
    }
    mlc_pinned_stats_t s;
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.bytes_in_use == 0 && s.blocks_in_use == 0, "leaked %zu bytes", s.bytes_in_use);
    CHECK(s.bytes_pinned <= s.limit, "pinned %zu above limit %zu", s.bytes_pinned, s.limit);
    CHECK(s.hits > 0, "no reuse in 1600 operations");
    mlc_pinned_pool_destroy(pool);
}

static void test_env_limit(void)
{
    mlc_pinned_pool_t *pool;
    setenv("MLC_PINNED_LIMIT", "2M", 1);
    CHECK_OK(mlc_pinned_pool_create(0, MLC_PINNED_MLOCK, &pool));
    mlc_pinned_stats_t s;
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.limit == 2u << 20, "limit %zu", s.limit);
    mlc_pinned_pool_destroy(pool);
    setenv("MLC_PINNED_LIMIT", "lots", 1);
    CHECK_ERR_MSG(mlc_pinned_pool_create(0, MLC_PINNED_MLOCK, &pool), MLC_ERR_CONFIG, "MLC_PINNED_LIMIT='lots'");
    setenv("MLC_PINNED_LIMIT", "0", 1);
    CHECK_ERR_MSG(mlc_pinned_pool_create(0, MLC_PINNED_MLOCK, &pool), MLC_ERR_CONFIG, "MLC_PINNED_LIMIT");
    unsetenv("MLC_PINNED_LIMIT");
    CHECK_OK(mlc_pinned_pool_create(0, MLC_PINNED_AUTO, &pool));
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.limit == MLC_PINNED_DEFAULT_LIMIT, "default limit %zu", s.limit);
    CHECK(mlc_pinned_pool_mode(pool) == MLC_PINNED_MLOCK, "AUTO without a GPU runtime should mlock");
    mlc_pinned_pool_destroy(pool);
    CHECK_ERR_MSG(mlc_pinned_pool_create(0, (mlc_pinned_mode_t)9, &pool), MLC_ERR_INVALID_ARG, "unknown mode 9");
}

/* Drop CAP_IPC_LOCK so RLIMIT_MEMLOCK applies even to root. */
static int drop_ipc_lock(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0) return -1;
    d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
    return (int)syscall(SYS_capset, &h, d);
}

/* In a child (limits and capabilities are per process): the mlock error text. */
static void test_rlimit(rlim_t limit, mlc_status_t expect, const char *needle)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {limit, limit};
        if (drop_ipc_lock() != 0 || setrlimit(RLIMIT_MEMLOCK, &rl) != 0) _exit(3);
        mlc_pinned_pool_t *pool;
        void *p;
        if (mlc_pinned_pool_create(64u << 20, MLC_PINNED_MLOCK, &pool) != MLC_SUCCESS) _exit(4);
        mlc_status_t st = mlc_pinned_alloc(pool, 1u << 20, &p);
        int ok = st == expect && strstr(mlc_last_error(), needle) && strstr(mlc_last_error(), "MLC_PINNED_LIMIT");
        if (!ok) fprintf(stderr, "rlimit %llu: %s: %s\n", (unsigned long long)limit, mlc_status_name(st), mlc_last_error());
        mlc_pinned_pool_destroy(pool);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 3, "could not set up the limit (status %d)", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlimit %llu: wrong error (see above)",
          (unsigned long long)limit);
}

static void test_cuda(void)
{
    const mlc_gpurt_t *rt;
    CHECK_OK(mlc_gpurt_get(MLC_GPU_CUDA, &rt));
    void *h = dlopen(FAKE_CUDART, RTLD_NOW | RTLD_NOLOAD);
    int *live = h ? dlsym(h, "fake_cuda_live_host_allocs") : NULL;
    CHECK(live != NULL, "fake runtime counters not found");
    if (!live) return;
    int before = *live;

    mlc_pinned_pool_t *pool;
    CHECK_OK(mlc_pinned_pool_create(1u << 20, MLC_PINNED_AUTO, &pool));
    CHECK(mlc_pinned_pool_mode(pool) == MLC_PINNED_CUDA, "AUTO with CUDA loaded should use cudaHostAlloc");
    void *p;
    CHECK_OK(mlc_pinned_alloc(pool, 5000, &p));
    CHECK(*live == before + 1, "cudaHostAlloc not used (%d live)", *live);
    mlc_gpu_mem_t mem;
    int dev;
    CHECK_OK(mlc_gpurt_pointer_kind(rt, p, &mem, &dev));
    CHECK(mem == MLC_GPU_MEM_HOST, "pool memory is %s", mlc_gpu_mem_name(mem));
    CHECK_OK(mlc_pinned_free(pool, p));
    CHECK(*live == before + 1, "a freed block should stay cached");
    char *user = malloc(10000);
    CHECK_OK(mlc_pinned_register(pool, user, 10000));
    CHECK_OK(mlc_gpurt_pointer_kind(rt, user + 5, &mem, &dev));
    CHECK(mem == MLC_GPU_MEM_HOST, "registered memory is %s", mlc_gpu_mem_name(mem));
    CHECK_OK(mlc_pinned_unregister(pool, user));
    CHECK_OK(mlc_gpurt_pointer_kind(rt, user + 5, &mem, &dev));
    CHECK(mem == MLC_GPU_MEM_UNREGISTERED, "unregistered memory is %s", mlc_gpu_mem_name(mem));
    free(user);

    setenv("FAKE_CUDA_HOSTALLOC_FAIL", "1", 1);
    CHECK_ERR_MSG(mlc_pinned_alloc(pool, 300000, &p), MLC_ERR_NO_MEMORY, "cudaHostAlloc(327680 bytes)");
    unsetenv("FAKE_CUDA_HOSTALLOC_FAIL");
    mlc_pinned_stats_t s;
    mlc_pinned_get_stats(pool, &s);
    CHECK(s.bytes_in_use == 0 && s.bytes_pinned == 8192, "after a failed pin: in use %zu pinned %zu",
          s.bytes_in_use, s.bytes_pinned);
    mlc_pinned_pool_destroy(pool);
    CHECK(*live == before, "destroy left %d cudaHostAlloc blocks", *live - before);

    CHECK_OK(mlc_pinned_pool_create(0, MLC_PINNED_CUDA, &pool));
    mlc_pinned_pool_destroy(pool);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "mlock";
    if (strcmp(mode, "mlock") == 0) {
        test_classes();
        test_reuse_and_lru(MLC_PINNED_MLOCK);
        test_threads(MLC_PINNED_MLOCK);
        test_env_limit();
        test_rlimit(64 * 1024, MLC_ERR_NO_MEMORY, "RLIMIT_MEMLOCK is 65536 bytes");
        test_rlimit(0, MLC_ERR_SYSTEM, "RLIMIT_MEMLOCK is 0 bytes");
    } else if (strcmp(mode, "cuda") == 0) {
        test_reuse_and_lru(MLC_PINNED_CUDA);
        test_threads(MLC_PINNED_CUDA);
        test_cuda();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return unit_result(mode);
}
