/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of this process's shared blocks (shared_mem.h). */
#include "shared_mem.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"

typedef struct block {
    void *base;
    size_t size;
    int fd;
    uint64_t id, dev, ino;
} block_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block_t *blocks;
static size_t nblocks, cap;
static atomic_size_t live; /* nblocks, read without the lock: most processes have none */
static uint64_t next_id = 1;
static mlc_shmem_log_t *free_log;
static int log_fd = -1;
static uint64_t log_dev, log_ino;

static void identity_of(int fd, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    bool ok = fstat(fd, &st) == 0;
    *dev = ok ? (uint64_t)st.st_dev : 0;
    *ino = ok ? (uint64_t)st.st_ino : 0;
}

/* An fd of a new memfd of `bytes` bytes, mapped shared at *addr; -1 with errno. */
static int new_memfd(const char *name, size_t bytes, void **addr)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *addr = p;
    return fd;
}

mlc_status_t mlc_shmem_alloc(size_t bytes, void **ptr)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_mem_alloc: %zu bytes is too large", bytes);
    size_t size = bytes ? (bytes + page - 1) / page * page : page;
    pthread_mutex_lock(&lock);
    mlc_status_t st = MLC_SUCCESS;
    if (log_fd < 0) {
        void *p;
        log_fd = new_memfd("mlcomm-free-log", sizeof(mlc_shmem_log_t), &p);
        if (log_fd < 0) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_mem_alloc: memfd for the free log: %s", strerror(errno));
            goto out;
        }
        free_log = p;
        identity_of(log_fd, &log_dev, &log_ino);
    }
    if (nblocks == cap) {
        size_t ncap = cap ? 2 * cap : 16;
        block_t *nb = realloc(blocks, ncap * sizeof *nb);
        if (!nb) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_mem_alloc: out of memory for the block registry");
            goto out;
        }
        blocks = nb;
        cap = ncap;
    }
    void *p;
    int fd = new_memfd("mlcomm-mem", size, &p);
    if (fd < 0) {
        st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_mem_alloc: %zu bytes of shared memory (memfd): %s", bytes,
                       strerror(errno));
        goto out;
    }
    block_t *b = &blocks[nblocks++];
    *b = (block_t){p, size, fd, next_id++, 0, 0};
    identity_of(fd, &b->dev, &b->ino);
    atomic_store(&live, nblocks);
    *ptr = p;
out:
    pthread_mutex_unlock(&lock);
    return st;
}

mlc_status_t mlc_shmem_free(void *ptr)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nblocks && blocks[i].base != ptr) i++;
    if (i == nblocks) {
        pthread_mutex_unlock(&lock);
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mem_free: %p is not a block of mlc_mem_alloc (or was freed already)",
                         ptr);
    }
    block_t b = blocks[i];
    blocks[i] = blocks[--nblocks];
    atomic_store(&live, nblocks);
    /* Logged before the unmap: a peer that maps the block now still reads valid memory (its own mapping). */
    uint64_t k = atomic_load_explicit(&free_log->frees, memory_order_relaxed);
    /* A seqlock write: a reader that sees this entry also sees the count before it. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&free_log->freed[k % MLC_SHMEM_LOG], b.id, memory_order_relaxed);
    atomic_store_explicit(&free_log->frees, k + 1, memory_order_release);
    pthread_mutex_unlock(&lock);
    munmap(b.base, b.size);
    close(b.fd);
    return MLC_SUCCESS;
}

bool mlc_shmem_find(const void *p, size_t len, mlc_shmem_ref_t *ref)
{
    if (atomic_load_explicit(&live, memory_order_relaxed) == 0 || !p) return false;
    uintptr_t a = (uintptr_t)p;
    bool found = false;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nblocks && !found; i++) {
        uintptr_t lo = (uintptr_t)blocks[i].base;
        if (a >= lo && a - lo <= blocks[i].size && len <= blocks[i].size - (a - lo)) {
            *ref = (mlc_shmem_ref_t){blocks[i].id, lo, blocks[i].size, blocks[i].dev, blocks[i].ino, log_ino,
                                     blocks[i].fd, log_fd};
            found = true;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}
