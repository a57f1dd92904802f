/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peers' shared blocks (mlc_mem_alloc, base/shared_mem.h) mapped into this
 * process, read-only, so a direct collective reads a peer's buffer in place
 * (direct.c). A block is opened as /proc/<pid>/fd/<fd> of its owner,
 * checked to be the file the owner published (device, inode, size), mapped,
 * and kept for later calls: up to VIEWS_PER_PEER blocks per peer, its least
 * recently used unmapped first, and every block its owner freed unmapped at
 * the next lookup of that owner (the owner's free log).
 *
 * Only the pages of the buffers calls name are faulted in, when a call
 * first reads its buffer: a buffer may be a small range of a large block
 * (an arena), and reading a page of a shared file that its owner never
 * wrote allocates it.
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

/* An out-of-place allreduce reads two blocks of each peer; a few more stay
 * mapped for the calls that alternate between buffers. */
#define VIEWS_PER_PEER 4
/* Page ranges of a view already read once (touch_range); when they are
 * all taken, the smallest gives way. */
#define TOUCHED_RANGES 4

typedef struct range {
    uint64_t lo, hi; /* byte offsets into the block, page-aligned */
} range_t;

typedef struct view {
    bool live;
    uint64_t id, base, size;
    const char *map;
    uint64_t used;    /* lookup count at the last use (LRU) */
    range_t touched[TOUCHED_RANGES];
} view_t;

typedef struct peer {
    view_t v[VIEWS_PER_PEER];
    const mlc_shmem_log_t *log; /* the owner's free log, mapped; NULL = not yet */
    uint64_t log_ino;
    uint64_t seen;              /* its frees when this process last looked */
    uint64_t failed[VIEWS_PER_PEER]; /* blocks that could not be mapped (0: none), not tried again */
    unsigned failed_next;
    char failed_why[160];        /* the latest failure's reason */
    int failed_errno;            /* ... and its errno */
} peer_t;

struct eng_views {
    peer_t *peers; /* per world rank */
    uint64_t clock;
};

/* Open `fd` of process pid, if it is the file (dev, ino) with at least `need` bytes. */
static int open_peer_fd(pid_t pid, int fd, uint64_t dev, uint64_t ino, uint64_t need, char *why, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        snprintf(why, len, "open %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(f, &st) != 0 || (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino ||
        (uint64_t)st.st_size < need) {
        snprintf(why, len, "%s is not the block the peer published (device, inode or size differ)", path);
        close(f);
        errno = ESTALE;
        return -1;
    }
    return f;
}

static const void *map_peer_fd(pid_t pid, int fd, uint64_t dev, uint64_t ino, uint64_t size, char *why,
                               size_t len)
{
    int f = open_peer_fd(pid, fd, dev, ino, size, why, len);
    if (f < 0) return NULL;
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, f, 0);
    int e = errno;
    close(f);
    if (p == MAP_FAILED) {
        snprintf(why, len, "mmap of %llu bytes of pid %d's fd %d: %s", (unsigned long long)size, (int)pid, fd,
                 strerror(e));
        errno = e;
        return NULL;
    }
    return p;
}

/* Read one byte of every page of [lo, hi) of the view: this faults the pages
 * in and, on a VM with shadow page tables, pays the trap that the first
 * read of each page through a new mapping costs there even once its entry
 * exists (a 512 KiB allreduce at fresh offsets of 128 MiB shared buffers:
 * 320 us against 77 with the pages read before), once per page, not once
 * per call. */
static void touch_pages(const view_t *v, uint64_t lo, uint64_t hi)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const volatile char *p = (const volatile char *)v->map;
    for (uint64_t off = lo; off < hi; off += page) (void)p[off];
}

/* Make sure every page of bytes [lo, hi) of the view was read once, and
 * record the range (merged with those it overlaps or adjoins). */
static void touch_range(view_t *v, uint64_t lo, uint64_t hi)
{
    /* Ranges are whole pages: [lo, hi) lies in one exactly when its pages do. */
    for (int i = 0; i < TOUCHED_RANGES; i++)
        if (v->touched[i].lo <= lo && hi <= v->touched[i].hi) return; /* the usual case: read before */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    lo = lo / page * page;
    hi = (hi + page - 1) / page * page;
    touch_pages(v, lo, hi); /* only the request: pages read before are cheap to read again */
    range_t *slot = NULL;
    for (int i = 0; i < TOUCHED_RANGES; i++) {
        range_t *t = &v->touched[i];
        if (t->hi > t->lo && t->lo <= hi && lo <= t->hi) {
            if (t->lo < lo) lo = t->lo;
            if (t->hi > hi) hi = t->hi;
            t->lo = t->hi = 0;
        }
        if (t->hi == t->lo && !slot) slot = t;
    }
    if (!slot) { /* all taken: the smallest gives way (its pages are only read once more) */
        slot = &v->touched[0];
        for (int i = 1; i < TOUCHED_RANGES; i++)
            if (v->touched[i].hi - v->touched[i].lo < slot->hi - slot->lo) slot = &v->touched[i];
    }
    *slot = (range_t){lo, hi};
}

static void unmap_view(view_t *v)
{
    munmap((void *)v->map, v->size);
    memset(v, 0, sizeof *v);
}

static struct eng_views *views_of(eng_ep_t *ep)
{
    if (ep->views) return ep->views;
    struct eng_views *vs = calloc(1, sizeof *vs);
    if (!vs) return NULL;
    vs->peers = calloc((size_t)ep->wsize, sizeof *vs->peers);
    if (!vs->peers) {
        free(vs);
        return NULL;
    }
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
static bool sync_frees(eng_ep_t *ep, peer_t *pe, int w, const mlc_shmem_ref_t *ref, char *why, size_t len)
{
    if (!pe->log || pe->log_ino != ref->log_ino) {
        /* every memfd lives on one internal mount: the log's device is the block's */
        const void *m = map_peer_fd(ep->pids[w], ref->log_fd, ref->dev, ref->log_ino, sizeof(mlc_shmem_log_t), why,
                                    len);
        if (!m) return false;
        if (pe->log) munmap((void *)pe->log, sizeof(mlc_shmem_log_t));
        pe->log = m;
        pe->log_ino = ref->log_ino;
        pe->seen = 0; /* check the views of this owner against its whole log */
    }
    uint64_t frees = atomic_load_explicit(&pe->log->frees, memory_order_acquire);
    if (frees == pe->seen) return true;
    /* frees - seen == MLC_SHMEM_LOG: the owner may be overwriting entry `seen` already. */
    bool behind = frees - pe->seen >= MLC_SHMEM_LOG;
    for (int i = 0; i < VIEWS_PER_PEER; i++) {
        view_t *v = &pe->v[i];
        if (v->live && (behind || logged_free(pe->log, pe->seen, frees, v->id))) unmap_view(v);
    }
    /* The owner may have logged more meanwhile, overwriting entries just
     * read (a seqlock read): then forget all of this owner's blocks. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&pe->log->frees, memory_order_relaxed) - pe->seen >= MLC_SHMEM_LOG)
        for (int i = 0; i < VIEWS_PER_PEER; i++)
            if (pe->v[i].live) unmap_view(&pe->v[i]);
    pe->seen = frees;
    return true;
}

const void *eng_peer_view(eng_ep_t *ep, int w, const mlc_shmem_ref_t *ref, uint64_t buf, size_t buf_len, size_t at,
                          char *why, size_t whylen)
{
    if (ep->threads || w == ep->wrank) return (const void *)(uintptr_t)(buf + at);
    if (ref->size == 0 || buf < ref->base || buf - ref->base > ref->size ||
        buf_len > ref->size - (buf - ref->base) || at > buf_len) {
        snprintf(why, whylen, "the buffer is not inside the block rank %d published", w);
        errno = EINVAL;
        return NULL;
    }
    struct eng_views *vs = views_of(ep);
    if (!vs) {
        snprintf(why, whylen, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    peer_t *pe = &vs->peers[w];
    for (int i = 0; i < VIEWS_PER_PEER; i++)
        if (pe->failed[i] == ref->id) {
            snprintf(why, whylen, "%s", pe->failed_why);
            errno = pe->failed_errno;
            return NULL;
        }
    uint64_t off = buf - ref->base;
    if (!sync_frees(ep, pe, w, ref, why, whylen)) goto failed;
    vs->clock++;
    view_t *lru = &pe->v[0];
    for (int i = 0; i < VIEWS_PER_PEER; i++) {
        view_t *v = &pe->v[i];
        if (v->live && v->id == ref->id && v->base == ref->base && v->size == ref->size) {
            v->used = vs->clock;
            touch_range(v, off, off + buf_len);
            return v->map + off + at;
        }
        if (lru->live && (!v->live || v->used < lru->used)) lru = v;
    }
    const void *m = map_peer_fd(ep->pids[w], ref->fd, ref->dev, ref->ino, ref->size, why, whylen);
    if (!m) goto failed;
    if (lru->live) unmap_view(lru);
    *lru = (view_t){.live = true, .id = ref->id, .base = ref->base, .size = ref->size, .map = m, .used = vs->clock};
    touch_range(lru, off, off + buf_len);
    return lru->map + off + at;
failed: /* remembered (the last few blocks): every chunk of a call would try again */
    pe->failed_errno = errno;
    pe->failed[pe->failed_next++ % VIEWS_PER_PEER] = ref->id;
    snprintf(pe->failed_why, sizeof pe->failed_why, "%s", why);
    errno = pe->failed_errno;
    return NULL;
}

void eng_peer_views_free(eng_ep_t *ep)
{
    struct eng_views *vs = ep->views;
    if (!vs) return;
    for (int w = 0; w < ep->wsize; w++) {
        peer_t *pe = &vs->peers[w];
        for (int i = 0; i < VIEWS_PER_PEER; i++)
            if (pe->v[i].live) unmap_view(&pe->v[i]);
        if (pe->log) munmap((void *)pe->log, sizeof(mlc_shmem_log_t));
    }
    free(vs->peers);
    free(vs);
    ep->views = NULL;
}
