/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-run behaviour, checked from outside (no library needed):
 *
 *   test_launcher MLCOMM_RUN LAUNCH_CHILD SCENARIO
 *
 * Runs mlcomm-run with launch_child as the rank program and checks the exit
 * status, the message on stderr, the files the ranks wrote and what is left
 * in /dev/shm. Bounds on elapsed time only catch a launcher that does not
 * stop sleeping ranks (they sleep 60 s); they are never performance checks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32
/* A launcher that stops the other ranks after a death ends long before the
 * 60 s they sleep. */
#define STOP_BOUND_S 20.0

static const char *run_path, *child_path;
static char dir[64];
static int failures;
#define CHECK_COUNTER failures
#include "check.h"

typedef struct result {
    int status; /* wait status of mlcomm-run */
    double elapsed_s;
    char err[16384]; /* its stderr (and the ranks') */
} result_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Something to do while mlcomm-run runs (send it a signal, ...). */
typedef void (*during_fn)(pid_t launcher);

/* Run mlcomm-run with the NULL-terminated launcher arguments. */
static void run(result_t *res, during_fn during, ...)
{
    const char *argv[MAX_ARGS] = {run_path};
    int n = 1;
    va_list ap;
    va_start(ap, during);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < MAX_ARGS - 1) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;

    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        exit(1);
    }
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        /* Its own process group: a scenario stops the launcher, and stopped
         * in this program's group it would be sent SIGHUP by the kernel if
         * that group were orphaned (the shell that started the test exits). */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* nothing else ends a stopped launcher whose test died */
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        execv(run_path, (char *const *)argv);
        perror("execv mlcomm-run");
        _exit(99);
    }
    close(p[1]);
    if (during) during(pid);
    size_t used = 0;
    ssize_t got;
    while ((got = read(p[0], res->err + used, sizeof res->err - 1 - used)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        used += (size_t)got;
        if (used == sizeof res->err - 1) break;
    }
    res->err[used] = '\0';
    close(p[0]);
    while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR) {
    }
    res->elapsed_s = now_s() - t0;
}

static int exit_code(const result_t *r)
{
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}

static bool has(const result_t *r, const char *text) { return strstr(r->err, text) != NULL; }

/* Contents of DIR/name (first line, no newline) into buf; false if absent. */
static bool read_file(const char *name, char *buf, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    if (!fgets(buf, (int)len, f)) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return true;
}

static int rank_pid(int r)
{
    char name[32], buf[32];
    snprintf(name, sizeof name, "pid.%d", r);
    return read_file(name, buf, sizeof buf) ? atoi(buf) : -1;
}

/* Wait (<= 20 s) until ranks 0..n-1 have written their pid files. */
static bool wait_ranks_started(int n)
{
    for (int i = 0; i < 2000; i++) {
        int r = 0;
        while (r < n && rank_pid(r) > 0) r++;
        if (r == n) return true;
        sleep_s(0.01);
    }
    return false;
}

/* Number of /dev/shm entries whose name starts with prefix. */
static int count_shm(const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static bool process_gone(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    bool zombie = false;
    if (fgets(buf, sizeof buf, f)) {
        const char *close_paren = strrchr(buf, ')');
        zombie = close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
    }
    fclose(f);
    return zombie;
}

#define CHECK_EXIT_CODE(res, want)                                                           \
    CHECK(exit_code(res) == (want), "mlcomm-run exit code %d, want %d; its stderr:\n%s",     \
          exit_code(res), (want), (res)->err)

/* ---- scenarios ------------------------------------------------------------ */

static void scenario_env(void)
{
    static result_t r;
    run(&r, NULL, "-n", "3", child_path, dir, "env", NULL);
    CHECK_EXIT_CODE(&r, 0);
    char ids[3][64];
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "rank.%d", k);
        CHECK(read_file(name, ids[k], sizeof ids[k]), "rank %d did not check in", k);
    }
    CHECK(strcmp(ids[0], ids[1]) == 0 && strcmp(ids[0], ids[2]) == 0,
          "ranks got different job ids: %s %s %s", ids[0], ids[1], ids[2]);
    /* Two jobs never share an id. */
    char first[64];
    snprintf(first, sizeof first, "%s", ids[0]);
    run(&r, NULL, "-n1", child_path, dir, "env", NULL);
    CHECK_EXIT_CODE(&r, 0);
    CHECK(read_file("rank.0", ids[0], sizeof ids[0]) && strcmp(ids[0], first) != 0,
          "two jobs got the same id %s", first);
}

static void scenario_argv(void)
{
    static result_t r;
    run(&r, NULL, "-n", "2", "--timeout", "60", "--", child_path, dir, "argv", "x y", "-n", "--",
        NULL);
    CHECK_EXIT_CODE(&r, 0);
}

static void scenario_exit_code(void)
{
    static result_t r;
    run(&r, NULL, "-n", "3", child_path, dir, "exit", "1", "7", NULL);
    CHECK_EXIT_CODE(&r, 7);
    char want[128];
    snprintf(want, sizeof want, "rank 1 (pid %d) exited with code 7", rank_pid(1));
    CHECK(has(&r, want), "stderr lacks '%s':\n%s", want, r.err);
    CHECK(has(&r, "job failed: rank 1 "), "the final line does not name rank 1:\n%s", r.err);
    CHECK(r.elapsed_s < STOP_BOUND_S, "the sleeping ranks were not stopped (%.1f s)",
          r.elapsed_s);
}

static void scenario_signal(void)
{
    static result_t r;
    run(&r, NULL, "-n", "3", child_path, dir, "kill", "2", "9", NULL);
    CHECK_EXIT_CODE(&r, 128 + SIGKILL);
    char want[128];
    snprintf(want, sizeof want, "rank 2 (pid %d) killed by signal 9 (Killed)", rank_pid(2));
    CHECK(has(&r, want), "stderr lacks '%s':\n%s", want, r.err);
    CHECK(has(&r, "job failed: rank 2 "), "the final line does not name rank 2:\n%s", r.err);
    /* The stopped peers are named as stopped, not as the cause. */
    CHECK(has(&r, "(stopped by mlcomm-run after rank 2 failed)"), "stderr:\n%s", r.err);
    CHECK(r.elapsed_s < STOP_BOUND_S, "the sleeping ranks were not stopped (%.1f s)",
          r.elapsed_s);
}

static void scenario_timeout(void)
{
    static result_t r;
    run(&r, NULL, "-n", "2", "--timeout", "0.5", child_path, dir, "sleep", "60", NULL);
    CHECK_EXIT_CODE(&r, 124);
    CHECK(has(&r, "timed out after 0.5 s"), "stderr:\n%s", r.err);
    CHECK(r.elapsed_s < STOP_BOUND_S, "the job ran %.1f s", r.elapsed_s);
    /* A job that ends in time is unaffected. */
    run(&r, NULL, "-n", "2", "--timeout=30", child_path, dir, "sleep", "0", NULL);
    CHECK_EXIT_CODE(&r, 0);
}

static void check_watchers(int n, int dead_rank)
{
    for (int k = 0; k < n; k++) {
        if (k == dead_rank) continue;
        char name[32], buf[256];
        snprintf(name, sizeof name, "watch.%d", k);
        CHECK(read_file(name, buf, sizeof buf), "rank %d did not report", k);
        CHECK(strcmp(buf, "ok") == 0, "rank %d saw: %s", k, buf);
    }
}

static void scenario_jobfd_exit(void)
{
    static result_t r;
    run(&r, NULL, "-n", "3", child_path, dir, "watch", "1", "exit", "5", NULL);
    CHECK_EXIT_CODE(&r, 5);
    check_watchers(3, 1);
}

static void scenario_jobfd_signal(void)
{
    static result_t r;
    run(&r, NULL, "-n", "2", child_path, dir, "watch", "1", "signal", "9", NULL);
    CHECK_EXIT_CODE(&r, 128 + SIGKILL);
    check_watchers(2, 1);
}

static void check_shm_swept(const char *want_code_text, int want_code, const char *sig)
{
    static result_t r;
    /* Another job's segment with the same prefix shape must survive. */
    char decoy[96];
    snprintf(decoy, sizeof decoy, "/mlc-0000000000000000-decoy-of-test_launcher-%d", (int)getpid());
    int fd = shm_open(decoy, O_CREAT | O_RDWR, 0600);
    CHECK(fd >= 0, "shm_open(%s): %s", decoy, strerror(errno));
    if (fd >= 0) close(fd);
    run(&r, NULL, "-n", "2", child_path, dir, "shm", "1", sig, NULL);
    CHECK(exit_code(&r) == want_code, "%s: exit code %d, want %d; stderr:\n%s", want_code_text,
          exit_code(&r), want_code, r.err);
    char id[64], prefix[96];
    CHECK(read_file("seg.0", id, sizeof id), "rank 0 did not create its segment");
    snprintf(prefix, sizeof prefix, "mlc-%s-", id);
    CHECK(count_shm(prefix) == 0, "%d /dev/shm/%s* entries left", count_shm(prefix), prefix);
    CHECK(has(&r, "removed 2 shared-memory segment(s)"), "stderr:\n%s", r.err);
    CHECK(count_shm(decoy + 1) == 1, "another job's segment was removed");
    shm_unlink(decoy);
}

static void scenario_shm_kill(void) { check_shm_swept("rank 1 SIGKILLed", 128 + SIGKILL, "9"); }
static void scenario_shm_clean(void) { check_shm_swept("clean job", 0, "0"); }

static void scenario_exec_fail(void)
{
    static result_t r;
    run(&r, NULL, "-n", "2", "/nonexistent/mlc-program", NULL);
    CHECK_EXIT_CODE(&r, 127);
    CHECK(has(&r, "cannot start rank 0: /nonexistent/mlc-program: No such file"), "stderr:\n%s",
          r.err);
    run(&r, NULL, "-n", "2", "/dev/null", NULL);
    CHECK_EXIT_CODE(&r, 126);
    /* A program in the current folder named without ./ is looked up on PATH
     * (as execvp does): the message says how to name the one here. */
    char here[64];
    snprintf(here, sizeof here, "mlc-here-%d", (int)getpid());
    FILE *f = fopen(here, "w");
    CHECK(f != NULL, "cannot create %s: %s", here, strerror(errno));
    if (!f) return;
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    chmod(here, 0755);
    run(&r, NULL, "-n", "1", here, NULL);
    unlink(here);
    CHECK_EXIT_CODE(&r, 127);
    char hint[128];
    snprintf(hint, sizeof hint, "for the one in this folder, say ./%s", here);
    CHECK(has(&r, hint), "stderr:\n%s", r.err);
}

static void scenario_usage(void)
{
    static result_t r;
    const char *bad[][4] = {
        {"-n", "0", child_path, NULL},       {"-n", "4097", child_path, NULL},
        {"-n", "2x", child_path, NULL},      {"-n", "2", "--timeout", "-1"},
        {"--bogus", "-n", "2", child_path},  {"-n", "2", NULL, NULL},
        {child_path, dir, "env", NULL},      {"-n", NULL, NULL, NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        run(&r, NULL, bad[k][0], bad[k][1], bad[k][2], bad[k][3], NULL);
        CHECK(exit_code(&r) == 2 && r.err[0] != '\0',
              "usage error case %zu: exit code %d, stderr '%s'", k, exit_code(&r), r.err);
    }
    run(&r, NULL, "--help", NULL);
    CHECK_EXIT_CODE(&r, 0);
}

static void send_term_when_started(pid_t launcher)
{
    CHECK(wait_ranks_started(2), "the ranks did not start");
    kill(launcher, SIGTERM);
}

static void scenario_forward(void)
{
    static result_t r;
    run(&r, send_term_when_started, "-n", "2", child_path, dir, "sleep", "60", NULL);
    CHECK_EXIT_CODE(&r, 128 + SIGTERM);
    CHECK(has(&r, "passing signal 15 (Terminated) on to every rank"), "stderr:\n%s", r.err);
    CHECK(has(&r, "killed by signal 15"), "stderr:\n%s", r.err);
    CHECK(r.elapsed_s < STOP_BOUND_S, "the ranks ignored the forwarded SIGTERM");
}

/* Rank 0 has exited (0), rank 1 is stopped (SIGSTOP: a debugger, ^Z, a
 * rank stopping itself) when the launcher is told to end: the SIGTERM passed
 * on must still end it, with no second signal (a stopped process acts on a
 * signal only once continued). */
static void stop_rank_then_term(pid_t launcher)
{
    CHECK(wait_ranks_started(2), "the ranks did not start");
    kill(rank_pid(1), SIGSTOP);
    sleep_s(0.2);
    kill(launcher, SIGTERM);
}

static void scenario_forward_stopped(void)
{
    static result_t r;
    run(&r, stop_rank_then_term, "-n", "2", child_path, dir, "exit", "0", "0", NULL);
    CHECK_EXIT_CODE(&r, 128 + SIGTERM);
    char want[128];
    snprintf(want, sizeof want, "rank 1 (pid %d) killed by signal 15", rank_pid(1));
    CHECK(has(&r, want), "no '%s' in stderr:\n%s", want, r.err);
    CHECK(r.elapsed_s < STOP_BOUND_S, "a stopped rank kept the job alive %.1f s after one SIGTERM", r.elapsed_s);
}

static void kill_launcher_when_started(pid_t launcher)
{
    CHECK(wait_ranks_started(2), "the ranks did not start");
    kill(launcher, SIGKILL);
}

static void scenario_parent_death(void)
{
    static result_t r;
    run(&r, kill_launcher_when_started, "-n", "2", child_path, dir, "sleep", "60", NULL);
    CHECK(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL, "launcher status %#x",
          r.status);
    /* Reading stderr to EOF waited for every holder of the pipe: ranks that
     * outlived the launcher would have held it for the 60 s they sleep. */
    CHECK(r.elapsed_s < STOP_BOUND_S, "the ranks outlived their launcher (%.1f s)", r.elapsed_s);
    for (int k = 0; k < 2; k++) {
        int pid = rank_pid(k);
        bool gone = pid <= 0 || process_gone(pid);
        for (int i = 0; i < 500 && !gone; i++) {
            sleep_s(0.01);
            gone = process_gone(pid);
        }
        CHECK(gone, "rank %d (pid %d) outlived its launcher", k, pid);
        if (!gone) kill(pid, SIGKILL);
    }
}

/* The launcher is stopped while rank 1 is killed and its peers, seeing it
 * die, exit 1: all three end before the launcher can look, and it must
 * still name rank 1 as the cause. */
static void stop_launcher_while_rank_1_dies(pid_t launcher)
{
    CHECK(wait_ranks_started(3), "the ranks did not start");
    kill(launcher, SIGSTOP);
    char go[128];
    snprintf(go, sizeof go, "%s/go", dir);
    FILE *f = fopen(go, "w");
    if (f) fclose(f);
    for (int i = 0; i < 2000; i++) {
        if (process_gone(rank_pid(0)) && process_gone(rank_pid(1)) && process_gone(rank_pid(2)))
            break;
        sleep_s(0.01);
    }
    kill(launcher, SIGCONT);
}

static void scenario_cause(void)
{
    static result_t r;
    run(&r, stop_launcher_while_rank_1_dies, "-n", "3", child_path, dir, "follow", "1", NULL);
    CHECK_EXIT_CODE(&r, 128 + SIGKILL);
    char want[128];
    snprintf(want, sizeof want, "mlcomm-run: rank 1 (pid %d) killed by signal 9 (Killed)\n",
             rank_pid(1));
    CHECK(strncmp(r.err, want, strlen(want)) == 0, "the first line is not '%s':\n%s", want, r.err);
    CHECK(has(&r, "job failed: rank 1 "), "the final line does not name rank 1:\n%s", r.err);
}

/* What a failed rank started in its process group does not outlive the job. */
static void scenario_orphan(void)
{
    static result_t r;
    run(&r, NULL, "-n", "2", child_path, dir, "orphan", "1", NULL);
    CHECK_EXIT_CODE(&r, 3);
    char buf[32];
    CHECK(read_file("orphan.1", buf, sizeof buf), "rank 1 did not start its child");
    int pid = atoi(buf);
    bool gone = pid <= 0 || process_gone(pid);
    for (int i = 0; i < 500 && !gone; i++) {
        sleep_s(0.01);
        gone = process_gone(pid);
    }
    CHECK(gone, "rank 1's child (pid %d) outlived the job", pid);
    if (!gone) kill(pid, SIGKILL);
    /* it held the stderr pipe: had it lived, reading to EOF took 60 s */
    CHECK(r.elapsed_s < STOP_BOUND_S, "the job's processes lived %.1f s", r.elapsed_s);
}

#define SCENARIOS(X)  \
    X(env)            \
    X(argv)           \
    X(exit_code)      \
    X(signal)         \
    X(timeout)        \
    X(jobfd_exit)     \
    X(jobfd_signal)   \
    X(shm_kill)       \
    X(shm_clean)      \
    X(exec_fail)      \
    X(usage)          \
    X(forward)        \
    X(forward_stopped) \
    X(parent_death)   \
    X(orphan)         \
    X(cause)

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_launcher MLCOMM_RUN LAUNCH_CHILD SCENARIO\n");
        return 2;
    }
    run_path = argv[1];
    child_path = argv[2];
    snprintf(dir, sizeof dir, "/tmp/mlc-launch-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    bool found = false;
#define MLC_X_RUN(name)                    \
    if (strcmp(argv[3], #name) == 0) {     \
        scenario_##name();                 \
        found = true;                      \
    }
    SCENARIOS(MLC_X_RUN)
#undef MLC_X_RUN
    remove_dir();
    if (!found) {
        fprintf(stderr, "test_launcher: unknown scenario '%s'\n", argv[3]);
        return 2;
    }
    return failures ? 1 : 0;
}
