/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fault injection on the shm backend: trials of 2..4 ranks run a random
 * sequence of operations (allreduce, broadcast, allgather, alltoall,
 * reduce_scatter, barrier, p2p ring, probe ring, iprobe ring, split + an
 * allreduce on the half, all of 256 bytes; and large ones past the slots: a
 * 4 MiB allreduce of shared blocks (mlc_mem_alloc, read in place by peers),
 * a 1 MiB-per-rank allgather and a 4 MiB in-place broadcast of malloc'd
 * buffers, which go through the stages or single copy, and a p2p ring of
 * 4 MiB from shared blocks, a rendezvous) and one rank, the victim, is hit
 * at a random point
 * (0..13.5 ms after init began, or 0..300 us after it entered a random
 * operation; a fast victim may be further on by then, never past the final
 * barrier) by
 *   kill:  SIGKILL;
 *   stop:  SIGSTOP (the survivors run with a small MLC_TIMEOUT);
 *   abort: mlc_comm_abort on the world communicator (from another thread);
 *   exit:  mlc_comm_free of the world communicator and exit(0), before an
 *          operation the others enter.
 * Ranks are started by mlcomm-run, or (every other pair of trials) directly
 * by this driver with MLC_RANK / MLC_WORLD_SIZE / MLC_JOB_ID as a launcher-less
 * job would be. Each trial asserts:
 *   - no hang: every survivor reports within MLC_TIMEOUT + 6 s (one that
 *     does not gets SIGTERM and says which call it was still in; so does one
 *     that mlcomm-run stops), and every process of the trial exits;
 *   - every survivor's status, which mlc_comm_status then returns too:
 *     kill, exit -> MLC_ERR_PEER_LOST naming exactly the rank that died or
 *     left; stop -> MLC_ERR_TIMEOUT naming exactly the stopped rank;
 *     abort -> MLC_ERR_ABORTED (the aborting rank too). Ranks are named as
 *     numbered in the communicator the failing call used;
 *   - nothing in /dev/shm whose name holds the trial's job id.
 * It prints per trial the time from the fault to each survivor's error, and
 * at the end median and max over trials (per trial: its slowest survivor).
 *
 * usage: fault_inject MLCOMM_RUN
 * The trials follow from one number, the plan: FAULT_PLAN (default 1); where
 * in the victim's calls the fault lands still depends on timing.
 * FAULT_TRIAL=i runs trial i of the plan alone (replay). FAULT_BUDGET=S
 * (default 50): trials start while less than S seconds have passed (at least
 * 8, one of each kind with and without mlcomm-run). FAULT_KINDS (e.g.
 * "kill" or "kill,abort") runs only those kinds (a kill storm).
 * The same program is the rank (FAULT_SPEC set: "ranks kind victim at delay_us
 * ops", FAULT_DIR: where each rank writes its pid, job id and result).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

#define MAX_RANKS 4
#define MAX_OPS 8
#define COUNT 64
#define LARGE_COUNT (1 << 20) /* int32: the large operations' elements */

enum { KILL, STOP, ABORT, EXIT, KINDS };
static const char *const kind_name[] = {"kill", "stop", "abort", "exit"};
static const char op_letters[] = "ABGTRWPQISLMKN";
static const char *op_name(char c)
{
    switch (c) {
    case 'A': return "allreduce";
    case 'B': return "broadcast";
    case 'G': return "allgather";
    case 'T': return "alltoall";
    case 'R': return "reduce_scatter";
    case 'W': return "barrier";
    case 'P': return "p2p ring";
    case 'Q': return "probe ring";
    case 'I': return "iprobe ring";
    case 'S': return "split";
    case 'L': return "large allreduce (shared blocks)";
    case 'M': return "large allgather";
    case 'K': return "large broadcast (in place)";
    case 'N': return "large p2p ring (shared blocks)";
    case 'F': return "final barrier";
    default: return "init";
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Write path atomically (tmp + rename) so a reader never sees half of it. */
static void write_file(const char *dir, const char *name, const char *text);
static void note_fault_time(void);

static void write_file(const char *dir, const char *name, const char *text)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof tmp, "%s/.%s", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

/* ======================================================================== */
/* The rank                                                                 */
/* ======================================================================== */

typedef struct spec {
    int n, kind, victim, at; /* at: operation index, -1 = during init */
    long delay_us;
    char ops[MAX_OPS + 1];
} spec_t;

static spec_t sp;
static const char *out_dir;
static int my_rank;
static mlc_comm_t *world;
static atomic_int cur_op = -2; /* -1 in init, i in operation i */
static double timeout_s;

static void note_fault_time(void)
{
    char text[64];
    snprintf(text, sizeof text, "%lld\n", (long long)now_ns());
    write_file(out_dir, "fault", text);
}

static void fault(void)
{
    note_fault_time();
    if (sp.kind == KILL) raise(SIGKILL);
    else if (sp.kind == STOP) raise(SIGSTOP);
    else mlc_comm_abort(world);
}

static void *fault_thread(void *arg)
{
    if (sp.at < 0) {
        while (atomic_load(&cur_op) < -1) sleep_us(20);
    } else {
        while (atomic_load(&cur_op) < sp.at) sleep_us(50);
    }
    sleep_us(sp.delay_us);
    fault();
    return arg;
}

/* The result, then wait (bounded) until the other reporting ranks have
 * reported too, so that no rank's exit is what the others see. */
static void report(mlc_status_t st, int op, const char *where, int victim_here, const char *msg)
{
    char text[2048], name[16];
    snprintf(text, sizeof text, "%s %lld %d %d %s\n%s\n", mlc_status_name(st), (long long)now_ns(), op,
             victim_here, where, msg ? msg : "");
    snprintf(name, sizeof name, "r%d", my_rank);
    write_file(out_dir, name, text);
    int expect = sp.kind == ABORT ? sp.n : sp.n - 1;
    for (int64_t end = now_ns() + 10 * 1000000000LL; now_ns() < end;) {
        int have = 0;
        for (int r = 0; r < sp.n; r++) {
            char p[512];
            snprintf(p, sizeof p, "%s/r%d", out_dir, r);
            if (access(p, F_OK) == 0) have++;
        }
        if (have >= expect) break;
        sleep_us(2000);
    }
}

/* SIGTERM (mlcomm-run stopping the job, or the driver ending a rank that
 * did not report) while still in a call: say which call, then exit. Only
 * async-signal-safe calls. */
static char term_path[512], term_tmp[512];
static void on_term(int sig)
{
    (void)sig;
    if (access(term_path, F_OK) != 0) {
        char text[160] = "SIGTERM 0 ", *p = text + strlen(text);
        int op = atomic_load(&cur_op);
        if (op < 0) *p++ = '-', op = -op;
        char digits[12];
        int nd = 0;
        do digits[nd++] = (char)('0' + op % 10);
        while ((op /= 10) > 0);
        while (nd) *p++ = digits[--nd];
        const char *tail = " -1 world\nstill waiting in this call when SIGTERM came\n";
        size_t tl = strlen(tail);
        memcpy(p, tail, tl);
        p += tl;
        int fd = open(term_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            ssize_t w = write(fd, text, (size_t)(p - text));
            (void)w;
            close(fd);
            rename(term_tmp, term_path);
        }
    }
    _exit(143);
}

#define NOT_STICKY "NOT STICKY (mlc_comm_status returned MLC_SUCCESS after this failure): "
static char first_error[1024]; /* set where a later call would replace the failing one's message */
static int32_t sbuf[MAX_RANKS * COUNT], rbuf[MAX_RANKS * COUNT];
/* The large operations' buffers: shared blocks (lsend, lrecv) and malloc'd
 * (big: a whole allgather's result). */
static int32_t *lsend, *lrecv, *big;

/* Ring exchange with the neighbours; how the message is found depends on c
 * ('N': a large one from shared blocks). */
static mlc_status_t ring(mlc_comm_t *c, char how, int tag)
{
    int r = mlc_comm_rank(c), p = mlc_comm_size(c), next = (r + 1) % p, prev = (r + p - 1) % p;
    bool large = how == 'N';
    size_t count = large ? LARGE_COUNT : COUNT;
    mlc_request_t *s = NULL;
    mlc_status_t st = mlc_send(large ? lsend : sbuf, count, MLC_INT32, next, tag, c, &s);
    if (st != MLC_SUCCESS) return st;
    mlc_msg_status_t ms;
    if (how == 'Q') {
        st = mlc_probe(prev, tag, c, &ms);
    } else if (how == 'I') {
        int flag = 0;
        int64_t end = now_ns() + (int64_t)((timeout_s + 3) * 1e9);
        while (st == MLC_SUCCESS && !flag) {
            st = mlc_iprobe(prev, tag, c, &flag, &ms);
            if (st == MLC_SUCCESS && !flag) {
                if (now_ns() > end) {
                    report(MLC_SUCCESS, atomic_load(&cur_op), "world", -1,
                           "iprobe kept returning flag=0 without an error for MLC_TIMEOUT + 3 s");
                    _exit(3);
                }
                sleep_us(100);
            }
        }
    }
    if (st == MLC_SUCCESS) st = mlc_recv(large ? lrecv : rbuf, count, MLC_INT32, prev, tag, c, NULL, NULL);
    if (st != MLC_SUCCESS) {
        /* the failed call's message, before the wait for the send replaces it */
        snprintf(first_error, sizeof first_error, "%s", mlc_last_error());
        mlc_status_t sw = mlc_request_wait(&s);
        if (sw != MLC_SUCCESS && !mlc_last_error()[0])
            fprintf(stderr, "fault_inject: rank %d: mlc_request_wait returned %s with an empty mlc_last_error()\n",
                    my_rank, mlc_status_name(sw));
        return st;
    }
    return mlc_request_wait(&s);
}

static mlc_status_t run_op(char c, int i, mlc_comm_t **sub, int *in_sub)
{
    int p = mlc_comm_size(world);
    switch (c) {
    case 'A': return mlc_allreduce(sbuf, rbuf, COUNT, MLC_INT32, MLC_SUM, world, NULL);
    case 'B': return mlc_broadcast(sbuf, rbuf, COUNT, MLC_INT32, i % p, world, NULL);
    case 'G': return mlc_allgather(sbuf, rbuf, COUNT, MLC_INT32, world, NULL);
    case 'T': return mlc_alltoall(sbuf, rbuf, COUNT / MAX_RANKS, MLC_INT32, world, NULL);
    case 'R': return mlc_reduce_scatter(sbuf, rbuf, COUNT / MAX_RANKS, MLC_INT32, MLC_SUM, world, NULL);
    case 'W': return mlc_barrier(world, NULL);
    case 'L': return mlc_allreduce(lsend, lrecv, LARGE_COUNT, MLC_INT32, MLC_SUM, world, NULL);
    case 'M': /* in place: this rank's block where the result puts it */
        return mlc_allgather(big + (size_t)mlc_comm_rank(world) * (LARGE_COUNT / MAX_RANKS), big,
                             LARGE_COUNT / MAX_RANKS, MLC_INT32, world, NULL);
    case 'K': return mlc_broadcast(big, big, LARGE_COUNT, MLC_INT32, i % p, world, NULL);
    case 'P':
    case 'Q':
    case 'I':
    case 'N': return ring(world, c, 100 + i);
    case 'S': {
        mlc_status_t st = mlc_comm_split(world, my_rank % 2, my_rank, sub);
        if (st != MLC_SUCCESS) return st;
        *in_sub = 1;
        st = mlc_allreduce(sbuf, rbuf, COUNT, MLC_INT32, MLC_SUM, *sub, NULL);
        if (st != MLC_SUCCESS) return st;
        *in_sub = 0;
        st = mlc_comm_free(*sub);
        *sub = NULL;
        return st;
    }
    }
    return MLC_ERR_INVALID_ARG;
}

static int rank_main(const char *spec_text)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char kind;
    if (sscanf(spec_text, "%d %c %d %d %ld %8s", &sp.n, &kind, &sp.victim, &sp.at, &sp.delay_us, sp.ops) != 6) {
        fprintf(stderr, "fault_inject: bad FAULT_SPEC '%s'\n", spec_text);
        return 2;
    }
    sp.kind = kind == 'k' ? KILL : kind == 's' ? STOP : kind == 'e' ? EXIT : ABORT;
    out_dir = getenv("FAULT_DIR");
    const char *r = getenv("MLC_RANK"), *t = getenv("MLC_TIMEOUT");
    if (!out_dir || !r) {
        fprintf(stderr, "fault_inject: FAULT_DIR and MLC_RANK must be set\n");
        return 2;
    }
    my_rank = atoi(r);
    timeout_s = t ? atof(t) : 30;
    char text[256], name[16];
    snprintf(text, sizeof text, "%d %s\n", (int)getpid(), getenv("MLC_JOB_ID") ? getenv("MLC_JOB_ID") : "-");
    snprintf(name, sizeof name, "p%d", my_rank);
    write_file(out_dir, name, text);
    for (int i = 0; i < MAX_RANKS * COUNT; i++) sbuf[i] = my_rank + i;
    if (strpbrk(sp.ops, "LMKN")) {
        if (mlc_mem_alloc(LARGE_COUNT * sizeof(int32_t), (void **)&lsend) != MLC_SUCCESS ||
            mlc_mem_alloc(LARGE_COUNT * sizeof(int32_t), (void **)&lrecv) != MLC_SUCCESS ||
            !(big = malloc(LARGE_COUNT * sizeof(int32_t)))) {
            fprintf(stderr, "fault_inject: rank %d: no memory for the large operations\n", my_rank);
            return 2;
        }
        for (int i = 0; i < LARGE_COUNT; i++) lsend[i] = big[i] = my_rank + i;
    }
    snprintf(term_path, sizeof term_path, "%s/r%d", out_dir, my_rank);
    snprintf(term_tmp, sizeof term_tmp, "%s/.r%d", out_dir, my_rank);
    signal(SIGTERM, on_term);

    pthread_t tid;
    bool victim = my_rank == sp.victim;
    if (victim && sp.kind != EXIT && pthread_create(&tid, NULL, fault_thread, NULL) != 0) return 2;
    atomic_store(&cur_op, -1);
    mlc_status_t st = mlc_comm_init(NULL, &world);
    if (st != MLC_SUCCESS) {
        report(st, -1, "world", sp.victim, mlc_last_error());
        return 3;
    }
    mlc_comm_t *sub = NULL;
    int nops = (int)strlen(sp.ops);
    for (int i = 0; i <= nops; i++) {
        if (victim && sp.kind == EXIT && i == sp.at) {
            note_fault_time();
            mlc_comm_free(world);
            exit(0);
        }
        if (i == nops && victim) pthread_join(tid, NULL); /* the fault comes before the final barrier */
        atomic_store(&cur_op, i);
        int in_sub = 0;
        st = i == nops ? mlc_barrier(world, NULL) : run_op(sp.ops[i], i, &sub, &in_sub);
        if (st != MLC_SUCCESS) {
            int vh = in_sub ? (sp.victim % 2 == my_rank % 2 ? sp.victim / 2 : -1) : sp.victim;
            mlc_comm_t *used = in_sub ? sub : world;
            bool kept = !used || mlc_comm_status(used) != MLC_SUCCESS; /* a failure stays */
            char msg[sizeof NOT_STICKY + sizeof first_error];
            snprintf(msg, sizeof msg, "%s%s", kept ? "" : NOT_STICKY, first_error[0] ? first_error : mlc_last_error());
            report(st, i, in_sub ? "half" : "world", vh, msg);
            if (sub) mlc_comm_free(sub);
            mlc_comm_free(world);
            return 3;
        }
    }
    report(MLC_SUCCESS, nops, "world", sp.victim, "every call returned MLC_SUCCESS");
    mlc_comm_free(world);
    return 0;
}

/* ======================================================================== */
/* The driver                                                               */
/* ======================================================================== */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct plan {
    spec_t s;
    bool launcher;
} plan_t;

static int kinds[KINDS] = {KILL, STOP, ABORT, EXIT}, nkinds = KINDS; /* FAULT_KINDS */

static plan_t make_plan(uint64_t plan_no, int trial)
{
    uint64_t st = plan_no * 1000003u + (uint64_t)trial;
    plan_t p;
    memset(&p, 0, sizeof p);
    p.s.kind = kinds[trial % nkinds];
    p.launcher = (trial / nkinds) % 2 == 0;
    p.s.n = 2 + (int)(mix(&st) % 3);
    p.s.victim = (int)(mix(&st) % (uint64_t)p.s.n);
    int nops = 2 + (int)(mix(&st) % (MAX_OPS - 1));
    for (int i = 0; i < nops; i++) p.s.ops[i] = op_letters[mix(&st) % (sizeof op_letters - 1)];
    /* one trial in six (kill and stop only) hits init, 0..15 ms after it began */
    if ((p.s.kind == KILL || p.s.kind == STOP) && mix(&st) % 6 == 0) {
        p.s.at = -1;
        long u = (long)(mix(&st) % 16);
        p.s.delay_us = u * u * 60; /* 0..13.5 ms, more often early */
    } else {
        p.s.at = (int)(mix(&st) % (uint64_t)nops);
        p.s.delay_us = (long)(mix(&st) % 300);
    }
    return p;
}

static bool read_file(const char *dir, const char *name, char *buf, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return true;
}

/* The rank numbers a message names ("rank N", "ranks N, M", "source N" as a
 * probe names the rank it waits on), leaving out "rank SELF:" (the caller
 * saying who it is) and a split communicator's closing note of its world
 * ranks (a map, not a blame). After "not heard from" only that list counts.
 * Returns a bit set. */
static unsigned named_ranks(const char *full, int self)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", full);
    char *note = strstr(msg, " (ranks of a communicator made by mlc_comm_split;");
    if (note) *note = '\0';
    unsigned set = 0;
    const char *nh = strstr(msg, "not heard from");
    if (nh) {
        const char *p = nh + strlen("not heard from");
        while (*p == ':' || *p == ' ') p++;
        while (*p >= '0' && *p <= '9') {
            set |= 1u << (strtol(p, (char **)&p, 10) & 31);
            while (*p == ',' || *p == ' ') p++;
            if (strncmp(p, "and ", 4) == 0) p += 4;
        }
        return set;
    }
    for (const char *q = msg; (q = strstr(q, "rank")) != NULL;) {
        q += 4;
        if (*q == 's') q++;
        while (*q == ' ') q++;
        const char *first = q;
        unsigned here = 0;
        int count = 0;
        while (*q >= '0' && *q <= '9') {
            here |= 1u << (strtol(q, (char **)&q, 10) & 31);
            count++;
            if (q[0] == ',' && q[1] == ' ' && q[2] >= '0' && q[2] <= '9') q += 2;
            else if (strncmp(q, " and ", 5) == 0) q += 5;
        }
        if (count == 1 && *q == ':' && atoi(first) == self) continue; /* "rank SELF: ..." */
        set |= here;
    }
    for (const char *q = msg; (q = strstr(q, "source ")) != NULL;) {
        q += strlen("source ");
        if (*q >= '0' && *q <= '9') set |= 1u << (atoi(q) & 31);
    }
    return set;
}

static void set_text(unsigned set, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int r = 0; r < 32 && o < len; r++)
        if (set & (1u << r)) o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? ", " : "", r);
    if (!o) snprintf(buf, len, "none");
}

static bool alive(pid_t pid) { return !mlc_test_process_ended((int)pid); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double v[4096];
    int n;
} stats_t;
static stats_t lat[KINDS];

/* One trial; returns the number of failed assertions (each printed). */
static int run_trial(const char *self, const char *run, uint64_t plan_no, int trial)
{
    plan_t pl = make_plan(plan_no, trial);
    spec_t *s = &pl.s;
    double tmo = s->kind == STOP ? 2 : 5;
    char dir[] = "/tmp/mlc-fault-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char spec_text[128], opnames[256] = "";
    snprintf(spec_text, sizeof spec_text, "%d %c %d %d %ld %s", s->n, "ksae"[s->kind], s->victim, s->at, s->delay_us,
             s->ops);
    for (int i = 0; s->ops[i]; i++)
        snprintf(opnames + strlen(opnames), sizeof opnames - strlen(opnames), "%s%s", i ? "," : "",
                 op_name(s->ops[i]));
    printf("trial %d: %s rank %d of %d %s, %s; ops %s; FAULT_SPEC='%s'\n", trial, kind_name[s->kind], s->victim,
           s->n, s->at < 0 ? "during init" : "in operation", pl.launcher ? "mlcomm-run" : "no launcher", opnames,
           spec_text);
    if (s->kind == EXIT)
        printf("  leaves before operation %d (%s)\n", s->at, op_name(s->ops[s->at]));
    else if (s->at >= 0)
        printf("  fault %ld us into operation %d (%s)\n", s->delay_us, s->at, op_name(s->ops[s->at]));
    else
        printf("  fault %ld us after init began\n", s->delay_us);

    char tmo_text[16], job[40] = "", n_text[8];
    snprintf(tmo_text, sizeof tmo_text, "%g", tmo);
    snprintf(n_text, sizeof n_text, "%d", s->n);
    if (!pl.launcher) {
        unsigned char raw[8];
        if (getrandom(raw, sizeof raw, 0) != sizeof raw) return 1;
        for (int i = 0; i < 8; i++) snprintf(job + 2 * i, 3, "%02x", raw[i]);
    }
    pid_t kids[MAX_RANKS];
    int nkids = pl.launcher ? 1 : s->n;
    int64_t t0 = now_ns();
    for (int k = 0; k < nkids; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* A rank of its own process group, as under mlcomm-run: a stopped
             * rank in this program's group would be sent SIGHUP by the kernel
             * if that group were orphaned (the shell that started the test
             * exits), and would die instead of staying stopped. */
            if (!pl.launcher) setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* nothing else ends a stopped rank whose test died */
            setenv("FAULT_SPEC", spec_text, 1);
            setenv("FAULT_DIR", dir, 1);
            setenv("MLC_BACKEND", "shm", 1);
            setenv("MLC_TIMEOUT", tmo_text, 1);
            if (pl.launcher) {
                execl(run, run, "-n", n_text, "--timeout", "60", self, (char *)NULL);
            } else {
                char rk[8];
                snprintf(rk, sizeof rk, "%d", k);
                setenv("MLC_RANK", rk, 1);
                setenv("MLC_WORLD_SIZE", n_text, 1);
                setenv("MLC_JOB_ID", job, 1);
                execl(self, self, (char *)NULL);
            }
            perror("exec");
            _exit(127);
        }
        kids[k] = pid;
    }

    /* Wait for every reporting rank's result, or the deadline. */
    int fails = 0;
    bool expect[MAX_RANKS], have[MAX_RANKS] = {false};
    for (int r = 0; r < s->n; r++) expect[r] = r != s->victim || s->kind == ABORT;
    int64_t deadline = t0 + (int64_t)((tmo + 6) * 1e9);
    for (;;) {
        bool all = true;
        for (int r = 0; r < s->n; r++) {
            char name[16], buf[8];
            snprintf(name, sizeof name, "r%d", r);
            if (expect[r] && !have[r]) have[r] = read_file(dir, name, buf, sizeof buf);
            if (expect[r] && !have[r]) all = false;
        }
        if (all || now_ns() > deadline) break;
        sleep_us(2000);
    }

    /* Ranks that did not report get SIGTERM (they then say which call they
     * were in), then every process must end: the stopped victim is killed; the others
     * (and mlcomm-run) get 10 s to exit by themselves. */
    pid_t pids[MAX_RANKS] = {0};
    for (int r = 0; r < s->n; r++) {
        char name[16], buf[128];
        snprintf(name, sizeof name, "p%d", r);
        if (read_file(dir, name, buf, sizeof buf)) {
            int pid = 0;
            char j[40] = "";
            if (sscanf(buf, "%d %39s", &pid, j) == 2) {
                pids[r] = pid;
                if (!job[0] && strcmp(j, "-") != 0) snprintf(job, sizeof job, "%s", j);
            }
        }
    }
    if (s->kind == STOP && pids[s->victim] > 0) kill(pids[s->victim], SIGKILL);
    bool termed = false;
    for (int r = 0; r < s->n; r++)
        if (expect[r] && !have[r] && pids[r] > 0 && alive(pids[r])) {
            kill(pids[r], SIGTERM);
            termed = true;
        }
    if (termed) sleep_us(500000);
    int64_t exit_by = now_ns() + 10 * 1000000000LL;
    for (int k = 0; k < nkids; k++) {
        int wst;
        bool killed = false;
        while (waitpid(kids[k], &wst, WNOHANG) == 0) {
            if (!killed && now_ns() > exit_by) {
                killed = true;
                printf("  FAIL: %s (pid %d) had not exited 10 s after the results: killed\n",
                       pl.launcher ? "mlcomm-run" : "a rank", (int)kids[k]);
                fails++;
                for (int r = 0; r < s->n; r++)
                    if (pids[r] > 0 && alive(pids[r])) kill(pids[r], SIGKILL);
                kill(kids[k], SIGKILL);
            }
            sleep_us(2000);
        }
    }
    for (int r = 0; r < s->n; r++)
        if (pids[r] > 0 && alive(pids[r])) {
            printf("  FAIL: rank %d (pid %d) outlived mlcomm-run: killed\n", r, (int)pids[r]);
            kill(pids[r], SIGKILL);
            fails++;
        }

    /* Each rank's status. */
    char fbuf[64];
    int64_t tf = read_file(dir, "fault", fbuf, sizeof fbuf) ? atoll(fbuf) : 0;
    const char *want = s->kind == KILL || s->kind == EXIT ? "MLC_ERR_PEER_LOST"
                       : s->kind == STOP                  ? "MLC_ERR_TIMEOUT"
                                                          : "MLC_ERR_ABORTED";
    double worst = -1;
    for (int r = 0; r < s->n; r++) {
        if (!expect[r]) continue;
        char name[16], buf[2304];
        snprintf(name, sizeof name, "r%d", r);
        if (!read_file(dir, name, buf, sizeof buf)) {
            printf("  FAIL: rank %d: no result within MLC_TIMEOUT + 6 s (hung, or ended without reporting)\n", r);
            fails++;
            continue;
        }
        char status[40], where[16];
        long long t;
        int op, vh;
        char *msg = strchr(buf, '\n');
        if (msg) *msg++ = '\0';
        else msg = (char *)"";
        char *nl = strchr(msg, '\n');
        if (nl) *nl = '\0';
        if (sscanf(buf, "%39s %lld %d %d %15s", status, &t, &op, &vh, where) != 5) {
            printf("  FAIL: rank %d: unreadable result '%s'\n", r, buf);
            fails++;
            continue;
        }
        double dt = tf ? (double)(t - tf) / 1e6 : -1;
        const char *opn = op < 0 ? "init" : op >= (int)strlen(s->ops) ? "final barrier" : op_name(s->ops[op]);
        if (strcmp(status, "SIGTERM") == 0)
            printf("  rank %d: no status: %s (%s), MLC_TIMEOUT + 6 s after the start or when mlcomm-run stopped "
                   "the job\n", r, msg, opn);
        else
            printf("  rank %d: %s in %s (%s communicator) %.1f ms after the fault: %s\n", r, status, opn, where, dt,
                   msg);
        if (strncmp(msg, NOT_STICKY, strlen(NOT_STICKY)) == 0) {
            printf("  FAIL: rank %d: %s in %s: the communicator's status did not keep it\n", r, status, opn);
            fails++;
            continue;
        }
        bool ok = strcmp(status, want) == 0;
        /* Without a launcher a rank killed before it registered in the
         * rendezvous is, to its peers, one that never came: nothing tells
         * them it died. Its absence is a timeout naming exactly it. */
        if (!ok && s->kind == KILL && s->at < 0 && !pl.launcher && op < 0 && strcmp(status, "MLC_ERR_TIMEOUT") == 0)
            ok = true;
        /* mlc_iprobe does not wait, so it has no timeout of its own: a loop of
         * them on a stopped peer is the caller's to bound (it is, here). */
        if (!ok && s->kind == STOP && strcmp(status, "MLC_SUCCESS") == 0 && strstr(msg, "iprobe kept returning")) {
            printf("  rank %d: accepted: an iprobe loop is bounded by its caller, not by MLC_TIMEOUT\n", r);
            continue;
        }
        if (!ok) {
            printf("  FAIL: rank %d: %s in %s, expected %s\n", r, status, opn, want);
            fails++;
            continue;
        }
        if (!tf || t < tf) {
            printf("  FAIL: rank %d: %s before the fault happened\n", r, status);
            fails++;
            continue;
        }
        if (dt > worst) worst = dt;
        if (s->kind == ABORT) continue;
        unsigned named = named_ranks(msg, strcmp(where, "half") == 0 ? r / 2 : r), need = vh >= 0 ? 1u << vh : 0;
        char nt[64];
        set_text(named, nt, sizeof nt);
        if (vh < 0) {
            printf("  FAIL: rank %d: %s on a communicator without rank %d\n", r, status, s->victim);
            fails++;
        } else if (named != need) {
            printf("  FAIL: rank %d: the message names rank(s) %s; it must name exactly rank %d (the %s one%s)\n", r,
                   nt, vh, s->kind == KILL ? "killed" : s->kind == EXIT ? "departed" : "stopped",
                   strcmp(where, "half") == 0 ? ", in the half" : "");
            fails++;
        }
    }
    if (worst >= 0 && lat[s->kind].n < 4096) lat[s->kind].v[lat[s->kind].n++] = worst;

    /* Nothing of the job in /dev/shm. */
    if (!job[0]) {
        printf("  FAIL: no rank recorded the job id: /dev/shm cannot be checked\n");
        fails++;
    } else {
        DIR *d = opendir("/dev/shm");
        for (struct dirent *e; d && (e = readdir(d)) != NULL;)
            if (strstr(e->d_name, job)) {
                printf("  FAIL: left in /dev/shm: %s\n", e->d_name);
                fails++;
                char path[512];
                snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
                unlink(path);
            }
        if (d) closedir(d);
    }
    printf("  %s (%.2f s)\n", fails ? "TRIAL FAILED" : "ok", (double)(now_ns() - t0) / 1e9);

    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0')))
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    return fails;
}

/* The parser above on the message forms it must read. */
static int check_names(void)
{
    static const struct {
        const char *msg;
        int self;
        unsigned want;
    } cases[] = {
        {"barrier #3 (0 bytes, algorithm direct): rank 1: peer rank 0 is gone (killed by signal 9 (Killed))", 1, 1u},
        {"shm init: rank 2 is gone (process 12 exited)", 0, 4u},
        {"shm init: rank 2 is gone (process 12 was killed by signal 9 (Killed))", 0, 4u},
        {"barrier #0 (0 bytes): rank 0: peer rank 1 is gone (process 77 exited with code 3)", 0, 2u},
        {"rank 0: allgather #4 (256 bytes) made no progress for 2 s (MLC_TIMEOUT); ranks not heard from: 0, 1", 0,
         3u},
        {"recv (peer 1, tag 104, 256 bytes): rank 0: recv made no progress; ranks not heard from: 1", 0, 2u},
        {"rank 0: probe (source 2, tag 104) saw no message for 5 s (MLC_TIMEOUT)", 0, 4u},
        {"rank 3: ranks 1 and 2 are gone", 3, 6u},
        {"rank 1: the communicator was aborted by another rank (mlc_comm_abort)", 1, 0u},
        {"allreduce #0 (256 bytes, algorithm direct): rank 0: peer rank 1 is gone (process 9 was killed by signal 9 "
         "(Killed)) (ranks of a communicator made by mlc_comm_split; its ranks 0..1 are world ranks 0, 2)", 0, 2u},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned got = named_ranks(cases[i].msg, cases[i].self);
        if (got != cases[i].want) {
            printf("FAIL: \"%s\" (self %d): read 0x%x, want 0x%x\n", cases[i].msg, cases[i].self, got,
                   cases[i].want);
            bad++;
        }
    }
    printf("%s\n", bad ? "FAIL" : "PASS");
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--check-names") == 0) return check_names();
    const char *spec = getenv("FAULT_SPEC");
    if (spec) return rank_main(spec);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: %s MLCOMM_RUN\n", argv[0]);
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = '\0';
    const char *e = getenv("FAULT_PLAN"), *one = getenv("FAULT_TRIAL"), *b = getenv("FAULT_BUDGET");
    uint64_t plan_no = e ? strtoull(e, NULL, 10) : 1;
    double budget = b ? atof(b) : 50;
    const char *ks = getenv("FAULT_KINDS");
    if (ks && ks[0]) {
        nkinds = 0;
        for (int k = 0; k < KINDS; k++)
            if (strstr(ks, kind_name[k])) kinds[nkinds++] = k;
        if (!nkinds) {
            fprintf(stderr, "FAULT_KINDS='%s' names none of kill, stop, abort, exit\n", ks);
            return 2;
        }
    }
    printf("fault plan %llu%s%s (replay all: FAULT_PLAN=%llu; one trial: FAULT_PLAN=%llu FAULT_TRIAL=i)\n",
           (unsigned long long)plan_no, ks && ks[0] ? ", FAULT_KINDS=" : "", ks && ks[0] ? ks : "",
           (unsigned long long)plan_no, (unsigned long long)plan_no);
    int64_t start = now_ns();
    int trials = 0, failed = 0, failed_by[KINDS][2] = {{0}}, run_by[KINDS][2] = {{0}};
    for (int t = one ? atoi(one) : 0;; t++) {
        plan_t pl = make_plan(plan_no, t);
        int f = run_trial(self, argv[1], plan_no, t);
        trials++;
        run_by[pl.s.kind][pl.launcher]++;
        if (f) {
            failed++;
            failed_by[pl.s.kind][pl.launcher]++;
        }
        if (one || (t >= 2 * nkinds - 1 && (double)(now_ns() - start) / 1e9 >= budget)) break;
    }
    printf("\n%d trials, %d failed (plan %llu)\n", trials, failed, (unsigned long long)plan_no);
    for (int k = 0; k < KINDS; k++)
        for (int l = 1; l >= 0; l--)
            printf("  %-5s %-12s %3d trials, %3d failed\n", kind_name[k], l ? "mlcomm-run" : "no launcher",
                   run_by[k][l], failed_by[k][l]);
    static const char *const what[] = {"kill to MLC_ERR_PEER_LOST", "stop to MLC_ERR_TIMEOUT",
                                       "abort to MLC_ERR_ABORTED", "exit to MLC_ERR_PEER_LOST"};
    for (int k = 0; k < KINDS; k++) {
        if (!lat[k].n) continue;
        qsort(lat[k].v, (size_t)lat[k].n, sizeof(double), cmp_double);
        printf("  %s (slowest survivor of each trial): median %.1f ms, max %.1f ms over %d trials\n", what[k],
               lat[k].v[lat[k].n / 2], lat[k].v[lat[k].n - 1], lat[k].n);
    }
    printf("%s\n", failed ? "FAIL" : "PASS");
    return failed ? 1 : 0;
}
