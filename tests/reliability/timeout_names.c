/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A timeout names exactly the ranks that were not heard from. Four shm ranks
 * (launcher-less: this program forks them) repeat one operation; rank 3
 * freezes itself (SIGSTOP) after a random delay, so it stops outside or
 * inside a call. Ranks 0..2 must each fail with MLC_ERR_TIMEOUT
 * (MLC_TIMEOUT=1) whose message ends "ranks not heard from: 3": never the
 * caller, never a healthy rank that is itself waiting for rank 3.
 *
 *   timeout_names [--trials T] [--seed S] [KIND]
 *
 * KIND: allreduce_small, allreduce_large, allreduce_ring (schedule),
 * allgather, bcast0, bcast3, barrier, p2p (a chain 3 -> 0 -> 1 -> 2 -> 3:
 * ranks 1 and 2 wait for healthy ranks). Default: every kind, T trials each
 * (default 2). Prints one line per survivor and a summary.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"

#define N 4
#define FROZEN 3
#define LARGE (1u << 20) /* floats */

static const char *const kinds[] = {"allreduce_small", "allreduce_large", "allreduce_ring", "allgather",
                                    "bcast0",          "bcast3",          "barrier",        "p2p",
                                    NULL};

typedef struct shared {
    atomic_int reported; /* survivors that have their verdict */
    atomic_int good;     /* survivors whose message named exactly the frozen rank */
} shared_t;

static shared_t *sh;
static int stop_after_ms;

static void *freezer(void *arg)
{
    mlc_test_sleep_ms(stop_after_ms);
    raise(SIGSTOP);
    return arg;
}

static mlc_status_t step(const char *kind, mlc_comm_t *comm, int r, float *a, float *b)
{
    if (strcmp(kind, "allreduce_small") == 0) return mlc_allreduce(a, b, 16, MLC_FLOAT32, MLC_SUM, comm, NULL);
    if (strcmp(kind, "allreduce_large") == 0) return mlc_allreduce(a, b, LARGE, MLC_FLOAT32, MLC_SUM, comm, NULL);
    if (strcmp(kind, "allreduce_ring") == 0)
        return mlc_allreduce(a, b, 16384, MLC_FLOAT32, MLC_SUM, comm, NULL); /* MLC_ALGO_ALLREDUCE=ring */
    if (strcmp(kind, "allgather") == 0) return mlc_allgather(a, b, 64, MLC_FLOAT32, comm, NULL);
    if (strcmp(kind, "bcast0") == 0) return mlc_broadcast(a, b, 64, MLC_FLOAT32, 0, comm, NULL);
    if (strcmp(kind, "bcast3") == 0) return mlc_broadcast(a, b, 64, MLC_FLOAT32, FROZEN, comm, NULL);
    if (strcmp(kind, "barrier") == 0) return mlc_barrier(comm, NULL);
    /* p2p chain: 3 -> 0 -> 1 -> 2 -> 3 */
    int from = (r + N - 1) % N, to = (r + 1) % N;
    if (r == FROZEN) {
        mlc_status_t st = mlc_send(a, 4, MLC_FLOAT32, 0, 1, comm, NULL);
        return st != MLC_SUCCESS ? st : mlc_recv(b, 4, MLC_FLOAT32, 2, 1, comm, NULL, NULL);
    }
    if (r == 0) from = FROZEN;
    mlc_status_t st = mlc_recv(b, 4, MLC_FLOAT32, from, 1, comm, NULL, NULL);
    return st != MLC_SUCCESS ? st : mlc_send(a, 4, MLC_FLOAT32, to, 1, comm, NULL);
}

/* The text after the last "not heard from: ". */
static const char *named(const char *msg)
{
    const char *key = "not heard from: ", *p = NULL;
    for (const char *s = strstr(msg, key); s; s = strstr(s + 1, key)) p = s + strlen(key);
    return p ? p : "(no \"not heard from\" in the message)";
}

static int run_rank(const char *kind)
{
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        printf("init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    int r = mlc_comm_rank(comm);
    float *a = calloc(LARGE * N, sizeof *a), *b = calloc(LARGE * N, sizeof *b);
    if (!a || !b) return 2;
    st = mlc_barrier(comm, NULL);
    if (st != MLC_SUCCESS) {
        printf("rank %d: barrier: %s: %s\n", r, mlc_status_name(st), mlc_last_error());
        return 1;
    }
    pthread_t tid;
    if (r == FROZEN) pthread_create(&tid, NULL, freezer, NULL);
    int it = 0;
    double t0 = mlc_test_now();
    while ((st = step(kind, comm, r, a, b)) == MLC_SUCCESS && mlc_test_now() - t0 < 60) it++;
    const char *msg = mlc_last_error();
    const char *who = named(msg);
    bool ok = st == MLC_ERR_TIMEOUT && strcmp(who, "3") == 0;
    printf("rank %d: %s: %s after %d iterations, named \"%s\"%s: %s\n", r, kind, mlc_status_name(st), it, who,
           ok ? "" : " WRONG", msg);
    if (ok) atomic_fetch_add(&sh->good, 1);
    /* Stay until every survivor has its verdict: leaving would turn theirs into a lost peer. */
    atomic_fetch_add(&sh->reported, 1);
    for (double t = mlc_test_now(); atomic_load(&sh->reported) < N - 1 && mlc_test_now() - t < 20;)
        mlc_test_sleep_ms(5);
    mlc_comm_free(comm);
    free(a);
    free(b);
    return ok ? 0 : 1;
}

static int trial(const char *kind, int idx, unsigned seed)
{
    char job[64];
    snprintf(job, sizeof job, "tnames%dx%d", (int)getpid(), idx);
    atomic_store(&sh->reported, 0);
    atomic_store(&sh->good, 0);
    stop_after_ms = (int)(mlc_test_mix(seed) % 40u);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[i] == 0) {
            /* A process group of its own: were the rank stopped in this
             * program's group and that group orphaned (the shell that started
             * the test exits), the kernel would send it SIGHUP and it would die
             * instead of staying stopped. Nor would anything end it if this
             * program died first: the kernel kills it then. */
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            char rank[16], size[16];
            snprintf(rank, sizeof rank, "%d", i);
            snprintf(size, sizeof size, "%d", N);
            setenv("MLC_BACKEND", "shm", 1);
            setenv("MLC_RANK", rank, 1);
            setenv("MLC_LOCAL_RANK", rank, 1);
            setenv("MLC_WORLD_SIZE", size, 1);
            setenv("MLC_LOCAL_SIZE", size, 1);
            setenv("MLC_JOB_ID", job, 1);
            setenv("MLC_TIMEOUT", "1", 1);
            setenv("MLC_LOG_LEVEL", "error", 1);
            if (strcmp(kind, "allreduce_ring") == 0) setenv("MLC_ALGO_ALLREDUCE", "ring", 1);
            unsetenv("MLC_JOB_FD");
            _exit(run_rank(kind));
        }
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (i == FROZEN) continue;
        int status;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
    }
    /* The frozen rank must still be there (stopped): one that ended on its own
     * is a failure of its own, and how it ended says why. */
    int fst;
    if (waitpid(pids[FROZEN], &fst, WNOHANG) == pids[FROZEN]) {
        if (WIFSIGNALED(fst))
            printf("rank 3 (pid %d) ended before it was killed: signal %d (%s)\n", (int)pids[FROZEN],
                   WTERMSIG(fst), strsignal(WTERMSIG(fst)));
        else
            printf("rank 3 (pid %d) ended before it was killed: exit code %d\n", (int)pids[FROZEN],
                   WIFEXITED(fst) ? WEXITSTATUS(fst) : -1);
        bad = 1;
    } else {
        kill(pids[FROZEN], SIGKILL);
        waitpid(pids[FROZEN], NULL, 0);
    }
    printf("trial %s #%d (rank 3 stops after %d ms): %d of %d survivors named exactly rank 3\n", kind, idx,
           stop_after_ms, atomic_load(&sh->good), N - 1);
    return bad;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int trials = 2;
    unsigned seed = (unsigned)getpid();
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = (unsigned)strtoul(argv[++i], NULL, 0);
        else
            only = argv[i];
    }
    printf("seed %u (replay with --seed %u)\n", seed, seed);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 2;
    int failed = 0, total = 0, idx = 0;
    for (int k = 0; kinds[k]; k++) {
        if (only && strcmp(only, kinds[k]) != 0) continue;
        for (int t = 0; t < trials; t++, total++) {
            failed += trial(kinds[k], idx, seed + (unsigned)idx);
            idx++;
        }
    }
    if (total == 0) {
        fprintf(stderr, "unknown kind '%s'\n", only ? only : "");
        return 2;
    }
    printf("%d of %d trials named exactly rank 3 on every survivor\n%s\n", total - failed, total,
           failed ? "FAIL" : "PASS");
    return failed != 0;
}
