/* SPDX-License-Identifier: BSD-3-Clause */
/* The shm rendezvous: see rendezvous.h and docs/ENGINE.md "Segment". */
#include "rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/config.h"
#include "base/error.h"
#include "base/jobstate.h"
#include "base/log.h"
#include "base/wait.h"

#define RDV_MAGIC 0x4d4c4352u /* "MLCR" */
#define RDV_NAMES 16          /* /mlc-<id>-<n>, then .1 .. .15 */
#define RDV_STALE_S 0.5       /* an object still unformatted after this long was left by a dead creator */
#define RDV_GRACE_S 1.5       /* the last rank out waits this long for ranks that never claimed an entry */
#define RDV_CLAIM_WAIT_S 0.1  /* for the report of a failure another rank claimed */
#define RDV_UNREPLACED_S 1.0  /* a dead rank 0's rendezvous not replaced this long: it was ours */

enum { RDV_WAIT = 0, RDV_READY = 1, RDV_FAILED = 2 };

#define RDV_CHAIN 16 /* ancestors recorded: the process, its parent, ... */

typedef shm_rdv_proc_t rdv_proc_t;

struct shm_rdv_rec {
    atomic_uint magic; /* published last by the creator */
    uint32_t nranks;
    uint64_t tag; /* the launch's tag; 0: tell launches apart by `chain` */
    int32_t creator_pid;
    uint32_t chain_len;
    uint64_t creator_start;
    rdv_proc_t chain[RDV_CHAIN]; /* the creator and its ancestors */
    char nonce[40];
    atomic_int state;
    atomic_int fail_claim;
    int32_t fail_status;
    int32_t fail_rank;
    char fail_msg[400];
    atomic_int pid[]; /* per rank: > 0 claimed, < 0 left after a failure, 0 not yet */
};

static size_t rec_size(int n)
{
    size_t b = sizeof(shm_rdv_rec_t) + sizeof(atomic_int) * (size_t)n;
    return (b + 4095) / 4096 * 4096;
}

static void nap(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

int shm_pid_gone(pid_t pid, char *why, size_t len)
{
    if (pid <= 0) return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH) {
        snprintf(why, len, "process %d no longer exists", (int)pid);
        return 1;
    }
    /* A zombie (dead, not yet reaped by its parent) is gone too. */
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    if (rp && (rp[2] == 'Z' || rp[2] == 'X')) {
        /* How it ended: the stat line's last field (52nd, exit_code, as
         * waitpid reports it), where the kernel shows it. */
        int field = 3, code = 0;
        const char *p = rp + 2;
        for (; *p && field < 52; p++)
            if (*p == ' ') field++;
        if (field == 52 && sscanf(p, "%d", &code) == 1 && WIFSIGNALED(code))
            snprintf(why, len, "process %d was killed by signal %d (%s)", (int)pid, WTERMSIG(code),
                     strsignal(WTERMSIG(code)));
        else if (field == 52 && WIFEXITED(code))
            snprintf(why, len, "process %d exited with code %d", (int)pid, WEXITSTATUS(code));
        else
            snprintf(why, len, "process %d exited", (int)pid);
        return 1;
    }
    return 0;
}

int shm_describe_dead(unsigned code, char *why, size_t len)
{
    if (code & MLC_JOB_DEAD_SIGNAL) {
        int sig = (int)(code & 0xff);
        snprintf(why, len, "killed by signal %d (%s)", sig, strsignal(sig));
    } else {
        snprintf(why, len, "exited with code %u", code & 0xff);
    }
    return 1;
}

/* What MLC_FAULT_INIT asks of rank `rank` at `point`: NULL (nothing), or the
 * rest after R:POINT ("" or ":stop"). */
static const char *fault_asked(int rank, const char *point)
{
    const char *v = mlc_env_text(MLC_ENV_FAULT_INIT);
    if (v == NULL) return NULL;
    char *end;
    long r = strtol(v, &end, 10);
    if (end == v || *end != ':' || r != rank) return NULL;
    size_t len = strlen(point);
    if (strncmp(end + 1, point, len) != 0) return NULL;
    const char *rest = end + 1 + len;
    return *rest == '\0' || strcmp(rest, ":stop") == 0 ? rest : NULL;
}

bool shm_fault_named(int rank, const char *point) { return fault_asked(rank, point) != NULL; }

void shm_fault_point(int rank, const char *point)
{
    const char *rest = fault_asked(rank, point);
    if (rest == NULL) return;
    const char *v = mlc_env_text(MLC_ENV_FAULT_INIT);
    bool stop = *rest != '\0';
    MLC_WARN("MLC_FAULT_INIT=%s: rank %d %s itself at shm init point '%s'", v, rank, stop ? "stops" : "kills",
             point);
    kill(getpid(), stop ? SIGSTOP : SIGKILL);
}

/* Is the creator recorded in a rendezvous object gone (pid reused counts as gone)? */
static int creator_gone(const shm_rdv_rec_t *rec, char *why, size_t len)
{
    if (shm_pid_gone(rec->creator_pid, why, len)) return 1;
    uint64_t start = mlc_proc_start_time(rec->creator_pid);
    if (start != 0 && rec->creator_start != 0 && start != rec->creator_start) {
        snprintf(why, len, "process %d exited (its pid now names another process)", (int)rec->creator_pid);
        return 1;
    }
    return 0;
}

/* Parent and start time of pid from /proc/<pid>/stat (fields 4 and 22). */
static int proc_stat(int pid, int *ppid, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p) return -1;
    char state;
    unsigned long long st = 0;
    if (sscanf(p + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &state,
               ppid, &st) != 3)
        return -1;
    *start = st;
    return 0;
}

/* This process and its ancestors, up to RDV_CHAIN of them (stops below pid 1). */
static uint32_t own_chain(rdv_proc_t *chain)
{
    uint32_t n = 0;
    int pid = (int)getpid();
    while (n < RDV_CHAIN && pid > 1) {
        int ppid = 0;
        uint64_t start = 0;
        if (proc_stat(pid, &ppid, &start) != 0) break;
        chain[n].pid = pid;
        chain[n].start = start;
        n++;
        pid = ppid;
    }
    return n;
}

static bool in_chain(const rdv_proc_t *chain, uint32_t len, const rdv_proc_t *p)
{
    for (uint32_t i = 0; i < len && i < RDV_CHAIN; i++)
        if (chain[i].pid == p->pid && chain[i].start == p->start) return true;
    return false;
}

/* Same launch (docs/ENGINE.md "Segment"): the same tag; without tags, the
 * creator and this process share their parent (a launcher's ranks), or one
 * descends from the other (ranks forked by a rank). A parent of pid <= 1
 * (orphans, containers) cannot tell launches apart: counted as the same. */
static bool same_launch(const shm_rdv_rec_t *r, const shm_rdv_t *v)
{
    if (r->tag != 0 || v->tag != 0) return r->tag == v->tag;
    uint32_t rl = r->chain_len < RDV_CHAIN ? r->chain_len : RDV_CHAIN;
    if (rl == 0 || v->chain_len == 0) return true;
    if (rl < 2 || v->chain_len < 2) return true; /* a parent outside /proc's view */
    if (r->chain[1].pid == v->chain[1].pid && r->chain[1].start == v->chain[1].start) return true;
    return in_chain(v->chain, v->chain_len, &r->chain[0]) || in_chain(r->chain, rl, &v->chain[0]);
}

static void rdv_name(char *out, size_t len, const char *job_id, unsigned counter, int k)
{
    if (k == 0)
        snprintf(out, len, MLC_SHM_PREFIX "%s-%u", job_id, counter);
    else
        snprintf(out, len, MLC_SHM_PREFIX "%s-%u.%d", job_id, counter, k);
}

static void seg_name_of(shm_rdv_t *v, const char *nonce)
{
    /* name is /mlc-<id>-<n>[.<k>]; the segment is /mlc-<id>-<n>-<nonce> */
    char base[160];
    snprintf(base, sizeof base, "%s", v->name);
    char *dot = strrchr(base, '.');
    char *dash = strrchr(base, '-');
    if (dot && dash && dot > dash) *dot = '\0';
    snprintf(v->seg_name, sizeof v->seg_name, "%s-%.32s", base, nonce);
}

/* Remove name only if it still is the object (dev, ino): never a newer job's. */
static void unlink_if_same(const char *name, dev_t dev, ino_t ino)
{
    char path[200];
    struct stat sb;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    if (stat(path, &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino) shm_unlink(name);
}

typedef enum { SEEN_NONE, SEEN_FOREIGN, SEEN_UNREADY, SEEN_OTHER_JOB, SEEN_STALE, SEEN_MINE } seen_t;

/* Look at an existing rendezvous object. On SEEN_MINE (same user, formatted,
 * live creator, same tag) the object stays mapped in *rec / *bytes and fd is
 * closed. `info` describes what was seen, for logs and messages. */
static seen_t inspect(const shm_rdv_t *v, const char *name, shm_rdv_rec_t **rec, size_t *bytes, struct stat *sbp,
                      char *info, size_t ilen, uid_t *owner)
{
    *rec = NULL;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == EACCES) {
            snprintf(info, ilen, "%s cannot be opened (held by another user)", name);
            *owner = (uid_t)-1;
            return SEEN_FOREIGN;
        }
        snprintf(info, ilen, "%s: %s", name, strerror(errno));
        return SEEN_NONE;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return SEEN_NONE;
    }
    *sbp = sb;
    if (sb.st_uid != geteuid()) {
        close(fd);
        *owner = sb.st_uid;
        snprintf(info, ilen, "%s is held by uid %d", name, (int)sb.st_uid);
        return SEEN_FOREIGN;
    }
    if ((size_t)sb.st_size < sizeof(shm_rdv_rec_t)) {
        close(fd);
        snprintf(info, ilen, "%s is not formatted yet", name);
        return SEEN_UNREADY;
    }
    size_t len = (size_t)sb.st_size;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return SEEN_NONE;
    shm_rdv_rec_t *r = p;
    if (atomic_load_explicit(&r->magic, memory_order_acquire) != RDV_MAGIC || len < rec_size((int)r->nranks)) {
        munmap(p, len);
        snprintf(info, ilen, "%s is not formatted yet", name);
        return SEEN_UNREADY;
    }
    char why[128];
    if (creator_gone(r, why, sizeof why)) {
        snprintf(info, ilen, "%s was left by a dead job (creator %s)", name, why);
        *rec = r;
        *bytes = len;
        return SEEN_STALE;
    }
    if (!same_launch(r, v)) {
        snprintf(info, ilen, "%s belongs to another live job with this job id (its rank 0 is process %d, "
                 "started by another launcher or parent process)", name, (int)r->creator_pid);
        munmap(p, len);
        return SEEN_OTHER_JOB;
    }
    *rec = r;
    *bytes = len;
    return SEEN_MINE;
}

/* Publish this init failure unless another rank claimed one first (the
 * first wins; its report is written before the state flips). Returns
 * whether this rank's is the one published. */
static bool publish_failure(shm_rdv_rec_t *rec, int rank, mlc_status_t st, const char *msg)
{
    int unclaimed = 0;
    if (!atomic_compare_exchange_strong(&rec->fail_claim, &unclaimed, 1)) return false;
    shm_fault_point(rank, "failure-claimed");
    rec->fail_status = (int32_t)st;
    rec->fail_rank = rank;
    snprintf(rec->fail_msg, sizeof rec->fail_msg, "%s", msg);
    atomic_store_explicit(&rec->state, RDV_FAILED, memory_order_release);
    return true;
}

static mlc_status_t rank0_open(shm_rdv_t *v, unsigned counter)
{
    size_t bytes = rec_size(v->n);
    int foreign = 0;
    for (int k = 0; k < RDV_NAMES; k++) {
        rdv_name(v->name, sizeof v->name, v->job_id, counter, k);
        for (int attempt = 0;; attempt++) {
            int fd = shm_open(v->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
            if (fd >= 0) {
                struct stat sb;
                int rc = fstat(fd, &sb) == 0 ? posix_fallocate(fd, 0, (off_t)bytes) : errno;
                void *p = rc == 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
                if (rc == 0 && p == MAP_FAILED) rc = errno;
                close(fd);
                if (rc != 0) {
                    shm_unlink(v->name);
                    return mlc_error(MLC_ERR_SYSTEM, "shm: cannot reserve %zu bytes for the rendezvous %s in "
                                     "/dev/shm: %s", bytes, v->name, strerror(rc));
                }
                shm_rdv_rec_t *r = p;
                unsigned char raw[16];
                if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
                    munmap(p, bytes);
                    shm_unlink(v->name);
                    return mlc_error(MLC_ERR_SYSTEM, "shm: getrandom failed: %s", strerror(errno));
                }
                for (size_t i = 0; i < sizeof raw; i++) sprintf(r->nonce + 2 * i, "%02x", raw[i]);
                r->nranks = (uint32_t)v->n;
                r->tag = v->tag;
                memcpy(r->chain, v->chain, sizeof r->chain);
                r->chain_len = v->chain_len;
                r->creator_pid = (int32_t)getpid();
                r->creator_start = mlc_proc_start_time((int)getpid());
                atomic_store(&r->pid[0], (int)getpid());
                atomic_store_explicit(&r->magic, RDV_MAGIC, memory_order_release);
                v->rec = r;
                v->rec_bytes = bytes;
                v->dev = sb.st_dev;
                v->ino = sb.st_ino;
                seg_name_of(v, r->nonce);
                return MLC_SUCCESS;
            }
            if (errno != EEXIST)
                return mlc_error(MLC_ERR_SYSTEM, "shm: cannot create %s: %s", v->name, strerror(errno));
            shm_rdv_rec_t *r;
            size_t len = 0;
            struct stat sb;
            char info[320];
            uid_t owner = 0;
            seen_t s = inspect(v, v->name, &r, &len, &sb, info, sizeof info, &owner);
            if (s == SEEN_FOREIGN) {
                MLC_WARN("shm: %s; rank 0 uses the next name", info);
                foreign++;
                break;
            }
            if (s == SEEN_OTHER_JOB) {
                MLC_WARN("shm: %s; rank 0 uses the next name", info);
                break;
            }
            if (s == SEEN_STALE) {
                /* Same user, creator dead: remove it and the segment it named. */
                shm_rdv_t old = *v;
                seg_name_of(&old, r->nonce);
                shm_unlink(old.seg_name);
                unlink_if_same(v->name, sb.st_dev, sb.st_ino);
                munmap(r, len);
                MLC_WARN("shm: removed %s", info);
                continue;
            }
            if (s == SEEN_UNREADY && attempt * 0.001 > RDV_STALE_S) {
                unlink_if_same(v->name, sb.st_dev, sb.st_ino);
                MLC_WARN("shm: removed %s, left unformatted by a dead creator", v->name);
                continue;
            }
            if (s == SEEN_MINE) {
                /* A live rank 0 of a launch we cannot tell from ours. */
                char msg[400];
                snprintf(msg, sizeof msg, "job id %s: two jobs with this job id, size and launcher are "
                         "initialising at once (the other's rank 0 is process %d); they cannot be told apart: "
                         "give each job its own MLC_JOB_ID", v->job_id, (int)r->creator_pid);
                publish_failure(r, 0, MLC_ERR_CONFIG, msg);
                munmap(r, len);
                return mlc_error(MLC_ERR_CONFIG, "shm init: %s", msg);
            }
            nap(); /* being created (or vanished): look again */
        }
    }
    return mlc_error(MLC_ERR_SYSTEM, "shm: no free rendezvous name for job id %s: all %d names %s-%u[.k] are "
                     "held (%d by other users)", v->job_id, RDV_NAMES, v->job_id, counter, foreign);
}

/* Is any rank known dead by mlcomm-run's job state? */
static mlc_status_t jobstate_check(const shm_rdv_t *v)
{
    const mlc_jobstate_t *js = v->use_jobstate ? mlc_jobstate_get() : NULL;
    if (!js) return MLC_SUCCESS;
    /* Name the rank killed by a signal before one that exited (likely because of it). */
    int culprit = -1;
    unsigned culprit_code = 0;
    for (int r = 0; r < v->n && (unsigned)r < js->nranks; r++) {
        if (r == v->rank) continue;
        unsigned code = atomic_load(&((mlc_jobstate_t *)js)->dead[r]);
        if (code && (culprit < 0 || ((code & MLC_JOB_DEAD_SIGNAL) && !(culprit_code & MLC_JOB_DEAD_SIGNAL)))) {
            culprit = r;
            culprit_code = code;
        }
    }
    if (culprit < 0) return MLC_SUCCESS;
    char why[128];
    shm_describe_dead(culprit_code, why, sizeof why);
    return mlc_error(MLC_ERR_PEER_LOST, "shm init: rank %d is gone (%s)", culprit, why);
}

/* Claim this rank's entry in r (mapped, len bytes). */
static mlc_status_t claim(shm_rdv_t *v, shm_rdv_rec_t *r, size_t len, const struct stat *sb)
{
    v->rec = r;
    v->rec_bytes = len;
    v->dev = sb->st_dev;
    v->ino = sb->st_ino;
    int expected = 0, me = (int)getpid();
    if (!atomic_compare_exchange_strong(&r->pid[v->rank], &expected, me) && expected != me) {
        char msg[400];
        snprintf(msg, sizeof msg, "job id %s: rank %d was claimed by process %d and by process %d: two "
                 "jobs with this job id and launcher are starting at once, or a rank was started twice; "
                 "give each job its own MLC_JOB_ID", v->job_id, v->rank, expected < 0 ? -expected : expected, me);
        publish_failure(r, v->rank, MLC_ERR_CONFIG, msg);
        /* The entry is another process's: leave it as it is. */
        munmap(r, len);
        v->rec = NULL;
        return mlc_error(MLC_ERR_CONFIG, "shm init: %s", msg);
    }
    seg_name_of(v, r->nonce);
    return MLC_SUCCESS;
}

/* A joining rank's search for the rendezvous, one pass at a time (the shared wait loop, base/wait.h). */
typedef struct join {
    shm_rdv_t *v;
    unsigned counter, pass;
    bool over;          /* st is the outcome */
    mlc_status_t st;
    char other[320];
    /* A rendezvous of this launch whose rank 0 is dead: an earlier job's (our
     * rank 0 replaces it at once) or our own rank 0's, if nobody replaces it. */
    dev_t stale_dev[RDV_NAMES];
    ino_t stale_ino[RDV_NAMES];
    double stale_since[RDV_NAMES];
} join_t;

/* One look at every name (`last`: the final look, past the timeout). Sets
 * j->over and j->st when the search has an outcome. */
static void join_pass(join_t *j, bool last)
{
    shm_rdv_t *v = j->v;
    unsigned pass = j->pass++;
    int foreign = 0;
    bool late = false;
    for (int k = 0; k < RDV_NAMES; k++) {
        rdv_name(v->name, sizeof v->name, v->job_id, j->counter, k);
        shm_rdv_rec_t *r;
        size_t len = 0;
        struct stat sb;
        char info[320];
        uid_t owner = 0;
        seen_t s = inspect(v, v->name, &r, &len, &sb, info, sizeof info, &owner);
        /* Rank 0 takes a name only when the ones before it exist; they can
         * vanish later (another job finished), so look past a gap now and then. */
        if (s == SEEN_NONE && pass % 16 != 0 && !last) break;
        if (last && (s == SEEN_MINE || s == SEEN_UNREADY)) {
            /* Our rank 0 created it only now, and this rank gives up, so the
             * job cannot start: remove it, or a rank 0 that never comes back
             * (stopped, then killed) would leave it behind. */
            if (r) munmap(r, len);
            unlink_if_same(v->name, sb.st_dev, sb.st_ino);
            late = true;
            continue;
        }
        if (s == SEEN_FOREIGN) foreign++;
        if (s == SEEN_OTHER_JOB) snprintf(j->other, sizeof j->other, "%s", info);
        if (s == SEEN_STALE) {
            if (same_launch(r, v) && r->nranks == (uint32_t)v->n) {
                if (atomic_load_explicit(&r->state, memory_order_acquire) == RDV_FAILED) {
                    /* Our rank 0 died and a peer said so: join to learn of it (and to clean up). */
                    mlc_status_t st = claim(v, r, len, &sb);
                    j->over = true;
                    j->st = st != MLC_SUCCESS ? st : shm_rdv_check(v);
                    return;
                }
                if (j->stale_ino[k] != sb.st_ino || j->stale_dev[k] != sb.st_dev) {
                    j->stale_dev[k] = sb.st_dev;
                    j->stale_ino[k] = sb.st_ino;
                    j->stale_since[k] = mlc_now();
                } else if (mlc_now() - j->stale_since[k] > RDV_UNREPLACED_S) {
                    int pid0 = r->creator_pid;
                    mlc_status_t st = claim(v, r, len, &sb);
                    j->over = true;
                    j->st = st != MLC_SUCCESS ? st
                                              : mlc_error(MLC_ERR_PEER_LOST, "shm init: rank 0 is gone (process %d died "
                                                          "after creating %s, and no other rank 0 replaced it within %g s)",
                                                          pid0, v->name, RDV_UNREPLACED_S);
                    return;
                }
            }
            munmap(r, len);
        }
        if (s != SEEN_MINE) continue;
        j->over = true;
        if (r->nranks != (uint32_t)v->n) {
            uint32_t theirs = r->nranks;
            j->st = mlc_error(MLC_ERR_MISMATCH, "shm init: job id %s: MLC_WORLD_SIZE differs: rank 0 started a "
                              "job of %u ranks, rank %d expects %d", v->job_id, theirs, v->rank, v->n);
            /* Tell the job, which would otherwise wait for this rank until
             * its timeout (the first failure published wins; the record
             * serves init only); its entry, where it has one nobody claimed,
             * says it left, after the failure is there to explain it. */
            int unclaimed = 0;
            publish_failure(r, v->rank, j->st, mlc_last_error());
            if ((uint32_t)v->rank < theirs) atomic_compare_exchange_strong(&r->pid[v->rank], &unclaimed, -(int)getpid());
            munmap(r, len);
            return;
        }
        j->st = claim(v, r, len, &sb);
        return;
    }
    if (foreign == RDV_NAMES) {
        j->over = true;
        j->st = mlc_error(MLC_ERR_SYSTEM, "shm init: job id %s: all %d rendezvous names are held by other users",
                          v->job_id, RDV_NAMES);
        return;
    }
    mlc_status_t st = jobstate_check(v);
    if (st != MLC_SUCCESS) {
        j->over = true;
        j->st = st;
        return;
    }
    if (last) {
        j->over = true;
        rdv_name(v->name, sizeof v->name, v->job_id, j->counter, 0);
        if (late)
            j->st = mlc_error(MLC_ERR_TIMEOUT, "shm init: rank 0 of job id %s created %s only when this rank's "
                              "init timed out (removed: the job cannot start)", v->job_id, v->name);
        else
            j->st = mlc_error(MLC_ERR_TIMEOUT, "shm init: rank 0 of job id %s never created %s%s%s", v->job_id,
                              v->name, j->other[0] ? "; seen instead: " : " (is rank 0 running, with the same job id?)",
                              j->other);
    }
}

static int join_step(void *p)
{
    join_t *j = p;
    join_pass(j, false);
    return j->over ? MLC_WAIT_STOP : MLC_WAIT_NOTHING;
}

static int join_done(void *p) { return ((join_t *)p)->over; }

static mlc_status_t rank_join(shm_rdv_t *v, unsigned counter, double timeout_s)
{
    join_t j = {.v = v, .counter = counter};
    mlc_wait_t w = {.step = join_step, .done = join_done, .ctx = &j, .timeout_s = timeout_s,
                    .what = "shm init (joining the rendezvous)", .spin_s = 1e-4, .yield_s = 0,
                    .sleep_min_s = 1e-3, .sleep_max_s = 1e-3};
    if (mlc_wait_run(&w) == MLC_WAIT_TIMEOUT) join_pass(&j, true); /* one last look at every name */
    return j.st;
}

mlc_status_t shm_rdv_open(shm_rdv_t *v, const char *job_id, unsigned counter, int rank, int n, uint64_t tag,
                          bool use_jobstate, double timeout_s)
{
    memset(v, 0, sizeof *v);
    v->job_id = job_id;
    v->rank = rank;
    v->n = n;
    v->use_jobstate = use_jobstate;
    v->tag = tag;
    if (tag == 0) v->chain_len = own_chain(v->chain);
    return rank == 0 ? rank0_open(v, counter) : rank_join(v, counter, timeout_s);
}

void shm_rdv_publish(shm_rdv_t *v)
{
    int waiting = RDV_WAIT;
    atomic_compare_exchange_strong_explicit(&v->rec->state, &waiting, RDV_READY, memory_order_release,
                                            memory_order_relaxed);
}

mlc_status_t shm_rdv_check(shm_rdv_t *v)
{
    shm_rdv_rec_t *r = v->rec;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == RDV_FAILED) {
        if (r->fail_rank == v->rank) return (mlc_status_t)r->fail_status;
        /* A timeout or a death already names the ranks it is about:
         * naming the rank that saw it first would blame a healthy one. */
        if (r->fail_status == MLC_ERR_TIMEOUT || r->fail_status == MLC_ERR_PEER_LOST)
            return mlc_error((mlc_status_t)r->fail_status, "%s (the first failure of this init, seen by "
                             "another rank)", r->fail_msg);
        return mlc_error((mlc_status_t)r->fail_status, "shm init: rank %d failed: %s", (int)r->fail_rank,
                         r->fail_msg);
    }
    mlc_status_t st = jobstate_check(v);
    if (st != MLC_SUCCESS) return st;
    /* Processes are looked at every 10 ms: cheap enough, far inside 2 s. */
    double now = mlc_now();
    if (now < v->next_pid_check) return MLC_SUCCESS;
    v->next_pid_check = now + 0.01;
    char why[128];
    for (int k = 0; k < v->n; k++) {
        if (k == v->rank) continue;
        int p = atomic_load(&r->pid[k]);
        if (p < 0) {
            /* It left after a failure it published; the state is about to say so. */
            if (atomic_load_explicit(&r->state, memory_order_acquire) == RDV_FAILED) return shm_rdv_check(v);
            return mlc_error(MLC_ERR_PEER_LOST, "shm init: rank %d left init", k);
        }
        if (p > 0 && shm_pid_gone(p, why, sizeof why))
            return mlc_error(MLC_ERR_PEER_LOST, "shm init: rank %d is gone (%s)", k, why);
    }
    if (creator_gone(r, why, sizeof why))
        return mlc_error(MLC_ERR_PEER_LOST, "shm init: rank 0 is gone (%s)", why);
    return MLC_SUCCESS;
}

/* Waiting for rank 0 to publish the segment (base/wait.h). */
static int ready_step(void *p)
{
    shm_rdv_t *v = p;
    return atomic_load_explicit(&v->rec->state, memory_order_acquire) == RDV_READY ? MLC_WAIT_MOVED
                                                                                    : MLC_WAIT_NOTHING;
}

static int ready_done(void *p)
{
    shm_rdv_t *v = p;
    return atomic_load_explicit(&v->rec->state, memory_order_acquire) == RDV_READY;
}

static int ready_check(void *p)
{
    shm_rdv_t *v = p;
    v->wait_st = shm_rdv_check(v);
    return v->wait_st != MLC_SUCCESS;
}

mlc_status_t shm_rdv_wait_ready(shm_rdv_t *v, double timeout_s)
{
    v->wait_st = MLC_SUCCESS;
    mlc_wait_t w = {.step = ready_step, .done = ready_done, .check = ready_check, .ctx = v, .timeout_s = timeout_s,
                    .what = "shm init (waiting for rank 0's segment)", .spin_s = 1e-4, .yield_s = 0,
                    .sleep_min_s = 1e-4, .sleep_max_s = 1e-3};
    switch (mlc_wait_run(&w)) {
    case MLC_WAIT_DONE: return MLC_SUCCESS;
    case MLC_WAIT_STOPPED: return v->wait_st;
    case MLC_WAIT_TIMEOUT: break;
    }
    return mlc_error(MLC_ERR_TIMEOUT, "shm init: rank 0 never published the segment of job id %s", v->job_id);
}

/* Has every rank that claimed an entry left or died? *unclaimed: entries never
 * claimed by ranks not known dead (they may still come and read the failure). */
static bool all_out(shm_rdv_t *v, int *unclaimed)
{
    char why[128];
    const mlc_jobstate_t *js = v->use_jobstate ? mlc_jobstate_get() : NULL;
    *unclaimed = 0;
    for (int k = 0; k < v->n; k++) {
        if (k == v->rank) continue;
        int p = atomic_load(&v->rec->pid[k]);
        bool dead = js && (unsigned)k < js->nranks && atomic_load(&((mlc_jobstate_t *)js)->dead[k]) != 0;
        if (p == 0 && !dead)
            (*unclaimed)++;
        else if (p > 0 && !shm_pid_gone(p, why, sizeof why))
            return false;
    }
    return true;
}

mlc_status_t shm_rdv_fail(shm_rdv_t *v, mlc_status_t st)
{
    shm_rdv_rec_t *r = v->rec;
    if (!r) return st;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    /* Report the cause: the first failure published, by whichever rank.
     * A rank that claimed one publishes it at once, unless it is stopped or
     * killed in between: then this rank's own failure is the report (never
     * success: this init has failed). */
    if (!publish_failure(r, v->rank, st, msg)) {
        double until = mlc_now() + RDV_CLAIM_WAIT_S;
        while (atomic_load_explicit(&r->state, memory_order_acquire) != RDV_FAILED && mlc_now() < until) nap();
        mlc_status_t cause = atomic_load_explicit(&r->state, memory_order_acquire) == RDV_FAILED ? shm_rdv_check(v)
                                                                                                  : MLC_SUCCESS;
        if (cause != MLC_SUCCESS) st = cause;
        else mlc_error(st, "%s", msg);
    } else {
        mlc_error(st, "%s", msg);
    }
    char keep[sizeof msg];
    snprintf(keep, sizeof keep, "%s", mlc_last_error());
    atomic_store(&r->pid[v->rank], -(int)getpid());
    /* The last rank out removes the names; it waits a little for ranks that
     * never claimed an entry (they would find the failure there). After a
     * timeout or a death the ranks still in may never come out (stopped,
     * hung): every rank that gives up removes them after the grace. */
    bool stuck = st == MLC_ERR_TIMEOUT || st == MLC_ERR_PEER_LOST;
    /* Under mlcomm-run, for its job id, nothing waits: the launcher removes
     * the job's names from /dev/shm when it ends, and it stops the job 1 s
     * after a rank dies, while a rank that never claimed its entry may be
     * late or may have left already (an exit 0 is not recorded): holding
     * this error back for it would lose the error. The segment goes now
     * (late ranks learn of the failure from the rendezvous record alone). */
    bool swept = v->use_jobstate && mlc_jobstate_sweeps(v->job_id);
    double until = mlc_now() + RDV_GRACE_S;
    int unclaimed;
    for (;;) {
        bool out = all_out(v, &unclaimed), last = out && unclaimed == 0;
        if (!out && !stuck && !swept) break; /* a rank still in will be the last one out */
        if (last || swept || mlc_now() > until) {
            if (v->seg_name[0]) shm_unlink(v->seg_name);
            if (last || !swept) unlink_if_same(v->name, v->dev, v->ino); /* else the launcher's sweep removes it */
            break;
        }
        nap();
    }
    shm_rdv_close(v);
    return mlc_error(st, "%s", keep);
}

void shm_rdv_unlink(shm_rdv_t *v)
{
    shm_unlink(v->seg_name);
    unlink_if_same(v->name, v->dev, v->ino);
}

void shm_rdv_close(shm_rdv_t *v)
{
    if (v->rec) munmap(v->rec, v->rec_bytes);
    v->rec = NULL;
}
