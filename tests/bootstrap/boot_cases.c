/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Store bootstraps without a launcher (mlc_comm_init_rank over the built-in
 * TCP store, mlc_comm_init_store over stores written here). One case per run:
 *   hosts       4 processes as 2 "hosts" x 2 (MLC_HOST_ID), each id handed
 *               over through a file: shm (asked for, or picked by auto) is
 *               refused naming both hosts; with one host id auto runs shm
 *   memstore    4 threads over an in-memory store: threads backend, data
 *               moves; the used store is refused for a second communicator
 *   filestore   2 processes over a store of files in a directory: shm
 *   storeerr    a store whose set / get fails: the message names the key
 *               and the value returned; the other rank times out naming it
 *   missing     3 of 4 ranks join (store, then unique id): TIMEOUT naming rank 3
 *   dupclaim    two callers claim rank 1 of 2 on an in-memory store, both
 *               past the check that the key is free: the one whose record
 *               the other overwrote fails with INVALID_ARG naming rank 1,
 *               the other joins rank 0 and the communicator works
 *   baduid      damaged ids, an id whose listener is gone, nranks that
 *               differ: clear errors, no crash; MLC_BOOTSTRAP_ADDR is the
 *               address an id carries, a malformed one is refused
 *   nccl        4 processes as 2 "hosts" x 2 on nccl over the test doubles
 *               (MLC_NCCL_LIB, MLC_CUDART_LIB): the host check lets them
 *               through and every rank hands NCCL rank 0's NCCL id, taken
 *               from the store (the double never completes a multi-rank
 *               init, so each then times out in NCCL, not in the bootstrap)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include "boot_procs.h"

static atomic_int failures;
#define CHECK_COUNTER failures
#define CHECK_WHO() fprintf(stderr, "[pid %d] ", (int)getpid())
#include "check.h"

static char dir[64];

static mlc_config_t config(const char *backend, double timeout_s)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = backend;
    cfg.timeout_s = timeout_s;
    return cfg;
}

/* One allreduce of rank + 1 over every rank: the communicator moves data. */
static void check_sum(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm);
    int32_t v = mlc_comm_rank(comm) + 1, sum = 0;
    CHECK_OK(mlc_allreduce(&v, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
    CHECK(sum == p * (p + 1) / 2, "allreduce gave %d, expected %d", sum, p * (p + 1) / 2);
}

/* ---- an in-memory store shared by threads ------------------------------------ */

typedef struct mem_kv {
    struct mem_kv *next;
    char key[128];
    size_t len;
    unsigned char value[512];
} mem_kv_t;

typedef struct mem_store {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mem_kv_t *keys;
    const char *fail_key; /* set or get of this key fails with fail_code */
    int fail_code;
} mem_store_t;

static int mem_set(void *ctx, const char *key, const void *value, size_t len)
{
    mem_store_t *s = ctx;
    if (s->fail_key && strcmp(key, s->fail_key) == 0) return s->fail_code;
    if (len > sizeof s->keys->value) return -1;
    pthread_mutex_lock(&s->lock);
    mem_kv_t *k = s->keys;
    while (k && strcmp(k->key, key) != 0) k = k->next;
    if (!k) {
        k = calloc(1, sizeof *k);
        snprintf(k->key, sizeof k->key, "%s", key);
        k->next = s->keys;
        s->keys = k;
    }
    memcpy(k->value, value, len);
    k->len = len;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return MLC_STORE_OK;
}

static int mem_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len, double timeout_s)
{
    mem_store_t *s = ctx;
    if (s->fail_key && strcmp(key, s->fail_key) == 0) return s->fail_code;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = timeout_s < 0 ? 3600 : timeout_s;
    until.tv_sec += (time_t)t;
    until.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&s->lock);
    int rc = MLC_STORE_TIMEOUT;
    for (;;) {
        mem_kv_t *k = s->keys;
        while (k && strcmp(k->key, key) != 0) k = k->next;
        if (k) {
            memcpy(buf, k->value, k->len < cap ? k->len : cap);
            *len = k->len;
            rc = MLC_STORE_OK;
            break;
        }
        if (timeout_s == 0 || pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0) break;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void mem_init(mem_store_t *s, mlc_store_t *api)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    *api = (mlc_store_t){.ctx = s, .set = mem_set, .get = mem_get};
}

static void mem_free(mem_store_t *s)
{
    while (s->keys) {
        mem_kv_t *k = s->keys;
        s->keys = k->next;
        free(k);
    }
}

/* ---- threads, each one rank ---------------------------------------------------- */

typedef struct rank_arg {
    int rank, nranks;
    const mlc_store_t *store;      /* mlc_comm_init_store, else ... */
    const mlc_unique_id_t *id;     /* ... mlc_comm_init_rank */
    mlc_config_t cfg;
    mlc_status_t st;
    char msg[1024];
    mlc_comm_t *comm;
} rank_arg_t;

static void *rank_thread(void *p)
{
    rank_arg_t *a = p;
    a->st = a->store ? mlc_comm_init_store(a->store, a->nranks, a->rank, &a->cfg, &a->comm)
                     : mlc_comm_init_rank(a->id, a->nranks, a->rank, &a->cfg, &a->comm);
    snprintf(a->msg, sizeof a->msg, "%s", mlc_last_error());
    if (a->st == MLC_SUCCESS) {
        check_sum(a->comm);
        mlc_comm_free(a->comm);
    }
    return NULL;
}

/* Start `joining` of nranks ranks as threads and wait for them. */
static void run_threads(rank_arg_t *a, int joining, int nranks, const mlc_store_t *store,
                        const mlc_unique_id_t *id, mlc_config_t cfg)
{
    pthread_t th[8];
    for (int r = 0; r < joining; r++) {
        a[r] = (rank_arg_t){.rank = r, .nranks = nranks, .store = store, .id = id, .cfg = cfg};
        pthread_create(&th[r], NULL, rank_thread, &a[r]);
    }
    for (int r = 0; r < joining; r++) pthread_join(th[r], NULL);
}

static bool has(const char *msg, const char *text) { return strstr(msg, text) != NULL; }

static double boot_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- cases ------------------------------------------------------------------- */

static void id_path(char *out, size_t len, int round) { snprintf(out, len, "%s/id%d", dir, round); }

static int hosts_rank(int rank, void *arg)
{
    (void)arg;
    static const char *const rounds[] = {"auto", "shm", "auto"};
    for (int round = 0; round < 3; round++) {
        /* Rounds 0 and 1: ranks 0-1 on hostA, 2-3 on hostB; round 2: one host. */
        setenv("MLC_HOST_ID", round < 2 ? (rank < 2 ? "hostA" : "hostB") : "hostC", 1);
        char path[128];
        id_path(path, sizeof path, round);
        mlc_unique_id_t id;
        CHECK(boot_read_id(path, &id, 30) == 0, "rank %d could not read %s", rank, path);
        mlc_config_t cfg = config(strcmp(rounds[round], "auto") == 0 ? NULL : rounds[round], 20);
        mlc_comm_t *comm = NULL;
        mlc_status_t st = mlc_comm_init_rank(&id, 4, rank, &cfg, &comm);
        if (round < 2) {
            CHECK(st == MLC_ERR_UNSUPPORTED, "round %d (%s): rank %d got %s: %s", round, rounds[round], rank,
                  mlc_status_name(st), mlc_last_error());
            CHECK(has(mlc_last_error(), "'hostA' (ranks 0-1), 'hostB' (ranks 2-3)"),
                  "round %d: the message does not name both hosts and their ranks: %s", round, mlc_last_error());
            if (round == 1) CHECK_MSG("backend 'shm' needs every rank on one host");
            if (comm) mlc_comm_free(comm);
        } else {
            CHECK(st == MLC_SUCCESS, "one host: rank %d got %s: %s", rank, mlc_status_name(st), mlc_last_error());
            if (comm) {
                CHECK_STR(mlc_comm_backend(comm), "shm");
                check_sum(comm);
                mlc_comm_free(comm);
            }
        }
    }
    return failures != 0;
}

static void case_hosts(void)
{
    pid_t ranks = fork();
    if (ranks == 0) _exit(boot_run_children(4, hosts_rank, NULL, 120) != 0);
    for (int round = 0; round < 3; round++) {
        mlc_unique_id_t id;
        char path[128];
        CHECK_OK(mlc_get_unique_id(&id));
        id_path(path, sizeof path, round);
        CHECK(boot_write_id(path, &id) == 0, "writing %s", path);
    }
    int status = 0;
    waitpid(ranks, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed (see above)");
}

static void case_memstore(void)
{
    mem_store_t s;
    mlc_store_t api;
    mem_init(&s, &api);
    rank_arg_t a[4];
    run_threads(a, 4, 4, &api, NULL, config(NULL, 20));
    for (int r = 0; r < 4; r++) CHECK(a[r].st == MLC_SUCCESS, "rank %d: %s", r, a[r].msg);
    /* The store now holds that communicator's keys: a second one is refused at once. */
    mlc_config_t cfg = config(NULL, 20);
    mlc_comm_t *again = NULL;
    CHECK_ERR_MSG(mlc_comm_init_store(&api, 4, 0, &cfg, &again), MLC_ERR_INVALID_ARG, "already holds key 'mlc/job'");
    /* So is every other rank, on its own, without waiting for anyone (they
     * must not join the earlier communicator's job). */
    for (int r = 1; r < 4; r++) {
        double t0 = boot_now();
        CHECK_ERR_MSG(mlc_comm_init_store(&api, 4, r, &cfg, &again), MLC_ERR_INVALID_ARG, "already holds key 'mlc/rank/");
        CHECK(boot_now() - t0 < 5, "rank %d of the reused store took %.1f s to be refused", r, boot_now() - t0);
    }
    mem_free(&s);
}

/* ---- a store of files in a directory, shared by processes --------------------- */

static void file_of(char *out, size_t len, const char *key)
{
    snprintf(out, len, "%s/store-", dir);
    size_t used = strlen(out);
    for (const char *k = key; *k && used + 1 < len; k++) out[used++] = *k == '/' ? '_' : *k;
    out[used] = '\0';
}

static int file_set(void *ctx, const char *key, const void *value, size_t len)
{
    (void)ctx;
    char path[256], tmp[300];
    file_of(path, sizeof path, key);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    size_t n = fwrite(value, 1, len, f);
    if (fclose(f) != 0 || n != len) return -1;
    return rename(tmp, path) == 0 ? MLC_STORE_OK : -1;
}

static int file_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len, double timeout_s)
{
    (void)ctx;
    char path[256];
    file_of(path, sizeof path, key);
    for (int waited = 0;; waited += 5) {
        FILE *f = fopen(path, "rb");
        if (f) {
            unsigned char all[4096];
            size_t n = fread(all, 1, sizeof all, f);
            fclose(f);
            memcpy(buf, all, n < cap ? n : cap);
            *len = n;
            return MLC_STORE_OK;
        }
        if (timeout_s >= 0 && waited >= timeout_s * 1000) return MLC_STORE_TIMEOUT;
        usleep(5000);
    }
}

static int filestore_rank(int rank, void *arg)
{
    (void)arg;
    mlc_store_t api = {.ctx = NULL, .set = file_set, .get = file_get};
    mlc_config_t cfg = config(NULL, 20);
    mlc_comm_t *comm = NULL;
    CHECK_OK(mlc_comm_init_store(&api, 2, rank, &cfg, &comm));
    if (comm) {
        CHECK_STR(mlc_comm_backend(comm), "shm");
        check_sum(comm);
        mlc_comm_free(comm);
    }
    return failures != 0;
}

static void case_filestore(void)
{
    CHECK(boot_run_children(2, filestore_rank, NULL, 60) == 0, "a rank failed (see above)");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f %s/store-*", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

static void case_storeerr(void)
{
    mem_store_t s;
    mlc_store_t api;
    mem_init(&s, &api);
    s.fail_key = "mlc/rank/1";
    s.fail_code = -5;
    rank_arg_t a[2];
    run_threads(a, 2, 2, &api, NULL, config(NULL, 2));
    /* (its first call on that key is the look whether an earlier communicator left it) */
    CHECK(a[1].st == MLC_ERR_BACKEND && has(a[1].msg, "get('mlc/rank/1', no wait)") && has(a[1].msg, "returned -5"),
          "rank 1 (its calls on its key fail): %s: %s", mlc_status_name(a[1].st), a[1].msg);
    /* Rank 0's get of the same key fails as well: the store said so, not a timeout. */
    CHECK(a[0].st == MLC_ERR_BACKEND && has(a[0].msg, "get('mlc/rank/1')") && has(a[0].msg, "returned -5"),
          "rank 0: %s: %s", mlc_status_name(a[0].st), a[0].msg);
    mem_free(&s);

    mem_init(&s, &api);
    s.fail_key = "mlc/job";
    s.fail_code = 7;
    run_threads(a, 2, 2, &api, NULL, config(NULL, 2));
    for (int r = 0; r < 2; r++)
        CHECK(a[r].st == MLC_ERR_BACKEND && has(a[r].msg, "'mlc/job'") && has(a[r].msg, "returned 7"),
              "rank %d (the store fails on mlc/job): %s: %s", r, mlc_status_name(a[r].st), a[r].msg);
    mem_free(&s);
}

/* ---- two callers claiming one rank -------------------------------------------- *
 * The in-memory store, seen by each caller through its own context, holds the
 * claimants of rank 1 at the worst points: neither writes its record before
 * both found the key free; the second writes only after the first read its
 * own record back, and the first reads it again (after the rendezvous) only
 * once the second has written. Every hold gives up after 10 s (no hang). */
typedef struct claim_race {
    mem_store_t *s;
    int checks;       /* claimants that found mlc/rank/1 free */
    int first;        /* caller index of the first claimant to write, -1 before */
    int first_reads;  /* its reads of mlc/rank/1 */
    bool second_set;  /* the second claimant wrote its record */
} claim_race_t;

typedef struct claim_view {
    claim_race_t *race;
    int who;          /* 0: rank 0; 1, 2: the claimants of rank 1 */
} claim_view_t;

static const char claimed_key[] = "mlc/rank/1";

/* A deadline 10 s from now, for the holds below. */
static struct timespec hold_deadline(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    return until;
}

static int race_set(void *ctx, const char *key, const void *value, size_t len)
{
    claim_view_t *v = ctx;
    claim_race_t *r = v->race;
    if (v->who == 0 || strcmp(key, claimed_key) != 0) return mem_set(r->s, key, value, len);
    pthread_mutex_lock(&r->s->lock);
    struct timespec until = hold_deadline();
    while (r->checks < 2 && pthread_cond_timedwait(&r->s->cond, &r->s->lock, &until) == 0) {
    }
    bool second = r->first >= 0;
    if (!second) r->first = v->who;
    while (second && r->first_reads < 1 && pthread_cond_timedwait(&r->s->cond, &r->s->lock, &until) == 0) {
    }
    pthread_mutex_unlock(&r->s->lock);
    int rc = mem_set(r->s, key, value, len);
    if (second) {
        pthread_mutex_lock(&r->s->lock);
        r->second_set = true;
        pthread_cond_broadcast(&r->s->cond);
        pthread_mutex_unlock(&r->s->lock);
    }
    return rc;
}

static int race_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len, double timeout_s)
{
    claim_view_t *v = ctx;
    claim_race_t *r = v->race;
    bool claimed = v->who > 0 && strcmp(key, claimed_key) == 0;
    if (claimed) {
        pthread_mutex_lock(&r->s->lock);
        /* The first claimant's second read waits for the second claimant's record. */
        struct timespec until = hold_deadline();
        while (r->first == v->who && r->first_reads >= 1 && !r->second_set &&
               pthread_cond_timedwait(&r->s->cond, &r->s->lock, &until) == 0) {
        }
        pthread_mutex_unlock(&r->s->lock);
    }
    int rc = mem_get(r->s, key, buf, cap, len, timeout_s);
    if (claimed) {
        pthread_mutex_lock(&r->s->lock);
        if (rc == MLC_STORE_TIMEOUT && timeout_s == 0) r->checks++;
        if (rc == MLC_STORE_OK && r->first == v->who) r->first_reads++;
        pthread_cond_broadcast(&r->s->cond);
        pthread_mutex_unlock(&r->s->lock);
    }
    return rc;
}

static void case_dupclaim(void)
{
    mem_store_t s;
    mlc_store_t plain;
    mem_init(&s, &plain);
    claim_race_t race = {.s = &s, .first = -1};
    claim_view_t views[3];
    mlc_store_t api[3];
    rank_arg_t a[3];
    pthread_t th[3];
    for (int w = 0; w < 3; w++) {
        views[w] = (claim_view_t){&race, w};
        api[w] = (mlc_store_t){.ctx = &views[w], .set = race_set, .get = race_get};
        a[w] = (rank_arg_t){.rank = w ? 1 : 0, .nranks = 2, .store = &api[w], .cfg = config(NULL, 5)};
        pthread_create(&th[w], NULL, rank_thread, &a[w]);
    }
    for (int w = 0; w < 3; w++) pthread_join(th[w], NULL);
    CHECK(race.first > 0 && race.second_set, "the race was not staged (first %d, second wrote %d)", race.first,
          race.second_set);
    int first = race.first, second = 3 - race.first;
    CHECK(a[first].st == MLC_ERR_INVALID_ARG && has(a[first].msg, "rank 1"),
          "the claimant of rank 1 whose record was overwritten: %s: %s", mlc_status_name(a[first].st), a[first].msg);
    CHECK(a[second].st == MLC_SUCCESS, "the claimant of rank 1 whose record stands: %s: %s",
          mlc_status_name(a[second].st), a[second].msg);
    CHECK(a[0].st == MLC_SUCCESS, "rank 0: %s: %s", mlc_status_name(a[0].st), a[0].msg);
    mem_free(&s);
}

static void case_missing(void)
{
    mem_store_t s;
    mlc_store_t api;
    mem_init(&s, &api);
    rank_arg_t a[4];
    run_threads(a, 3, 4, &api, NULL, config(NULL, 2));
    for (int r = 0; r < 3; r++)
        CHECK(a[r].st == MLC_ERR_TIMEOUT && has(a[r].msg, "1 of 4 ranks to join: rank 3"),
              "rank %d (rank 3 never joins the store): %s: %s", r, mlc_status_name(a[r].st), a[r].msg);
    mem_free(&s);

    mlc_unique_id_t id;
    CHECK_OK(mlc_get_unique_id(&id));
    run_threads(a, 3, 4, NULL, &id, config(NULL, 2));
    for (int r = 0; r < 3; r++)
        CHECK(a[r].st == MLC_ERR_TIMEOUT && has(a[r].msg, "1 of 4 ranks to join: rank 3"),
              "rank %d (rank 3 never joins the id): %s: %s", r, mlc_status_name(a[r].st), a[r].msg);
}

static void case_baduid(void)
{
    mlc_config_t cfg = config(NULL, 2);
    mlc_comm_t *comm = NULL;
    /* An id whose listener is gone (its process exited): a timeout naming the address.
     * First, so that the fork happens before this process has threads. */
    char path[128];
    id_path(path, sizeof path, 9);
    pid_t maker = fork();
    if (maker == 0) {
        mlc_unique_id_t gone;
        _exit(mlc_get_unique_id(&gone) != MLC_SUCCESS || boot_write_id(path, &gone) != 0);
    }
    int status = 0;
    waitpid(maker, &status, 0);
    mlc_unique_id_t gone;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && boot_read_id(path, &gone, 5) == 0, "no id from %s", path);
    const char *at = strchr(gone.internal, '@');
    char where[80] = "?";
    if (at) snprintf(where, sizeof where, "%.*s", (int)strcspn(at + 1, "#"), at + 1);
    CHECK_ERR_MSG(mlc_comm_init_rank(&gone, 2, 1, &cfg, &comm), MLC_ERR_TIMEOUT,
                  "could not reach the bootstrap listener");
    CHECK_MSG(where);
    unlink(path);


    mlc_unique_id_t id, bad;
    CHECK_OK(mlc_get_unique_id(&id));
    CHECK(strlen(id.internal) < sizeof id.internal && sizeof id == MLC_UNIQUE_ID_BYTES, "id: %s", id.internal);

    memset(&bad, 0, sizeof bad);
    CHECK_ERR_MSG(mlc_comm_init_rank(&bad, 1, 0, &cfg, &comm), MLC_ERR_INVALID_ARG, "unique id");
    for (size_t i = 0; i < sizeof bad; i++) bad.internal[i] = (char)(i * 37 + 11);
    CHECK_ERR_MSG(mlc_comm_init_rank(&bad, 1, 0, &cfg, &comm), MLC_ERR_INVALID_ARG, "unique id");
    /* One character changed anywhere: the checksum tells. */
    size_t n = strlen(id.internal);
    for (size_t i = 0; i < n; i += 7) {
        bad = id;
        bad.internal[i] = bad.internal[i] == '1' ? '2' : '1';
        CHECK_ERR_MSG(mlc_comm_init_rank(&bad, 1, 0, &cfg, &comm), MLC_ERR_INVALID_ARG, "unique id");
    }
    bad = id;
    bad.internal[n - 3] = '\0'; /* cut short */
    CHECK_ERR_MSG(mlc_comm_init_rank(&bad, 1, 0, &cfg, &comm), MLC_ERR_INVALID_ARG, "checksum");
    CHECK(comm == NULL, "a failed init wrote its output");

    /* Two ranks that disagree on nranks. */
    rank_arg_t a[2];
    CHECK_OK(mlc_get_unique_id(&id));
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        a[r] = (rank_arg_t){.rank = r, .nranks = 2 + r, .id = &id, .cfg = cfg};
        pthread_create(&th[r], NULL, rank_thread, &a[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    int mismatches = 0;
    for (int r = 0; r < 2; r++) mismatches += a[r].st == MLC_ERR_MISMATCH && has(a[r].msg, "nranks");
    CHECK(mismatches >= 1, "nranks 2 and 3: %s (%s) / %s (%s)", mlc_status_name(a[0].st), a[0].msg,
          mlc_status_name(a[1].st), a[1].msg);
    for (int r = 0; r < 2; r++) CHECK(a[r].st != MLC_SUCCESS, "rank %d joined despite nranks differing", r);

    /* MLC_BOOTSTRAP_ADDR: the address the id carries; a malformed one is a CONFIG error naming it. */
    setenv("MLC_BOOTSTRAP_ADDR", "127.0.0.1", 1);
    CHECK_OK(mlc_get_unique_id(&id));
    CHECK(strstr(id.internal, "@127.0.0.1:") != NULL, "MLC_BOOTSTRAP_ADDR=127.0.0.1 made %s", id.internal);
    CHECK_OK(mlc_comm_init_rank(&id, 1, 0, &cfg, &comm));
    if (comm) mlc_comm_free(comm);
    setenv("MLC_BOOTSTRAP_ADDR", "127.0.0.1:99999", 1);
    CHECK_ERR_MSG(mlc_get_unique_id(&id), MLC_ERR_CONFIG, "MLC_BOOTSTRAP_ADDR");
    unsetenv("MLC_BOOTSTRAP_ADDR");
}

static int nccl_rank(int rank, void *arg)
{
    (void)arg;
    setenv("MLC_HOST_ID", rank < 2 ? "hostA" : "hostB", 1);
    char path[128];
    id_path(path, sizeof path, 0);
    mlc_unique_id_t id;
    CHECK(boot_read_id(path, &id, 30) == 0, "rank %d could not read %s", rank, path);
    mlc_config_t cfg = config("nccl", 3);
    cfg.memory = MLC_MEMORY_CUDA;
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init_rank(&id, 4, rank, &cfg, &comm);
    CHECK(st == MLC_ERR_TIMEOUT && !has(mlc_last_error(), "store") && !has(mlc_last_error(), "mlc_comm_init_rank"),
          "rank %d: expected NCCL's init to time out after the bootstrap, got %s: %s", rank, mlc_status_name(st),
          mlc_last_error());
    if (comm) mlc_comm_free(comm);
    void *lib = dlopen(getenv("MLC_NCCL_LIB"), RTLD_NOW | RTLD_NOLOAD);
    const char *nccl_id = lib ? dlsym(lib, "fake_nccl_last_id") : NULL;
    CHECK(nccl_id && strncmp(nccl_id, "fake-nccl-id-", 13) == 0, "rank %d: NCCL got no id from rank 0", rank);
    char mine[128];
    snprintf(mine, sizeof mine, "%s/nccl-id-%d", dir, rank);
    FILE *f = fopen(mine, "w");
    if (f && nccl_id) fprintf(f, "%.127s", nccl_id);
    if (f) fclose(f);
    return failures != 0;
}

static void case_nccl(void)
{
    if (!getenv("MLC_NCCL_LIB") || !getenv("MLC_CUDART_LIB")) {
        printf("SKIP: MLC_NCCL_LIB and MLC_CUDART_LIB must name the test doubles\n");
        exit(77);
    }
    pid_t ranks = fork();
    if (ranks == 0) _exit(boot_run_children(4, nccl_rank, NULL, 120) != 0);
    mlc_unique_id_t id;
    char path[128];
    CHECK_OK(mlc_get_unique_id(&id));
    id_path(path, sizeof path, 0);
    CHECK(boot_write_id(path, &id) == 0, "writing %s", path);
    int status = 0;
    waitpid(ranks, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed (see above)");
    char first[128] = "";
    for (int r = 0; r < 4; r++) {
        char file[128], got[128] = "";
        snprintf(file, sizeof file, "%s/nccl-id-%d", dir, r);
        FILE *f = fopen(file, "r");
        if (f) {
            if (!fgets(got, sizeof got, f)) got[0] = '\0';
            fclose(f);
        }
        unlink(file);
        if (r == 0) snprintf(first, sizeof first, "%s", got);
        CHECK(got[0] && strcmp(got, first) == 0, "rank %d's NCCL id '%s' differs from rank 0's '%s'", r, got, first);
    }
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"hosts", case_hosts},       {"memstore", case_memstore}, {"filestore", case_filestore},
                 {"storeerr", case_storeerr}, {"missing", case_missing},   {"baduid", case_baduid},
                 {"dupclaim", case_dupclaim},
                 {"nccl", case_nccl}};
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "/tmp/mlc-boot-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    int found = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            found = 1;
            cases[i].run();
        }
    for (int round = 0; round < 3; round++) {
        char path[128];
        id_path(path, sizeof path, round);
        unlink(path);
    }
    rmdir(dir);
    if (!found) {
        fprintf(stderr, "unknown case '%s'\n", argv[1]);
        return 2;
    }
    if (failures) fprintf(stderr, "bootstrap.%s: %d check(s) failed\n", argv[1], (int)failures);
    else printf("bootstrap.%s: all checks passed\n", argv[1]);
    return failures != 0;
}
