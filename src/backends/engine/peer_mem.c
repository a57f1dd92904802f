/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers' shared blocks (mlc_mem_alloc, base/shared_mem.h) mapped into this
 * process, read-only, so a direct collective reads a peer's buffer in place
 * (direct.c). A block is opened as /proc/<pid>/fd/<fd> of its owner, checked
 * to be the file the owner published (inode, size), mapped with its pages
 * populated in one call (faulting 4 KiB pages one by one is slow on some
 * VMs), and kept for later calls: up to ENG_VIEWS blocks, the least recently
 * used unmapped first, and every block its owner freed unmapped at the next
 * lookup of that owner (the owner's free log).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine.h"

#define ENG_VIEWS 64

typedef struct view {
    int w;            /* owner's world rank; -1 = free entry */
    uint64_t id, base, size;
    const char *map;
    uint64_t used;    /* lookup count at the last use (LRU) */
} view_t;

typedef struct peer_log {
    const mlc_shmem_log_t *log; /* the owner's free log, mapped; NULL = not yet */
    uint64_t ino;
    uint64_t seen;              /* its frees when this process last looked */
} peer_log_t;

struct eng_views {
    view_t v[ENG_VIEWS];
    peer_log_t *logs; /* per world rank */
    uint64_t clock;
};

/* Open `fd` of process pid, if it is the file (dev, ino) with at least `need` bytes. */
static int open_peer_fd(pid_t pid, int fd, uint64_t dev, uint64_t ino, uint64_t need, char *why, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        snprintf(why, len, "open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(f, &st) != 0 || (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino ||
        (uint64_t)st.st_size < need) {
        snprintf(why, len, "%s is not the block the peer published (device, inode or size differ)", path);
        close(f);
        return -1;
    }
    return f;
}

static const void *map_peer_fd(pid_t pid, int fd, uint64_t dev, uint64_t ino, uint64_t size, int flags, char *why,
                               size_t len)
{
    int f = open_peer_fd(pid, fd, dev, ino, size, why, len);
    if (f < 0) return NULL;
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED | flags, f, 0);
    int e = errno;
    close(f);
    if (p == MAP_FAILED) {
        snprintf(why, len, "mmap of %llu bytes of pid %d's fd %d: %s", (unsigned long long)size, (int)pid, fd,
                 strerror(e));
        return NULL;
    }
    return p;
}

/* Read one byte of every page: on a VM with shadow page tables the first
 * read of a page through a new mapping traps to the hypervisor even when
 * its entry exists (a 512 KiB allreduce at fresh offsets of 128 MiB shared
 * buffers: 320 us against 85); pay that once here, not inside a call. */
static void touch_pages(const void *m, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const volatile char *p = m;
    for (size_t off = 0; off < size; off += page) (void)p[off];
}

static void unmap_view(view_t *v)
{
    munmap((void *)v->map, v->size);
    v->w = -1;
}

static struct eng_views *views_of(eng_ep_t *ep)
{
    if (ep->views) return ep->views;
    struct eng_views *vs = calloc(1, sizeof *vs);
    if (!vs) return NULL;
    vs->logs = calloc((size_t)ep->wsize, sizeof *vs->logs);
    if (!vs->logs) {
        free(vs);
        return NULL;
    }
    for (int i = 0; i < ENG_VIEWS; i++) vs->v[i].w = -1;
    ep->views = vs;
    return vs;
}

/* Whether block `id` is among the owner's frees [from, to) its log still holds. */
static bool logged_free(const mlc_shmem_log_t *log, uint64_t from, uint64_t to, uint64_t id)
{
    for (uint64_t k = from; k < to; k++)
        if (atomic_load_explicit(&log->freed[k % MLC_SHMEM_LOG], memory_order_relaxed) == id) return true;
    return false;
}

/* Map owner w's free log if needed and unmap its blocks freed since the last look. */
static bool sync_frees(eng_ep_t *ep, struct eng_views *vs, int w, const mlc_shmem_ref_t *ref, char *why, size_t len)
{
    peer_log_t *pl = &vs->logs[w];
    if (!pl->log || pl->ino != ref->log_ino) {
        const void *m = map_peer_fd(ep->pids[w], ref->log_fd, ref->dev /* every memfd's */, ref->log_ino, sizeof(mlc_shmem_log_t), 0, why,
                                    len);
        if (!m) return false;
        if (pl->log) munmap((void *)pl->log, sizeof(mlc_shmem_log_t));
        pl->log = m;
        pl->ino = ref->log_ino;
        pl->seen = 0; /* views of this owner were all made before: check them against its whole log */
    }
    uint64_t frees = atomic_load_explicit(&pl->log->frees, memory_order_acquire);
    if (frees == pl->seen) return true;
    for (int i = 0; i < ENG_VIEWS; i++) {
        view_t *v = &vs->v[i];
        if (v->w != w) continue;
        /* Fallen behind further than the log holds: forget every block of w. */
        if (frees - pl->seen > MLC_SHMEM_LOG || logged_free(pl->log, pl->seen, frees, v->id)) unmap_view(v);
    }
    /* The owner may have logged past what was read meanwhile, overwriting entries: then forget them all. */
    if (atomic_load_explicit(&pl->log->frees, memory_order_acquire) - pl->seen > MLC_SHMEM_LOG)
        for (int i = 0; i < ENG_VIEWS; i++)
            if (vs->v[i].w == w) unmap_view(&vs->v[i]);
    pl->seen = frees;
    return true;
}

const void *eng_peer_view(eng_ep_t *ep, int w, const mlc_shmem_ref_t *ref, uint64_t addr, size_t len, char *why,
                          size_t whylen)
{
    if (ep->threads || w == ep->wrank) return (const void *)(uintptr_t)addr;
    if (ref->size == 0 || addr < ref->base || addr - ref->base > ref->size || len > ref->size - (addr - ref->base)) {
        snprintf(why, whylen, "the buffer is not inside the block rank %d published", w);
        return NULL;
    }
    struct eng_views *vs = views_of(ep);
    if (!vs) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    if (!sync_frees(ep, vs, w, ref, why, whylen)) return NULL;
    vs->clock++;
    view_t *lru = &vs->v[0];
    for (int i = 0; i < ENG_VIEWS; i++) {
        view_t *v = &vs->v[i];
        if (v->w == w && v->id == ref->id && v->base == ref->base && v->size == ref->size) {
            v->used = vs->clock;
            return v->map + (addr - ref->base);
        }
        if (lru->w >= 0 && (v->w < 0 || v->used < lru->used)) lru = v;
    }
    const void *m = map_peer_fd(ep->pids[w], ref->fd, ref->dev, ref->ino, ref->size, MAP_POPULATE, why, whylen);
    if (!m) return NULL;
    touch_pages(m, ref->size);
    if (lru->w >= 0) unmap_view(lru);
    *lru = (view_t){w, ref->id, ref->base, ref->size, m, vs->clock};
    return lru->map + (addr - ref->base);
}

void eng_peer_views_free(eng_ep_t *ep)
{
    struct eng_views *vs = ep->views;
    if (!vs) return;
    for (int i = 0; i < ENG_VIEWS; i++)
        if (vs->v[i].w >= 0) unmap_view(&vs->v[i]);
    for (int w = 0; w < ep->wsize; w++)
        if (vs->logs[w].log) munmap((void *)vs->logs[w].log, sizeof(mlc_shmem_log_t));
    free(vs->logs);
    free(vs);
    ep->views = NULL;
}
