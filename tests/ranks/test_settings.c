/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Settings agreement at init: a collective-relevant setting that differs on
 * one rank fails mlc_comm_init on EVERY rank, quickly, with MLC_ERR_MISMATCH
 * and a message naming the variable and both ranks; equal settings on every
 * rank initialize and run.
 *
 *   test_settings CASE               one rank of a job (mlcomm-run, mpiexec):
 *                                    the last rank sets the case's variable
 *   test_settings --threads N CASE   N thread ranks joining with
 *                                    mlc_comm_init_rank; the last one starts
 *                                    after the variable is set
 *
 *   test_settings --threads N options  N thread ranks joining with
 *                                    mlc_comm_create_from, the last one with
 *                                    the option algo_allreduce=ring
 *
 * CASE: allreduce / broadcast (MLC_ALGO_<COLL>=ring on the last rank only),
 * chunk (MLC_STAGE_CHUNK=8K on the last rank only), worldsize (the last
 * rank's MLC_WORLD_SIZE one more than the job's; one rank per process
 * only), same (every rank sets MLC_ALGO_ALLREDUCE=ring: init succeeds and
 * the allreduce runs ring).
 * Run with MLC_TIMEOUT=20: before the agreement ignored forced algorithms,
 * init deadlocked in its own allreduce until that timeout.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mlcomm.h"
#include "mlcomm_tensor.h"

#define FAIL(...)                                                            \
    do {                                                                     \
        fprintf(stderr, "[rank %d] %s:%d: ", rank, __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                                        \
        fprintf(stderr, "\n");                                               \
        return 1;                                                            \
    } while (0)

#define MAX_SECONDS 5.0 /* "within a few seconds": far below MLC_TIMEOUT */

typedef struct tcase {
    const char *name, *var, *value, *want_text; /* want_text: how the value shows in the message */
    int all_ranks;                              /* 1: every rank sets it (no mismatch) */
    int coll;                                   /* the collective whose algorithm it forces, or -1 */
} tcase_t;

static const tcase_t cases[] = {
    {"allreduce", "MLC_ALGO_ALLREDUCE", "ring", "'ring'", 0, MLC_COLL_ALLREDUCE},
    {"broadcast", "MLC_ALGO_BROADCAST", "scatter_allgather", "'scatter_allgather'", 0, MLC_COLL_BROADCAST},
    {"unknown", "MLC_ALGO_ALLREDUCE", "nosuch", "'nosuch'", 0, -1},
    {"chunk", "MLC_STAGE_CHUNK", "8K", "8192", 0, -1},
    {"worldsize", "MLC_WORLD_SIZE", "+1", "", 0, -1}, /* "+1": the job's size plus one (run_process) */
    {"same", "MLC_ALGO_ALLREDUCE", "ring", "", 1, MLC_COLL_ALLREDUCE},
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const tcase_t *find_case(const char *name)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (strcmp(cases[i].name, name) == 0) return &cases[i];
    return NULL;
}

/* What rank `rank` of `size` must see from its init (st, msg, seconds). */
static int judge(const tcase_t *tc, int rank, int size, mlc_status_t st, const char *msg, double secs,
                 mlc_comm_t *comm)
{
    if (tc->all_ranks) {
        if (st != MLC_SUCCESS) FAIL("init with %s=%s on every rank -> %s: %s", tc->var, tc->value,
                                    mlc_status_name(st), msg);
        int32_t one = 1, sum = 0;
        st = mlc_allreduce(&one, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL);
        if (st != MLC_SUCCESS || sum != size)
            FAIL("allreduce after init -> %s, sum %d (%s)", mlc_status_name(st), sum, mlc_last_error());
        return 0;
    }
    char want_pair[128];
    snprintf(want_pair, sizeof want_pair, "rank %d %s", size - 1, tc->want_text);
    if (st != MLC_ERR_MISMATCH) FAIL("init with %s=%s on rank %d only -> %s after %.1f s, expected "
                                     "MLC_ERR_MISMATCH: %s", tc->var, tc->value, size - 1,
                                     mlc_status_name(st), secs, msg);
    if (!strstr(msg, tc->var) || !strstr(msg, "rank 0") || !strstr(msg, want_pair))
        FAIL("the message does not name %s, rank 0 and \"%s\": %s", tc->var, want_pair, msg);
    if (secs > MAX_SECONDS) FAIL("the mismatch took %.1f s to report", secs);
    return 0;
}

/* ---- one rank per process ------------------------------------------------ */

static int env_rank(void)
{
    static const char *const vars[] = {"MLC_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i]));
    return -1;
}

static int env_size(void)
{
    static const char *const vars[] = {"MLC_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i]));
    return -1;
}

static int run_process(const tcase_t *tc)
{
    int rank = env_rank(), size = env_size();
    if (rank < 0 || size < 1) FAIL("no rank in the environment: run under mlcomm-run or mpiexec");
    if (size < 2) return 77;
    tcase_t sized = *tc;
    char value[16], want[32];
    if (strcmp(tc->value, "+1") == 0) {
        snprintf(value, sizeof value, "%d", size + 1);
        snprintf(want, sizeof want, "expects %d", size + 1);
        sized.value = value;
        sized.want_text = want;
        tc = &sized;
    }
    if (tc->all_ranks || rank == size - 1) setenv(tc->var, tc->value, 1);
    mlc_comm_t *comm = NULL;
    double t0 = now_s();
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    double secs = now_s() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mlc_last_error());
    int rc = judge(tc, rank, size, st, msg, secs, comm);
    if (comm) mlc_comm_free(comm);
    return rc;
}

/* ---- thread ranks ---------------------------------------------------------- */

typedef struct trank {
    mlc_unique_id_t *id;
    int rank, size;
    mlc_status_t st;
    char msg[1024];
    double secs;
    mlc_comm_t *comm;
} trank_t;

static void *thread_rank(void *p)
{
    trank_t *t = p;
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "threads";
    double t0 = now_s();
    t->st = mlc_comm_init_rank(t->id, t->size, t->rank, &cfg, &t->comm);
    t->secs = now_s() - t0;
    snprintf(t->msg, sizeof t->msg, "%s", mlc_last_error());
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int run_threads(const tcase_t *tc, int size)
{
    int rank = -1;
    if (size < 2) return 77;
    if (tc->coll < 0) FAIL("case %s is for processes only (its value cannot be read back)", tc->name);
    /* The environment is the process's: the ranks before the last resolve
     * their configuration before the variable is set, the last one after.
     * Should a loaded machine delay an early rank past the set (then every
     * rank sees the value and init succeeds), the attempt says nothing and
     * is repeated. */
    for (int attempt = 0; attempt < 5; attempt++) {
        trank_t *t = calloc((size_t)size, sizeof *t);
        pthread_t *tid = calloc((size_t)size, sizeof *tid);
        mlc_unique_id_t id;
        if (!t || !tid || mlc_get_unique_id(&id) != MLC_SUCCESS) FAIL("setup");
        unsetenv(tc->var);
        if (tc->all_ranks) setenv(tc->var, tc->value, 1);
        for (int r = 0; r < size; r++) {
            if (r == size - 1 && !tc->all_ranks) {
                sleep_ms(300); /* the others have read their environment */
                setenv(tc->var, tc->value, 1);
            }
            t[r] = (trank_t){.id = &id, .rank = r, .size = size};
            if (pthread_create(&tid[r], NULL, thread_rank, &t[r]) != 0) FAIL("pthread_create");
        }
        for (int r = 0; r < size; r++) pthread_join(tid[r], NULL);
        unsetenv(tc->var);
        int all_ok = 1, rc = 0;
        for (int r = 0; r < size; r++) all_ok &= t[r].st == MLC_SUCCESS;
        const char *algo0 = NULL;
        int lost_race = !tc->all_ranks && all_ok &&
                        mlc_comm_get_algo(t[0].comm, (mlc_coll_t)tc->coll, 8, &algo0) == MLC_SUCCESS &&
                        strcmp(algo0, tc->value) == 0;
        for (int r = 0; r < size && !lost_race && rc == 0; r++) {
            rank = r;
            if (!tc->all_ranks) {
                rc = judge(tc, r, size, t[r].st, t[r].msg, t[r].secs, NULL);
                continue;
            }
            /* Equal settings: every rank is up and runs the forced algorithm. */
            const char *a = NULL;
            if (t[r].st != MLC_SUCCESS) {
                fprintf(stderr, "[rank %d] init with %s=%s on every rank -> %s: %s\n", r, tc->var,
                        tc->value, mlc_status_name(t[r].st), t[r].msg);
                rc = 1;
            } else if (mlc_comm_get_algo(t[r].comm, (mlc_coll_t)tc->coll, 8, &a) != MLC_SUCCESS ||
                       strcmp(a, tc->value) != 0) {
                fprintf(stderr, "[rank %d] %s=%s on every rank but it runs %s\n", r, tc->var, tc->value,
                        a ? a : "(none)");
                rc = 1;
            }
        }
        for (int r = 0; r < size; r++)
            if (t[r].comm) mlc_comm_free(t[r].comm);
        free(t);
        free(tid);
        if (!lost_race) return rc;
        fprintf(stderr, "attempt %d: rank 0 read the environment after the variable was set; again\n", attempt);
    }
    FAIL("five attempts without the early ranks reading their environment first");
}

/* ---- per-rank options of mlc_comm_create_from ------------------------------- */

typedef struct orank {
    mlc_unique_id_t *id;
    int rank, size;
    mlc_status_t st;
    char msg[1024];
    double secs;
    mlc_comm_t *comm;
} orank_t;

static void *option_rank(void *p)
{
    orank_t *t = p;
    char rank[16], size[16];
    snprintf(rank, sizeof rank, "%d", t->rank);
    snprintf(size, sizeof size, "%d", t->size);
    mlc_option_t opts[3] = {{"rank", rank}, {"world_size", size}, {"algo_allreduce", "ring"}};
    int n = 0;
    double t0 = now_s();
    t->st = mlc_comm_create_from("threads", opts, t->rank == t->size - 1 ? 3 : 2, t->id, 1, &t->comm, &n);
    t->secs = now_s() - t0;
    snprintf(t->msg, sizeof t->msg, "%s", mlc_last_error());
    return NULL;
}

static int run_options(int size)
{
    int rank = -1;
    if (size < 2) return 77;
    static const tcase_t tc = {"options", "MLC_ALGO_ALLREDUCE", "ring", "'ring'", 0, MLC_COLL_ALLREDUCE};
    orank_t t[16];
    pthread_t tid[16];
    mlc_unique_id_t id;
    if (size > 16 || mlc_get_unique_id(&id) != MLC_SUCCESS) FAIL("setup");
    for (int r = 0; r < size; r++) {
        t[r] = (orank_t){.id = &id, .rank = r, .size = size};
        if (pthread_create(&tid[r], NULL, option_rank, &t[r]) != 0) FAIL("pthread_create");
    }
    for (int r = 0; r < size; r++) pthread_join(tid[r], NULL);
    int rc = 0;
    for (int r = 0; r < size && rc == 0; r++) {
        rank = r;
        rc = judge(&tc, r, size, t[r].st, t[r].msg, t[r].secs, NULL);
    }
    for (int r = 0; r < size; r++)
        if (t[r].st == MLC_SUCCESS) mlc_comm_free(t[r].comm);
    return rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int threads = 0, rank = -1;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else name = argv[i];
    }
    if (threads > 0 && name && strcmp(name, "options") == 0) return run_options(threads);
    const tcase_t *tc = name ? find_case(name) : NULL;
    if (!tc) FAIL("usage: test_settings [--threads N] allreduce|broadcast|chunk|same");
    return threads > 0 ? run_threads(tc, threads) : run_process(tc);
}
