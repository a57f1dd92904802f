/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `shm` backend: ranks are processes on one host, sharing one POSIX
 * shared-memory segment per world communicator (split communicators reuse
 * it). Rules from DESIGN.md: created 0600 with O_EXCL, owner checked with
 * fstat, pages reserved up front (a full /dev/shm fails init, never SIGBUS
 * later), unlinked as soon as every rank has attached, named with a nonce
 * agreed through the rendezvous (rendezvous.c). Large messages are single-copy through
 * process_vm_readv where the OS allows it (probed per pair at init).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "core/backend.h"
#include "backends/engine/engine.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/jobstate.h"
#include "base/log.h"
#include "cma_probe.h"
#include "rendezvous.h"
#include "base/wait.h"

typedef struct shm_data {
    size_t map_bytes;
    bool use_jobstate; /* world ranks are the launcher's ranks */
} shm_data_t;

static atomic_uint shm_init_counter;

static int shm_peer_dead(eng_ep_t *ep, int w, char *why, size_t len)
{
    shm_data_t *d = ep->backend_data;
    const mlc_jobstate_t *js = d->use_jobstate ? mlc_jobstate_get() : NULL;
    if (js && (unsigned)w < js->nranks) {
        unsigned code = atomic_load(&((mlc_jobstate_t *)js)->dead[w]);
        if (code) return shm_describe_dead(code, why, len);
    }
    pid_t pid = atomic_load(&eng_ctl(ep, w)->pid);
    if (pid == 0) pid = ep->pids[w];
    return shm_pid_gone(pid, why, len);
}

static void shm_release(eng_ep_t *ep)
{
    shm_data_t *d = ep->backend_data;
    /* Peers must not mistake our exit for a crash. */
    atomic_store(&eng_ctl(ep, ep->wrank)->attached, ENG_LEFT);
    munmap(ep->seg, d->map_bytes);
    free(d);
}

/* probe_cma: measure single copy against memcpy (cma_probe.h); only where it
 * can choose a protocol: single copy allowed, MLC_STAGES=auto, 2+ ranks. */
static mlc_status_t create_segment(const char *name, int n, bool probe_cma, size_t *map_bytes, eng_seg_t **out)
{
    size_t ring, total = eng_seg_size(n, true, &ring);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return mlc_error(MLC_ERR_SYSTEM, "shm: cannot create %s: %s", name, strerror(errno));
    /* Reserve every page now: a full /dev/shm is an error here, not a SIGBUS later. */
    int rc = posix_fallocate(fd, 0, (off_t)total);
    if (rc != 0) {
        close(fd);
        shm_unlink(name);
        return mlc_error(MLC_ERR_SYSTEM, "shm: cannot reserve %zu bytes for %s in /dev/shm: %s", total, name,
                         strerror(rc));
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return mlc_error(MLC_ERR_SYSTEM, "shm: cannot map %s (%zu bytes): %s", name, total, strerror(errno));
    }
    bool cma_slow = false;
    if (probe_cma) {
        double cost = shm_cma_cost();
        cma_slow = cost >= SHM_CMA_SLOW_RATIO;
        if (cost > 0)
            MLC_INFO("shm: a single-copy read of 1 MiB takes %.2f memcpys here: single copy counts as %s (slow "
                     "from %.2f)", cost, cma_slow ? "slow" : "fast", SHM_CMA_SLOW_RATIO);
        else
            MLC_INFO("shm: process_vm_readv failed in the speed probe: single copy counts as fast");
    }
    eng_seg_format(p, n, true, cma_slow, ring, total);
    *map_bytes = total;
    *out = p;
    return MLC_SUCCESS;
}

/* open_segment's two waits for rank 0 (base/wait.h): the object's size, then its magic. */
typedef struct seg_wait {
    int fd;
    size_t total;
    const eng_seg_t *seg;
} seg_wait_t;

static int size_step(void *p)
{
    seg_wait_t *w = p;
    struct stat sb;
    return fstat(w->fd, &sb) == 0 && (size_t)sb.st_size >= w->total ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
}

static int size_done(void *p)
{
    seg_wait_t *w = p;
    struct stat sb;
    return fstat(w->fd, &sb) == 0 && (size_t)sb.st_size >= w->total;
}

/* Any format word: this build's, or another's (compared after). */
static int magic_step(void *p)
{
    seg_wait_t *w = p;
    return atomic_load_explicit(&w->seg->magic, memory_order_acquire) != 0 ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
}

static int magic_done(void *p)
{
    seg_wait_t *w = p;
    return atomic_load_explicit(&w->seg->magic, memory_order_acquire) != 0;
}

static mlc_status_t open_segment(const char *name, int n, double timeout_s, size_t *map_bytes, eng_seg_t **out)
{
    /* Rank 0 published the name once the segment was formatted. */
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return mlc_error(MLC_ERR_SYSTEM, "shm: cannot open %s: %s", name, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid()) {
        close(fd);
        return mlc_error(MLC_ERR_SYSTEM, "shm: %s is owned by another user (uid %d); refusing to use it", name,
                         (int)sb.st_uid);
    }
    size_t ring, total = eng_seg_size(n, true, &ring);
    /* The creator sizes the object before formatting; wait for the size. */
    seg_wait_t sw = {.fd = fd, .total = total};
    mlc_wait_t w = {.step = size_step, .done = size_done, .ctx = &sw, .timeout_s = timeout_s,
                    .what = "shm init (the segment's size)", .spin_s = 1e-4, .yield_s = 0,
                    .sleep_min_s = 1e-4, .sleep_max_s = 1e-3};
    if (mlc_wait_run(&w) != MLC_WAIT_DONE) {
        fstat(fd, &sb);
        close(fd);
        return mlc_error(MLC_ERR_MISMATCH, "shm: %s has %lld bytes, expected %zu for %d ranks", name,
                         (long long)sb.st_size, total, n);
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return mlc_error(MLC_ERR_SYSTEM, "shm: cannot map %s: %s", name, strerror(errno));
    eng_seg_t *seg = p;
    sw.seg = seg;
    w.step = magic_step;
    w.done = magic_done;
    w.what = "shm init (the segment's format)";
    if (mlc_wait_run(&w) != MLC_WAIT_DONE) {
        munmap(p, total);
        return mlc_error(MLC_ERR_TIMEOUT, "shm init: %s was never initialised by rank 0", name);
    }
    unsigned magic = atomic_load_explicit(&seg->magic, memory_order_acquire);
    if (magic != ENG_MAGIC) {
        munmap(p, total);
        return mlc_error(MLC_ERR_MISMATCH, "shm: %s was laid out by another build of mlcomm (format word %#x, this "
                         "build's %#x): every rank of a job must use the same mlcomm version", name, magic,
                         ENG_MAGIC);
    }
    if (seg->nranks != (uint32_t)n) {
        munmap(p, total);
        return mlc_error(MLC_ERR_MISMATCH, "shm: %s was made for %u ranks, this rank expects %d", name, seg->nranks,
                         n);
    }
    *map_bytes = total;
    *out = seg;
    return MLC_SUCCESS;
}

/* Can this process read peer r's memory with process_vm_readv? */
static bool cma_probe(eng_ep_t *ep, int r)
{
    eng_ctl_t *c = eng_ctl(ep, r);
    uint64_t v = 0;
    struct iovec l = {&v, sizeof v}, rem = {(void *)(uintptr_t)c->cma_probe_addr, sizeof v};
    ssize_t n = process_vm_readv(ep->pids[r], &l, 1, &rem, 1, 0);
    return n == (ssize_t)sizeof v && v == c->cma_probe;
}

/* An init step's count, as the shared wait loop sees it (base/wait.h). */
typedef struct count_wait {
    shm_rdv_t *rv;
    atomic_uint *counter;
    unsigned n, seen;
    mlc_status_t st;
} count_wait_t;

static int count_step(void *p)
{
    count_wait_t *w = p;
    unsigned v = atomic_load(w->counter);
    if (v == w->seen) return MLC_WAIT_NOTHING;
    w->seen = v; /* another rank got through: progress */
    return MLC_WAIT_MOVED;
}

static int count_done(void *p)
{
    const count_wait_t *w = p;
    return w->seen >= w->n;
}

static int count_check(void *p)
{
    count_wait_t *w = p;
    w->st = shm_rdv_check(w->rv);
    return w->st != MLC_SUCCESS;
}

/* Wait until n ranks have passed an init step: attached (their pid is in
 * their control block) or, with `probed`, done probing (marked joined),
 * watching for failures and dead peers. A timeout (no rank got through for
 * timeout_s) names the ranks that have not. */
static mlc_status_t wait_count(shm_rdv_t *rv, eng_seg_t *seg, atomic_uint *counter, unsigned n, double timeout_s,
                               bool probed, const char *what)
{
    count_wait_t cw = {.rv = rv, .counter = counter, .n = n, .seen = 0, .st = MLC_SUCCESS};
    mlc_wait_t w = {.step = count_step, .done = count_done, .check = count_check, .ctx = &cw,
                    .timeout_s = timeout_s, .what = what, .spin_s = 1e-4, .sleep_min_s = 1e-5, .sleep_max_s = 1e-3};
    switch (mlc_wait_run(&w)) {
    case MLC_WAIT_DONE: return MLC_SUCCESS;
    case MLC_WAIT_STOPPED: return cw.st;
    case MLC_WAIT_TIMEOUT: break;
    }
    char late[160] = "";
    size_t o = 0;
    eng_ctl_t *ctl = (eng_ctl_t *)((char *)seg + seg->ctl_off);
    for (unsigned r = 0; r < n && o < sizeof late; r++) {
        bool done = probed ? atomic_load(&ctl[r].attached) == ENG_JOINED : atomic_load(&ctl[r].pid) != 0;
        if (!done) o += (size_t)snprintf(late + o, sizeof late - o, "%s%u", o ? ", " : "", r);
    }
    return mlc_error(MLC_ERR_TIMEOUT, "shm init: only %u of %u ranks %s (none for %.0f s: MLC_TIMEOUT); ranks not "
                     "heard from: %s", atomic_load(counter), n, what, timeout_s, late[0] ? late : "unknown");
}

static int shm_available(char *why, size_t len)
{
    if (access("/dev/shm", W_OK) != 0) {
        snprintf(why, len, "/dev/shm is not writable: %s", strerror(errno));
        return 0;
    }
    return 1;
}

/* `auto` picks shm when every rank of the job is on this host. */
static int shm_accepts(const mlc_cfg_t *cfg) { return cfg->local_size == cfg->world_size; }

static uint64_t probe_value; /* read by peers to test single-copy access */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Which launch this rank belongs to (docs/ENGINE.md "Segment"): a store
 * bootstrap's job id is random already; mlcomm-run's job state names its job; else 0, and the
 * rendezvous tells launches apart by process lineage. */
static uint64_t launch_tag(const mlc_boot_t *boot)
{
    uint64_t t = 0;
    if (boot->store) {
        for (const char *p = boot->job_id; *p; p++) t = mix64(t ^ (unsigned char)*p);
        return t | 1;
    }
    t = mlc_jobstate_tag();
    return t ? mix64(t) | 1 : 0;
}

static mlc_status_t shm_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    int n = boot->size, me = boot->rank;
    /* MLC_TIMEOUT means no progress for that long: each init step that
     * completes is progress, so each step's wait gets its own deadline (the
     * counted steps restart it whenever a rank gets through). */
    double timeout = comm->cfg.timeout_s > 0 ? comm->cfg.timeout_s : mlc_env_default_seconds(MLC_ENV_TIMEOUT);
    bool use_js = boot->store == NULL;
    /* A store bootstrap's job id is fresh for this communicator: the name needs
     * nothing else (ranks may have made different numbers of communicators
     * before). Launcher jobs reuse one job id: every rank counts its inits. */
    unsigned counter = boot->store ? 0 : atomic_fetch_add(&shm_init_counter, 1);

    /* Peers may read our buffers (single copy) even under Yama ptrace_scope=1. */
    if (comm->cfg.cma) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);

    eng_seg_t *seg = NULL;
    size_t map_bytes = 0;
    shm_data_t *d = NULL;
    eng_ep_t *ep = NULL;
    shm_rdv_t rv;
    mlc_status_t st =
        shm_rdv_open(&rv, boot->job_id, counter, me, n, launch_tag(boot), use_js, timeout);
    if (st != MLC_SUCCESS) goto fail;
    shm_fault_point(me, "rendezvous");
    if (me == 0) {
        st = create_segment(rv.seg_name, n, n > 1 && comm->cfg.cma && comm->cfg.stages == MLC_STAGES_AUTO, &map_bytes,
                            &seg);
        /* MLC_FAULT_INIT=0:format (testing only): the segment looks laid out by another build. */
        if (st == MLC_SUCCESS && shm_fault_named(me, "format"))
            atomic_store_explicit(&seg->magic, ENG_MAGIC ^ 0xffu, memory_order_release);
        if (st == MLC_SUCCESS) shm_rdv_publish(&rv);
    } else {
        st = shm_rdv_wait_ready(&rv, timeout);
        if (st == MLC_SUCCESS) st = open_segment(rv.seg_name, n, timeout, &map_bytes, &seg);
    }
    if (st != MLC_SUCCESS) goto fail;
    d = calloc(1, sizeof *d);
    if (!d) {
        st = mlc_error(MLC_ERR_NO_MEMORY, "shm: out of memory");
        goto fail;
    }
    d->map_bytes = map_bytes;
    d->use_jobstate = use_js;
    st = eng_ep_create(seg, me, false, &ep);
    if (st != MLC_SUCCESS) goto fail;
    ep->backend_data = d;
    ep->cma = comm->cfg.cma != 0;

    /* Before the pid: a rank whose pid is there is counted on to attach at once. */
    bool light_fences = eng_light_fences_register();
    shm_fault_point(me, "attach");
    eng_ctl_t *mine = eng_ctl(ep, me);
    probe_value = 0x6d6c63636d61ull ^ (uint64_t)getpid();
    mine->cma_probe = probe_value;
    mine->cma_probe_addr = (uint64_t)(uintptr_t)&probe_value;
    atomic_store(&mine->light_fences, light_fences);
    atomic_store(&mine->pid, (int)getpid());
    eng_cpus_publish(seg, me);
    atomic_fetch_add(&seg->nattached, 1);
    st = wait_count(&rv, seg, &seg->nattached, (unsigned)n, timeout, false, "attached to the shared segment");
    if (st != MLC_SUCCESS) goto fail;
    /* Light fences only if every process can be reached by the sleepers' membarrier. */
    ep->light_fences = true;
    for (int r = 0; r < n; r++) ep->light_fences &= atomic_load(&eng_ctl(ep, r)->light_fences) == 1;
    /* Everyone is attached: the names are no longer needed, nothing is left behind. */
    if (me == 0) shm_rdv_unlink(&rv);
    for (int r = 0; r < n; r++) ep->pids[r] = atomic_load(&eng_ctl(ep, r)->pid);
    eng_ep_count_cpus(ep);

    /* Probe single-copy access to every peer; publish the row; wait for all rows. */
    uint8_t *cma = (uint8_t *)seg + seg->cma_off;
    for (int r = 0; r < n; r++) cma[(size_t)me * (size_t)n + (size_t)r] = r != me && ep->cma && cma_probe(ep, r);
    atomic_store(&mine->attached, ENG_JOINED);
    atomic_fetch_add(&seg->nreleased, 1); /* reused as the "probed" counter during init */
    st = wait_count(&rv, seg, &seg->nreleased, (unsigned)n, timeout, true, "finished the single-copy probe");
    if (st != MLC_SUCCESS) goto fail;
    shm_rdv_close(&rv);
    int ok = 0;
    for (int r = 0; r < n; r++) ok += r != me && cma[(size_t)r * (size_t)n + (size_t)me];
    MLC_INFO("shm rank %d/%d: segment %s (%zu bytes, rings of %llu bytes), single-copy readable by %d of %d "
             "peers%s; %s",
             me, n, rv.seg_name, map_bytes, (unsigned long long)seg->ring_bytes, ok, n - 1,
             ep->cma ? "" : " (MLC_CMA=0)",
             ep->light_fences ? "sleepers fence for wakers (membarrier)" : "wakers fence (no membarrier on every rank)");
    ep->peer_dead = shm_peer_dead;
    ep->release = shm_release;
    st = eng_comm_create(comm, ep, 0, 0, NULL);
    if (st != MLC_SUCCESS) goto fail;
    return MLC_SUCCESS;
fail:
    /* Every rank learns of it through the rendezvous; the last one out removes the names. */
    st = shm_rdv_fail(&rv, st);
    if (ep) {
        ep->release = NULL;
        ep->refs = 1;
        eng_ep_unref(ep);
    }
    free(d);
    if (seg) munmap(seg, map_bytes);
    return st;
}

const mlc_backend_t mlc_backend_shm = {
    MLC_BACKEND_HEADER,
    .name = "shm",
    .priority = 20,
    .available = shm_available,
    .accepts = shm_accepts,
    .init = shm_init,
    .host_shared = true,
    ENG_COMMON_ENTRIES,
};
