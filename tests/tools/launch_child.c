/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rank program for the mlcomm-run tests (no library needed):
 *
 *   launch_child DIR env               check the rank variables, write DIR/rank.<r> = job id
 *   launch_child DIR argv A B ...      check argv[3..] == "x y", "-n", "--"
 *   launch_child DIR exit R CODE       rank R exits CODE, the others sleep
 *   launch_child DIR kill R SIG        rank R raises SIG, the others sleep
 *   launch_child DIR sleep S           sleep S seconds
 *   launch_child DIR follow R          rank R waits for DIR/go, then SIGKILLs itself; the
 *                                      others exit 1 as soon as it is dead (pidfd)
 *   launch_child DIR orphan R          rank R starts a child that sleeps (its pid in
 *                                      DIR/orphan.<r>) and exits 3; the others sleep
 *   launch_child DIR watch R exit|signal N
 *                                      rank R ends so; the others wait for the job state
 *                                      to flag it and write DIR/watch.<r> = "ok" or why not
 *   launch_child DIR shm R SIG         every rank creates /dev/shm/mlc-<job>-test-<r> and
 *                                      writes DIR/seg.<r> = job id; once all exist rank R
 *                                      raises SIG (SIG 0: every rank exits 0), the others sleep
 *
 * Every rank first writes its pid to DIR/pid.<r> (a file that appears complete).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "base/jobstate.h"

static const char *dir;
static int rank = -1;

static void write_file(const char *name, const char *text)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "launch_child: cannot write %s: %s\n", path, strerror(errno));
        exit(90);
    }
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    char *end;
    if (!v) {
        fprintf(stderr, "launch_child: %s is not set\n", name);
        exit(91);
    }
    long x = strtol(v, &end, 10);
    if (end == v || *end) {
        fprintf(stderr, "launch_child: %s='%s' is not a number\n", name, v);
        exit(91);
    }
    return (int)x;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static const mlc_jobstate_t *map_job(void)
{
    int fd = env_int("MLC_JOB_FD");
    void *p = mmap(NULL, sizeof(mlc_jobstate_t), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "launch_child: cannot map MLC_JOB_FD=%d: %s\n", fd, strerror(errno));
        exit(92);
    }
    return p;
}

static int check_env(void)
{
    int size = env_int("MLC_WORLD_SIZE");
    const char *id = getenv("MLC_JOB_ID");
    char why[256] = "";
    if (rank < 0 || rank >= size)
        snprintf(why, sizeof why, "MLC_RANK %d outside 0..%d", rank, size - 1);
    else if (env_int("MLC_LOCAL_RANK") != rank)
        snprintf(why, sizeof why, "MLC_LOCAL_RANK %d != MLC_RANK %d", env_int("MLC_LOCAL_RANK"),
                 rank);
    else if (env_int("MLC_LOCAL_SIZE") != size)
        snprintf(why, sizeof why, "MLC_LOCAL_SIZE %d != MLC_WORLD_SIZE %d",
                 env_int("MLC_LOCAL_SIZE"), size);
    else if (env_int("RANK") != rank || env_int("WORLD_SIZE") != size || env_int("LOCAL_RANK") != rank ||
             env_int("LOCAL_WORLD_SIZE") != size)
        snprintf(why, sizeof why, "torch's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE %d/%d/%d/%d, want %d/%d/%d/%d",
                 env_int("RANK"), env_int("WORLD_SIZE"), env_int("LOCAL_RANK"), env_int("LOCAL_WORLD_SIZE"), rank,
                 size, rank, size);
    else if (!getenv("MASTER_ADDR") || strcmp(getenv("MASTER_ADDR"), "127.0.0.1") != 0 ||
             env_int("MASTER_PORT") <= 0 || env_int("MASTER_PORT") > 65535)
        snprintf(why, sizeof why, "MASTER_ADDR '%s' MASTER_PORT '%s', want 127.0.0.1 and a port",
                 getenv("MASTER_ADDR") ? getenv("MASTER_ADDR") : "(unset)",
                 getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "(unset)");
    else if (!id || strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16)
        snprintf(why, sizeof why, "MLC_JOB_ID '%s' is not 16 hex digits", id ? id : "(unset)");
    if (!why[0]) {
        const mlc_jobstate_t *js = map_job();
        if (js->magic != MLC_JOBSTATE_MAGIC || js->nranks != (uint32_t)size)
            snprintf(why, sizeof why, "job state magic %#x nranks %u, want %#x and %d", js->magic,
                     js->nranks, MLC_JOBSTATE_MAGIC, size);
        else if (atomic_load(&js->pid[rank]) != (int)getpid())
            snprintf(why, sizeof why, "job state pid[%d] = %d, mine is %d", rank,
                     atomic_load(&js->pid[rank]), (int)getpid());
        else if (atomic_load(&js->ndead) != 0 || atomic_load(&js->dead[rank]) != 0)
            snprintf(why, sizeof why, "job state shows deaths in a healthy job");
        else if (fcntl(env_int("MLC_JOB_FD"), F_GETFD) & FD_CLOEXEC)
            snprintf(why, sizeof why, "MLC_JOB_FD is close-on-exec in the rank");
    }
    if (why[0]) {
        fprintf(stderr, "launch_child rank %d: %s\n", rank, why);
        return 3;
    }
    char name[32], text[32];
    snprintf(name, sizeof name, "rank.%d", rank);
    snprintf(text, sizeof text, "%s\n", id);
    write_file(name, text);
    return 0;
}

static int check_argv(int argc, char **argv)
{
    const char *want[] = {"x y", "-n", "--"};
    int n = (int)(sizeof want / sizeof want[0]);
    if (argc != 3 + n) {
        fprintf(stderr, "launch_child: got %d arguments, want %d\n", argc - 3, n);
        return 3;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(argv[3 + i], want[i]) != 0) {
            fprintf(stderr, "launch_child: argument %d is '%s', want '%s'\n", i, argv[3 + i],
                    want[i]);
            return 3;
        }
    }
    return 0;
}

/* Wait (<= 20 s) until the launcher flags rank `who`, then check the flag. */
static int watch(int who, unsigned want)
{
    const mlc_jobstate_t *js = map_job();
    char why[256] = "ok";
    double waited = 0;
    while (atomic_load_explicit(&js->epoch, memory_order_acquire) == 0 && waited < 20) {
        sleep_s(0.01);
        waited += 0.01;
    }
    unsigned got = atomic_load_explicit(&js->dead[who], memory_order_acquire);
    if (atomic_load(&js->epoch) == 0)
        snprintf(why, sizeof why, "the job state never changed");
    else if (got != want)
        snprintf(why, sizeof why, "dead[%d] = %#x, want %#x", who, got, want);
    else if (atomic_load(&js->ndead) != 1)
        snprintf(why, sizeof why, "ndead = %u, want 1", atomic_load(&js->ndead));
    else if (atomic_load(&js->dead[rank]) != 0)
        snprintf(why, sizeof why, "my own dead flag is set");
    char name[32];
    snprintf(name, sizeof name, "watch.%d", rank);
    write_file(name, why);
    return 0;
}

/* Exit 1 as soon as rank `who` is dead, seen directly (pidfd), not through
 * the launcher: the way a peer notices a death on its own. */
static int follow(int who)
{
    const mlc_jobstate_t *js = map_job();
    int pid = 0;
    for (int i = 0; i < 2000 && (pid = atomic_load(&js->pid[who])) == 0; i++) sleep_s(0.01);
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        fprintf(stderr, "launch_child: pidfd_open(%d): %s\n", pid, strerror(errno));
        return 94;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    poll(&p, 1, 20000);
    return 1;
}

static void end_as(const char *how, int n)
{
    if (strcmp(how, "signal") == 0) {
        signal(n, SIG_DFL);
        raise(n);
    }
    exit(n);
}

/* Wait (<= 20 s) until DIR/<prefix>.<r> exists for every rank r < n. */
static void wait_for_files(const char *prefix, int n)
{
    for (int r = 0; r < n; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.%d", dir, prefix, r);
        for (int i = 0; i < 2000 && access(path, F_OK) != 0; i++) sleep_s(0.01);
    }
}

static int make_segment(void)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s-test-%d", MLC_SHM_PREFIX, getenv("MLC_JOB_ID"), rank);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        fprintf(stderr, "launch_child: shm_open(%s): %s\n", name, strerror(errno));
        return 93;
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: launch_child DIR MODE ARGS...\n");
        return 2;
    }
    dir = argv[1];
    const char *mode = argv[2];
    rank = env_int("MLC_RANK");
    char name[32], text[32];
    snprintf(name, sizeof name, "pid.%d", rank);
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    write_file(name, text);

    if (strcmp(mode, "env") == 0) return check_env();
    if (strcmp(mode, "argv") == 0) return check_argv(argc, argv);
    if (strcmp(mode, "sleep") == 0 && argc == 4) {
        sleep_s(atof(argv[3]));
        return 0;
    }
    if ((strcmp(mode, "exit") == 0 || strcmp(mode, "kill") == 0) && argc == 5) {
        if (rank == atoi(argv[3])) end_as(mode[0] == 'k' ? "signal" : "exit", atoi(argv[4]));
        sleep_s(60);
        return 0;
    }
    if (strcmp(mode, "follow") == 0 && argc == 4) {
        int who = atoi(argv[3]);
        if (rank == who) {
            char go[512];
            snprintf(go, sizeof go, "%s/go", dir);
            for (int i = 0; i < 2000 && access(go, F_OK) != 0; i++) sleep_s(0.01);
            end_as("signal", SIGKILL);
        }
        return follow(who);
    }
    if (strcmp(mode, "orphan") == 0 && argc == 4) {
        if (rank == atoi(argv[3])) {
            pid_t child = fork();
            if (child == 0) {
                sleep_s(60);
                _exit(0);
            }
            snprintf(name, sizeof name, "orphan.%d", rank);
            snprintf(text, sizeof text, "%d\n", (int)child);
            write_file(name, text);
            return 3;
        }
        sleep_s(60);
        return 0;
    }
    if (strcmp(mode, "watch") == 0 && argc == 6) {
        int who = atoi(argv[3]), n = atoi(argv[5]);
        if (rank == who) end_as(argv[4], n);
        unsigned want = (strcmp(argv[4], "signal") == 0 ? MLC_JOB_DEAD_SIGNAL : MLC_JOB_DEAD_EXIT) |
                        (unsigned)n;
        return watch(who, want);
    }
    if (strcmp(mode, "shm") == 0 && argc == 5) {
        int rc = make_segment();
        if (rc) return rc;
        snprintf(name, sizeof name, "seg.%d", rank);
        snprintf(text, sizeof text, "%s\n", getenv("MLC_JOB_ID"));
        write_file(name, text);
        int who = atoi(argv[3]), sig = atoi(argv[4]);
        if (sig == 0) return 0;
        if (rank == who) {
            /* Every peer creates its segment first: one stopped by the
             * launcher before shm_open would leave nothing to sweep. */
            wait_for_files("seg", env_int("MLC_WORLD_SIZE"));
            end_as("signal", sig);
        }
        sleep_s(60);
        return 0;
    }
    fprintf(stderr, "launch_child: bad mode or arguments: %s\n", mode);
    return 2;
}
