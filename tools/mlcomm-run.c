/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-run: start N local ranks of a program and supervise them.
 *
 *   mlcomm-run -n N [--timeout S] [--tag-output | -l] [--output-dir DIR] [--] PROGRAM [ARGS...]
 *
 * Each rank gets MLC_RANK, MLC_WORLD_SIZE, MLC_LOCAL_RANK, MLC_LOCAL_SIZE,
 * a shared random MLC_JOB_ID and MLC_JOB_FD (the job state memfd of
 * src/base/jobstate.h), and torch's variables for env:// (run_spawn.c). When a rank ends abnormally the launcher flags it
 * dead for its peers at once, gives the others a short grace to notice and
 * exit, then stops them (SIGTERM, then SIGKILL) and exits non-zero, naming
 * the rank and how it ended. Whatever happens, /dev/shm entries of the job
 * are removed at the end.
 *
 * The rank named as the cause is the one that died first: a rank killed by a
 * signal it was not sent by the launcher before one that exited non-zero (most
 * often a peer giving up), and a rank whose main thread had already ended
 * before ranks that exited after it (see take_dying).
 *
 * Exit status: 0 when every rank exits 0; else the first failing rank's exit
 * code (128+N for a signal); 124 when --timeout expired; 126/127 when the
 * program cannot be executed; 2 for a usage error; 1 if the launcher itself
 * fails (memfd, fork).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_job.h"
#include "run_output.h"
#include "run_spawn.h"
#include "tool_version.h"

#define PROG "mlcomm-run"
#define EXIT_USAGE 2
#define EXIT_LAUNCHER 1
#define EXIT_TIMEOUT 124
/* How long peers get to notice a death and exit on their own, and how long
 * SIGTERM gets before SIGKILL. */
#define GRACE_S 1.0
#define TERM_TO_KILL_S 1.0

/* Signals the launcher passes on to every rank. */
#define FORWARDED_SIGNALS(X) X(SIGINT) X(SIGTERM) X(SIGHUP)

typedef enum stop_reason {
    STOP_NONE,
    STOP_PEER_FAILED, /* a rank ended abnormally */
    STOP_TIMEOUT,     /* --timeout expired */
    STOP_FORWARDED,   /* the launcher received a signal and passed it on */
    STOP_START_FAILED /* a rank could not be started */
} stop_reason_t;

typedef struct rank_state {
    pid_t pid;
    bool running;
    int wait_status;
    stop_reason_t signalled_for; /* why the launcher signalled it, STOP_NONE if never */
} rank_state_t;

typedef struct launcher {
    int nranks;
    double timeout_s; /* 0 = none */
    char **argv;      /* PROGRAM ARGS... */
    bool tag_output;  /* --tag-output / -l */
    const char *output_dir; /* --output-dir, NULL if none */
    mlc_run_output_t out;
    mlc_run_job_t job;
    rank_state_t *ranks;
    struct ended {
        int rank, wait_status;
    } *ended; /* scratch of reap(): one per rank */
    int nrunning;
    int sigfd;
    sigset_t child_mask;
    int first_failed;       /* rank whose end caused the failure, -1 if none */
    bool timed_out;
    int forwarded_signal;   /* last signal passed on, 0 if none */
    double deadline;        /* job timeout, 0 if none */
    double term_at, kill_at; /* scheduled SIGTERM / SIGKILL of the rest, 0 if none */
    stop_reason_t stop;
} launcher_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " -n N [options] [--] PROGRAM [ARGS...]\n"
            "\n"
            "Start N ranks of PROGRAM on this host and supervise them.\n"
            "\n"
            "  -n N, -np N, -nN number of ranks (1..%d)\n"
            "  --timeout S      stop the whole job after S seconds and exit 124\n"
            "  --tag-output, -l prefix every line a rank writes (stdout and stderr) with\n"
            "                   \"[RANK] \"; lines of different ranks never mix\n"
            "  --output-dir DIR write rank N's stdout and stderr to DIR/rank.N.out and\n"
            "                   DIR/rank.N.err (DIR is created; lines are not tagged)\n"
            "  -h, --help       this text\n"
            "  --version        the version and the backends compiled in\n"
            "  --               end of options\n"
            "\n"
            "Every rank gets MLC_RANK, MLC_WORLD_SIZE, MLC_LOCAL_RANK, MLC_LOCAL_SIZE,\n"
            "MLC_JOB_ID (shared, random) and MLC_JOB_FD (the job state: peer-death flags),\n"
            "and torch's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and\n"
            "MASTER_PORT (a free local port; a MASTER_ADDR/MASTER_PORT already set is kept),\n"
            "so that init_process_group's env:// works as under torchrun.\n"
            "SIGINT, SIGTERM and SIGHUP are passed on to every rank, with a SIGCONT for a\n"
            "stopped one (a second signal kills them). When a rank exits non-zero or dies\n"
            "by a signal, its peers are told at once, the others are stopped after a %.0f s\n"
            "grace, and " PROG " exits with that rank's exit code (128+N for signal N).\n"
            "/dev/shm entries of the job (mlc-<job id>-*) are removed at the end, however\n"
            "it ends.\n",
            MLC_JOBSTATE_MAX_RANKS, GRACE_S);
}

static bool parse_ranks(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < 1 || v > MLC_JOBSTATE_MAX_RANKS) return false;
    *out = (int)v;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v > 0) || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Returns 0 to run, 1 after printing help, -1 on a usage error (message printed). */
static int parse_args(int argc, char **argv, launcher_t *L)
{
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            mlc_tool_print_version(PROG);
            return 1;
        }
        if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, PROG ": %s needs a value\n", a);
                return -1;
            }
            val = argv[++i];
        } else if (strncmp(a, "-n", 2) == 0 && a[2] != '\0' && a[2] != '-') {
            val = a + 2;
        }
        if (val) {
            if (!parse_ranks(val, &L->nranks)) {
                fprintf(stderr, PROG ": -n: '%s' is not a rank count in 1..%d\n", val,
                        MLC_JOBSTATE_MAX_RANKS);
                return -1;
            }
            continue;
        }
        if (strcmp(a, "--tag-output") == 0 || strcmp(a, "-l") == 0) {
            L->tag_output = true;
            continue;
        }
        if (strcmp(a, "--output-dir") == 0 || strncmp(a, "--output-dir=", 13) == 0) {
            if (a[12] == '=') {
                L->output_dir = a + 13;
            } else if (i + 1 < argc) {
                L->output_dir = argv[++i];
            } else {
                fprintf(stderr, PROG ": --output-dir needs a directory\n");
                return -1;
            }
            if (L->output_dir[0] == '\0') {
                fprintf(stderr, PROG ": --output-dir: the directory name is empty\n");
                return -1;
            }
            continue;
        }
        if (strcmp(a, "--timeout") == 0 || strncmp(a, "--timeout=", 10) == 0) {
            if (a[9] == '=') {
                val = a + 10;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                fprintf(stderr, PROG ": --timeout needs a value\n");
                return -1;
            }
            if (!parse_seconds(val, &L->timeout_s)) {
                fprintf(stderr, PROG ": --timeout: '%s' is not a positive number of seconds\n",
                        val);
                return -1;
            }
            continue;
        }
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, PROG ": unknown option '%s' (see " PROG " --help)\n", a);
            return -1;
        }
        break;
    }
    if (L->nranks < 1) {
        fprintf(stderr, PROG ": the number of ranks is missing: -n N (see " PROG " --help)\n");
        return -1;
    }
    if (i >= argc) {
        fprintf(stderr, PROG ": no program to run (see " PROG " --help)\n");
        return -1;
    }
    L->argv = argv + i;
    return 0;
}

/* "rank 2 (pid 1234) killed by signal 9 (Killed)" plus why, when the launcher sent it. */
static void describe_end(const launcher_t *L, int r, char *buf, size_t len)
{
    const rank_state_t *s = &L->ranks[r];
    int st = s->wait_status;
    int n;
    if (WIFSIGNALED(st))
        n = snprintf(buf, len, "rank %d (pid %d) killed by signal %d (%s)%s", r, (int)s->pid,
                     WTERMSIG(st), strsignal(WTERMSIG(st)), WCOREDUMP(st) ? ", core dumped" : "");
    else
        n = snprintf(buf, len, "rank %d (pid %d) exited with code %d", r, (int)s->pid,
                     WEXITSTATUS(st));
    if (n < 0 || (size_t)n >= len) return;
    buf += n;
    len -= (size_t)n;
    switch (s->signalled_for) {
    case STOP_PEER_FAILED:
        snprintf(buf, len, " (stopped by " PROG " after rank %d failed)", L->first_failed);
        break;
    case STOP_TIMEOUT:
        snprintf(buf, len, " (stopped by " PROG ": the job timed out)");
        break;
    case STOP_FORWARDED:
        snprintf(buf, len, " (after " PROG " passed on signal %d (%s))", L->forwarded_signal,
                 strsignal(L->forwarded_signal));
        break;
    case STOP_START_FAILED:
        snprintf(buf, len, " (stopped by " PROG ": another rank could not start)");
        break;
    case STOP_NONE:
        break;
    }
}

static int exit_code_of(int wait_status)
{
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return WEXITSTATUS(wait_status);
}

/* Signal every running rank's process group (the rank and anything it
 * started). Then SIGCONT: a stopped rank (a debugger's, or one that stopped
 * itself) acts on a signal only once it runs again, and the job would wait
 * for it for ever. */
static void signal_ranks(launcher_t *L, int sig, stop_reason_t why)
{
    for (int r = 0; r < L->nranks; r++) {
        rank_state_t *s = &L->ranks[r];
        if (!s->running) continue;
        if (killpg(s->pid, sig) != 0) kill(s->pid, sig);
        if (sig != SIGKILL && killpg(s->pid, SIGCONT) != 0) kill(s->pid, SIGCONT);
        if (s->signalled_for == STOP_NONE) s->signalled_for = why;
    }
}

/* Schedule the stop of the ranks still running: SIGTERM after `delay`,
 * SIGKILL TERM_TO_KILL_S later. The first reason wins. */
static void begin_stop(launcher_t *L, stop_reason_t why, double delay)
{
    if (L->stop != STOP_NONE) return;
    L->stop = why;
    L->term_at = now_s() + delay;
    L->kill_at = L->term_at + TERM_TO_KILL_S;
}

/* Rank r has been reaped (reap() already counted it out). */
static void on_rank_end(launcher_t *L, int r, int wait_status)
{
    rank_state_t *s = &L->ranks[r];
    s->wait_status = wait_status;
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) return;
    mlc_run_job_mark_dead(&L->job, r, wait_status);
    bool cause = L->first_failed < 0 && !L->timed_out && s->signalled_for != STOP_PEER_FAILED &&
                 s->signalled_for != STOP_START_FAILED;
    if (cause) L->first_failed = r;
    char what[256];
    describe_end(L, r, what, sizeof what);
    fprintf(stderr, PROG ": %s\n", what);
    if (cause && L->nrunning > 0) {
        fprintf(stderr, PROG ": stopping the other ranks in %.0f s unless they exit\n", GRACE_S);
        begin_stop(L, STOP_PEER_FAILED, GRACE_S);
    }
}

/* Did rank r die by a signal the launcher did not send? */
static bool killed_on_its_own(const launcher_t *L, int r, int wait_status)
{
    return WIFSIGNALED(wait_status) && L->ranks[r].signalled_for == STOP_NONE;
}

/* Has pid's main thread ended (zombie or dead) while the process may still be
 * tearing down? Peers that watch pids see a rank dead from that moment on,
 * but waitpid returns it only once its last thread is gone. */
static bool main_thread_ended(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Move rank r from running to the reaped batch. */
static void take(launcher_t *L, int *n, int r, int wait_status)
{
    L->ranks[r].running = false;
    L->nrunning--;
    L->ended[*n].rank = r;
    L->ended[*n].wait_status = wait_status;
    (*n)++;
}

/*
 * A rank failed and no cause is known yet: ranks whose main thread has
 * already ended died before it (a peer that exits because another rank died
 * saw that rank's main thread gone), even if their process is not reapable
 * yet (other threads still exiting, memory still being torn down). Wait for
 * them (at most DYING_WAIT_S) and put them first in the batch, so that the
 * rank that died first is the cause, not the survivors that followed it.
 */
#define DYING_WAIT_S 2.0
static void take_dying(launcher_t *L, int *n)
{
    int first_new = *n;
    for (int r = 0; r < L->nranks; r++) {
        if (!L->ranks[r].running || !main_thread_ended(L->ranks[r].pid)) continue;
        double until = now_s() + DYING_WAIT_S;
        for (;;) {
            int st;
            pid_t got = waitpid(L->ranks[r].pid, &st, WNOHANG);
            if (got == L->ranks[r].pid) {
                take(L, n, r, st);
                break;
            }
            if (got < 0 && errno != EINTR) break;
            if (now_s() > until) break; /* a live process whose main thread exited */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (*n == first_new) return;
    /* Rotate the dying ranks to the front of the batch. */
    struct ended *e = L->ended;
    for (int k = first_new; k < *n; k++) {
        struct ended x = e[k];
        for (int j = k; j > k - first_new; j--) e[j] = e[j - 1];
        e[k - first_new] = x;
    }
}

static bool failed_status(int wait_status) { return !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0; }

/*
 * Reap every rank that has ended. waitpid returns them in rank order, not in
 * the order they died, so when several ended before the launcher woke, a
 * rank killed by a signal is taken as the cause before ranks that exited
 * non-zero: those are most often peers that saw it die and gave up. Ranks
 * already dying but not yet reapable join the batch first (take_dying).
 */
static void reap(launcher_t *L)
{
    int n = 0;
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid <= 0) break; /* none ready, or no children left */
        for (int r = 0; r < L->nranks; r++) {
            if (L->ranks[r].running && L->ranks[r].pid == pid) {
                take(L, &n, r, st);
                break;
            }
        }
    }
    bool failure = false;
    for (int k = 0; k < n; k++) failure = failure || failed_status(L->ended[k].wait_status);
    if (failure && L->first_failed < 0 && !L->timed_out && L->nrunning > 0) take_dying(L, &n);
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++)
            if (killed_on_its_own(L, L->ended[k].rank, L->ended[k].wait_status) == (pass == 0))
                on_rank_end(L, L->ended[k].rank, L->ended[k].wait_status);
}

static void list_running(const launcher_t *L, char *buf, size_t len)
{
    size_t used = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < L->nranks && used < len; r++) {
        if (!L->ranks[r].running) continue;
        if (shown == 16) {
            snprintf(buf + used, len - used, ", ...");
            return;
        }
        int n = snprintf(buf + used, len - used, "%s%d", shown ? ", " : "", r);
        if (n < 0) return;
        used += (size_t)n;
        shown++;
    }
}

static void on_signal(launcher_t *L, int sig)
{
    if (sig == SIGCHLD) {
        reap(L);
        return;
    }
    if (L->forwarded_signal != 0) {
        fprintf(stderr, PROG ": got signal %d (%s) again: killing every rank\n", sig,
                strsignal(sig));
        signal_ranks(L, SIGKILL, STOP_FORWARDED);
        return;
    }
    L->forwarded_signal = sig;
    fprintf(stderr, PROG ": passing signal %d (%s) on to every rank\n", sig, strsignal(sig));
    signal_ranks(L, sig, STOP_FORWARDED);
}

static void on_deadlines(launcher_t *L)
{
    double t = now_s();
    if (L->deadline > 0 && t >= L->deadline && L->stop == STOP_NONE) {
        char ranks[256];
        list_running(L, ranks, sizeof ranks);
        fprintf(stderr, PROG ": job timed out after %g s (--timeout); stopping rank(s) %s\n",
                L->timeout_s, ranks);
        L->timed_out = true;
        begin_stop(L, STOP_TIMEOUT, 0);
    }
    if (L->term_at > 0 && t >= L->term_at) {
        L->term_at = 0;
        signal_ranks(L, SIGTERM, L->stop);
    }
    if (L->kill_at > 0 && t >= L->kill_at) {
        L->kill_at = 0;
        signal_ranks(L, SIGKILL, L->stop);
    }
}

/* Milliseconds until the next scheduled action, -1 if none. */
static int next_wait_ms(const launcher_t *L)
{
    double next = 0;
    const double when[3] = {L->stop == STOP_NONE ? L->deadline : 0, L->term_at, L->kill_at};
    for (int i = 0; i < 3; i++)
        if (when[i] > 0 && (next == 0 || when[i] < next)) next = when[i];
    if (next == 0) return -1;
    double ms = ceil((next - now_s()) * 1e3);
    return ms < 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms;
}

static int supervise(launcher_t *L, struct pollfd *pfd)
{
    while (L->nrunning > 0) {
        pfd[0] = (struct pollfd){.fd = L->sigfd, .events = POLLIN};
        int npipes = mlc_run_output_pollfds(&L->out, pfd + 1, 2 * L->nranks);
        int n = poll(pfd, (nfds_t)(1 + npipes), next_wait_ms(L));
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, PROG ": poll failed: %s; killing every rank\n", strerror(errno));
            signal_ranks(L, SIGKILL, STOP_START_FAILED);
            return -1;
        }
        if (n > 0) {
            mlc_run_output_forward(&L->out, pfd + 1, npipes);
            if (pfd[0].revents) {
                struct signalfd_siginfo si;
                while (read(L->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
                    on_signal(L, (int)si.ssi_signo);
            }
        }
        on_deadlines(L);
    }
    return 0;
}

/* Start every rank. On failure the started ones are killed and reaped. */
/* A TCP port free on this host now (0 if none could be had), for torch's
 * env:// store: rank 0's TCPStore listens there. */
static int free_local_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int start_ranks(launcher_t *L)
{
    int master_port = free_local_port();
    for (int r = 0; r < L->nranks; r++) {
        int child_fd[2];
        char err[512];
        if (mlc_run_output_open(&L->out, r, child_fd, err, sizeof err) != 0) {
            fprintf(stderr, PROG ": cannot start rank %d: %s\n", r, err);
            signal_ranks(L, SIGKILL, STOP_START_FAILED);
            for (int k = 0; k < r; k++) {
                while (waitpid(L->ranks[k].pid, NULL, 0) < 0 && errno == EINTR) {
                }
                L->ranks[k].running = false;
            }
            L->nrunning = 0;
            return EXIT_LAUNCHER;
        }
        mlc_run_rank_env_t env = {r,          L->nranks,  L->job.id, L->job.fd, &L->job.state->pid[r],
                                  child_fd[0], child_fd[1], master_port};
        pid_t pid;
        int exec_errno = 0;
        int rc = mlc_run_spawn(&env, L->argv, &L->child_mask, &pid, &exec_errno);
        mlc_run_output_spawned(child_fd);
        if (rc == 0) {
            L->ranks[r].pid = pid;
            L->ranks[r].running = true;
            L->nrunning++;
            continue;
        }
        int code;
        if (rc == -1) {
            fprintf(stderr, PROG ": cannot start rank %d: fork failed: %s\n", r, strerror(errno));
            code = EXIT_LAUNCHER;
        } else {
            /* As execvp: a name without '/' is looked up on PATH only. */
            bool here = exec_errno == ENOENT && !strchr(L->argv[0], '/') && access(L->argv[0], X_OK) == 0;
            fprintf(stderr, PROG ": cannot start rank %d: %s: %s%s%s\n", r, L->argv[0], strerror(exec_errno),
                    here ? " on PATH; for the one in this folder, say ./" : "", here ? L->argv[0] : "");
            code = exec_errno == ENOENT ? 127 : 126;
        }
        signal_ranks(L, SIGKILL, STOP_START_FAILED);
        for (int k = 0; k < r; k++) {
            while (waitpid(L->ranks[k].pid, NULL, 0) < 0 && errno == EINTR) {
            }
            L->ranks[k].running = false;
        }
        L->nrunning = 0;
        return code;
    }
    return 0;
}

static int setup_signals(launcher_t *L)
{
    sigset_t handled;
    sigemptyset(&handled);
    sigaddset(&handled, SIGCHLD);
#define MLC_X_ADD(sig) sigaddset(&handled, sig);
    FORWARDED_SIGNALS(MLC_X_ADD)
#undef MLC_X_ADD
    /* Blocked before the first fork, so no SIGCHLD is missed. SIGPIPE is
     * blocked too (not handled): forwarding tagged output to a reader that
     * went away fails with EPIPE instead of killing the launcher. The ranks
     * run with the mask the launcher started with. */
    sigset_t blocked = handled;
    sigaddset(&blocked, SIGPIPE);
    if (sigprocmask(SIG_BLOCK, &blocked, &L->child_mask) != 0) return -1;
    L->sigfd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
    return L->sigfd < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    launcher_t L = {.first_failed = -1, .sigfd = -1, .job = {.fd = -1}};
    int prc = parse_args(argc, argv, &L);
    if (prc != 0) return prc > 0 ? 0 : EXIT_USAGE;

    char err[256];
    int code = EXIT_LAUNCHER;
    if (setup_signals(&L) != 0) {
        fprintf(stderr, PROG ": cannot set up signal handling: %s\n", strerror(errno));
        goto out;
    }
    if (mlc_run_job_create(L.nranks, &L.job, err, sizeof err) != 0) {
        fprintf(stderr, PROG ": cannot create the job state: %s\n", err);
        goto out;
    }
    L.ranks = calloc((size_t)L.nranks, sizeof *L.ranks);
    L.ended = calloc((size_t)L.nranks, sizeof *L.ended);
    if (!L.ranks || !L.ended) {
        fprintf(stderr, PROG ": out of memory for %d ranks\n", L.nranks);
        goto out;
    }
    if (mlc_run_output_init(&L.out, L.nranks, L.tag_output, L.output_dir, err, sizeof err) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        goto out;
    }
    /* The signalfd and every rank's two output pipes. */
    struct pollfd *pfd = calloc(1 + 2 * (size_t)L.nranks, sizeof *pfd);
    if (!pfd) {
        fprintf(stderr, PROG ": out of memory for %d ranks\n", L.nranks);
        goto out;
    }
    if (L.timeout_s > 0) L.deadline = now_s() + L.timeout_s;

    code = start_ranks(&L);
    if (code == 0 && supervise(&L, pfd) != 0) code = EXIT_LAUNCHER;
    free(pfd);
    /* A launcher failure inside supervise already killed the ranks; reap them. */
    while (L.nrunning > 0 && waitpid(-1, NULL, 0) > 0) L.nrunning--;
    mlc_run_output_drain(&L.out);

    /* A failed job leaves nothing running: whatever a rank started in its
     * process group goes too (a group outliving its leader keeps its id). */
    if (code != 0 || L.first_failed >= 0 || L.timed_out)
        for (int r = 0; r < L.nranks; r++)
            if (L.ranks[r].pid > 0) killpg(L.ranks[r].pid, SIGKILL);

    int removed = mlc_run_job_sweep_shm(&L.job);
    if (removed > 0)
        fprintf(stderr, PROG ": removed %d shared-memory segment(s) left in /dev/shm by job %s\n",
                removed, L.job.id);
    if (code == 0) {
        if (L.timed_out) {
            code = EXIT_TIMEOUT;
        } else if (L.first_failed >= 0) {
            char what[256];
            describe_end(&L, L.first_failed, what, sizeof what);
            code = exit_code_of(L.ranks[L.first_failed].wait_status);
            fprintf(stderr, PROG ": job failed: %s\n", what);
        }
    }
out:
    mlc_run_output_free(&L.out);
    mlc_run_job_destroy(&L.job);
    free(L.ranks);
    free(L.ended);
    if (L.sigfd >= 0) close(L.sigfd);
    return code;
}
