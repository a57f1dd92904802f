/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `threads` backend: ranks are threads of one process. The engine's segment
 * lives in heap memory; rendezvous copies are plain memcpy. Ranks are formed
 * by mlc_comm_init_all (all at once) or a store bootstrap (mlc_comm_init_rank,
 * mlc_comm_init_store: each thread joins the job id the store agreed).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "core/backend.h"
#include "backends/engine/engine.h"
#include "base/wait.h"
#include "base/error.h"

/* Segments up to this size are committed at creation (as plain heap memory
 * would be); larger ones (many ranks: the rings grow with the square of the
 * rank count) commit a page when a pair first writes it, so memory follows
 * the pairs that talk, not every pair. */
#define HEAP_SEG_PREFAULT ((size_t)64 << 20)

/* A heap segment: anonymous zeroed memory, freed when its last endpoint goes. */
static eng_seg_t *heap_seg_create(int n)
{
    size_t ring, total = eng_seg_size(n, false, &ring);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (total <= HEAP_SEG_PREFAULT) flags |= MAP_POPULATE;
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_NOHUGEPAGE
    /* Small rings (many ranks): a huge page would commit 2 MiB for the first
     * byte written to one pair's ring. */
    if (ring < ((size_t)64 << 10)) madvise(p, total, MADV_NOHUGEPAGE);
#endif
    eng_seg_t *seg = p;
    eng_seg_format(seg, n, false, false, ring, total);
    return seg;
}

static void heap_seg_free(eng_seg_t *seg) { munmap(seg, seg->total_bytes); }

static void heap_seg_release(eng_ep_t *ep)
{
    eng_seg_t *seg = ep->seg;
    /* Peers still waiting for this rank learn that it left (liveness.c). */
    atomic_store(&eng_ctl(ep, ep->wrank)->attached, ENG_LEFT);
    if (atomic_fetch_add(&seg->nreleased, 1) + 1 == seg->nranks) heap_seg_free(seg);
}

static mlc_status_t attach(mlc_comm_t *comm, eng_seg_t *seg, int rank)
{
    eng_ep_t *ep;
    mlc_status_t st = eng_ep_create(seg, rank, true, &ep);
    if (st != MLC_SUCCESS) return st;
    eng_ep_count_cpus(ep); /* every rank has published its cpus */
    ep->release = heap_seg_release;
    ep->light_fences = eng_light_fences_register(); /* every rank is this process */
    st = eng_comm_create(comm, ep, 0, 0, NULL);
    if (st != MLC_SUCCESS) {
        ep->refs = 1;
        eng_ep_unref(ep);
    }
    return st;
}

/* A segment whose ranks all run on the calling thread's cpus (init_all,
 * one rank): the threads it starts inherit them. Known limit: threads the
 * caller binds otherwise afterwards are counted with the caller's cpus. */
static eng_seg_t *heap_seg_here(int n)
{
    eng_seg_t *seg = heap_seg_create(n);
    for (int r = 0; seg && r < n; r++) eng_cpus_publish(seg, r);
    return seg;
}

/* ---- store-bootstrap rendezvous: threads meet by job id --------------------------------------------------- */

typedef struct pending_job {
    struct pending_job *next;
    char id[96]; /* the job id the store bootstrap agreed */
    int nranks, joined;
    eng_seg_t *seg;
} pending_job_t;

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_cond = PTHREAD_COND_INITIALIZER;
static pending_job_t *jobs;

/* Waiting (jobs_lock held) for a job's ranks to join, in the shared wait
 * loop (base/wait.h): the event hook sleeps on jobs_cond. */
typedef struct join_wait {
    pending_job_t *j;
    int seen;
} join_wait_t;

static int join_step(void *p)
{
    join_wait_t *w = p;
    if (w->j->joined == w->seen) return MLC_WAIT_NOTHING;
    w->seen = w->j->joined; /* another rank joined: progress */
    return MLC_WAIT_MOVED;
}

static int join_done(void *p)
{
    const join_wait_t *w = p;
    return w->j->joined >= w->j->nranks;
}

static int join_block(void *p, double max_s)
{
    (void)p;
    (void)max_s;
    eng_cond_wait_slice(&jobs_cond, &jobs_lock);
    return 1;
}

static mlc_status_t join_job(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    double timeout = comm->cfg.timeout_s;
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&jobs_lock);
    pending_job_t *j = jobs;
    while (j && strcmp(j->id, boot->job_id) != 0) j = j->next;
    if (!j) {
        j = calloc(1, sizeof *j);
        if (j) j->seg = heap_seg_create(boot->size);
        if (!j || !j->seg) {
            free(j);
            pthread_mutex_unlock(&jobs_lock);
            return mlc_error(MLC_ERR_NO_MEMORY, "%s: out of memory for %d ranks", boot->store->caller, boot->size);
        }
        snprintf(j->id, sizeof j->id, "%s", boot->job_id);
        j->nranks = boot->size;
        j->next = jobs;
        jobs = j;
    }
    if (j->nranks != boot->size) {
        pthread_mutex_unlock(&jobs_lock);
        return mlc_error(MLC_ERR_MISMATCH, "%s: rank %d says %d ranks, an earlier rank said %d",
                         boot->store->caller, boot->rank, boot->size, j->nranks);
    }
    eng_seg_t *seg = j->seg;
    eng_cpus_publish(seg, boot->rank); /* the cpus of the thread that runs this rank */
    j->joined++;
    pthread_cond_broadcast(&jobs_cond);
    join_wait_t jw = {.j = j, .seen = j->joined};
    mlc_wait_t w = {.step = join_step, .done = join_done, .block = join_block, .ctx = &jw, .timeout_s = timeout,
                    .what = boot->store->caller, .spin_s = -1, .yield_s = -1};
    if (mlc_wait_run(&w) == MLC_WAIT_TIMEOUT) {
        st = mlc_error(MLC_ERR_TIMEOUT, "%s: rank %d waited %.0f s without another rank joining "
                       "(MLC_TIMEOUT); only %d of %d ranks joined", boot->store->caller, boot->rank, w.idle_s,
                       j->joined, j->nranks);
        j->joined--;
    }
    if (st == MLC_SUCCESS && atomic_fetch_add(&seg->nattached, 1) + 1 == seg->nranks) {
        /* Everyone is in: forget the id (the segment lives on with its endpoints). */
        for (pending_job_t **pp = &jobs; *pp; pp = &(*pp)->next)
            if (*pp == j) {
                *pp = j->next;
                free(j);
                break;
            }
    }
    pthread_mutex_unlock(&jobs_lock);
    if (st != MLC_SUCCESS) return st;
    return attach(comm, seg, boot->rank);
}

/* Ranks of a store bootstrap are threads of this process, or the job cannot run here. */
static mlc_status_t join_store(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    for (int r = 0; r < boot->size; r++)
        if (boot->peers[r].pid != boot->peers[boot->rank].pid || boot->peers[r].host != boot->peers[boot->rank].host)
            return mlc_error(MLC_ERR_UNSUPPORTED, "backend 'threads' joins threads of one process, but rank %d is "
                             "process %d and rank %d is process %d (ranks on %d host%s: %s); use shm for "
                             "processes of one host", boot->rank, boot->peers[boot->rank].pid, r,
                             boot->peers[r].pid, boot->nhosts, boot->nhosts > 1 ? "s" : "", boot->hosts_text);
    return join_job(comm, boot);
}

/* ---- table entries ------------------------------------------------------------- */

static int threads_available(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 1;
}

/* `auto` may pick threads only for a one-rank job (more need init_all/init_rank). */
static int threads_accepts(const mlc_cfg_t *cfg) { return cfg->world_size == 1; }

static mlc_status_t threads_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    if (boot->store) return join_store(comm, boot);
    if (boot->size != 1)
        return mlc_error(MLC_ERR_CONFIG, "backend 'threads' forms %d ranks only through mlc_comm_init_all or "
                         "mlc_comm_init_rank (ranks are threads of one process)", boot->size);
    eng_seg_t *seg = heap_seg_here(1);
    if (!seg) return mlc_error(MLC_ERR_NO_MEMORY, "threads: out of memory");
    return attach(comm, seg, 0);
}

static mlc_status_t threads_init_all(int n, mlc_comm_t **comms)
{
    eng_seg_t *seg = heap_seg_here(n);
    if (!seg) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_init_all: out of memory for %d ranks", n);
    for (int i = 0; i < n; i++) {
        mlc_status_t st = attach(comms[i], seg, i);
        if (st != MLC_SUCCESS) {
            /* Endpoints already made release the segment as they go; the
             * ones never made are released here, and the last release frees it. */
            for (int k = 0; k < i; k++) eng_be_destroy(comms[k]);
            unsigned rest = (unsigned)(n - i);
            if (atomic_fetch_add(&seg->nreleased, rest) + rest == seg->nranks) heap_seg_free(seg);
            return st;
        }
    }
    return MLC_SUCCESS;
}

const mlc_backend_t mlc_backend_threads = {
    MLC_BACKEND_HEADER,
    .name = "threads",
    .priority = 10,
    .available = threads_available,
    .accepts = threads_accepts,
    .init = threads_init,
    .init_all = threads_init_all,
    ENG_COMMON_ENTRIES,
};
