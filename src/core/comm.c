/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator lifetime: init (env, backend choice, agreement check), split, free, abort. */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/random.h>
#include "algos/select.h"
#include "devrt/gpurt.h"
#include "backend.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "cost_model.h"
#include "profile.h"

void mlc_comm_free_requests(mlc_comm_t *comm); /* request.c */

mlc_comm_t *mlc_comm_alloc(void)
{
    mlc_comm_t *c = calloc(1, sizeof(mlc_comm_t));
    if (c) {
        c->model = mlc_cost_model_default; /* until rank 0's measurement arrives */
        c->gpu_kind = c->gpu_device = -1; /* host memory, until a GPU backend or the staged wrapper says */
    }
    return c;
}

static void (*key_release[MLC_COMM_KEYS])(void *);
static atomic_int keys_used;

int mlc_comm_key_create(void (*release)(void *value))
{
    int key = atomic_fetch_add(&keys_used, 1);
    if (key >= MLC_COMM_KEYS) return -1;
    key_release[key] = release;
    return key;
}

void *mlc_comm_value(const mlc_comm_t *comm, int key)
{
    return key >= 0 && key < MLC_COMM_KEYS ? comm->layer_values[key] : NULL;
}

void mlc_comm_set_value(mlc_comm_t *comm, int key, void *value)
{
    if (key >= 0 && key < MLC_COMM_KEYS) comm->layer_values[key] = value;
}

void mlc_comm_release(mlc_comm_t *comm)
{
    if (!comm) return;
    mlc_prof_close(comm);
    mlc_comm_free_requests(comm);
    mlc_scratch_drain(&comm->host_scratch); /* the backend is gone, and every executor with it */
    /* Last: a decorator's value may hold the table comm->be points to. */
    for (int k = 0; k < MLC_COMM_KEYS; k++)
        if (comm->layer_values[k] && key_release[k]) key_release[k](comm->layer_values[k]);
    free(comm->world_ranks);
    free(comm);
}

/* A split communicator's failure names its own ranks: say which world ranks
 * they are (up to WORLD_RANKS_NAMED of them). */
#define WORLD_RANKS_NAMED 16
static void note_world_ranks(const mlc_comm_t *comm, char *msg, size_t len)
{
    if (!comm->world_ranks) return;
    size_t used = strlen(msg);
    int k = snprintf(msg + used, len - used, " (ranks of a communicator made by mlc_comm_split; its ranks 0..%d "
                     "are world ranks ", comm->size - 1);
    for (int i = 0; i < comm->size && i < WORLD_RANKS_NAMED; i++) {
        if (k < 0 || (used += (size_t)k) >= len) return;
        k = snprintf(msg + used, len - used, "%s%d", i ? ", " : "", comm->world_ranks[i]);
    }
    if (k < 0 || (used += (size_t)k) >= len) return;
    snprintf(msg + used, len - used, "%s)", comm->size > WORLD_RANKS_NAMED ? ", ..." : "");
}

mlc_status_t mlc_comm_fail(mlc_comm_t *comm, mlc_status_t st, const char *fmt, ...)
{
    char msg[sizeof comm->fail_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    note_world_ranks(comm, msg, sizeof msg);
    /* First failure wins; its message is written before the flag is published. */
    int unclaimed = 0;
    if (atomic_compare_exchange_strong(&comm->fail_claim, &unclaimed, 1)) {
        memcpy(comm->fail_msg, msg, sizeof msg);
        atomic_store(&comm->failed, (int)st);
        MLC_WARN("%s", msg);
        return st;
    }
    /* Another thread is publishing its failure: it is a few stores away. */
    int now;
    while ((now = atomic_load(&comm->failed)) == 0) sched_yield();
    return (mlc_status_t)now;
}

mlc_status_t mlc_comm_check(const mlc_comm_t *comm)
{
    int failed = atomic_load(&((mlc_comm_t *)comm)->failed);
    if (!failed) return MLC_SUCCESS;
    return mlc_error((mlc_status_t)failed, "communicator has failed earlier: %s", comm->fail_msg);
}

/* Is `name` one of the algorithms the backend can run for coll? */
static bool algo_known(const mlc_backend_t *be, mlc_coll_t coll, const char *name)
{
    if (strcmp(name, "native") == 0) return be->algos == NULL || be->algos(coll) == NULL ||
                                              be->algos(coll)[0] == NULL ||
                                              strcmp(be->algos(coll)[0], "native") == 0;
    if (!be->algos) return false;
    const char *const *list = be->algos(coll);
    for (; list && *list; list++)
        if (strcmp(*list, name) == 0) return true;
    return false;
}

static const char *coll_env_suffix(mlc_coll_t coll)
{
    static const char *const names[] = {
#define MLC_X_NAME(name, str, env) env,
        MLC_COLL_LIST(MLC_X_NAME)
#undef MLC_X_NAME
    };
    return names[coll];
}

/* Which collectives ask the selector per call: those with an algorithm of
 * our own first in the backend's list, and, where the backend chooses
 * itself (choose_algo), those with more than "native" in it that it says it
 * chooses for. Asked once per backend table, not per call: the others pay
 * nothing on the 8-byte path (docs/MPI.md "Overhead"). */
static void note_algo_selection(mlc_comm_t *c)
{
    const mlc_backend_t *be = c->be;
    for (mlc_coll_t k = 0; k < MLC_COLL_COUNT; k++) {
        const char *const *list = be->algos ? be->algos(k) : NULL;
        bool own_first = list && list[0] && strcmp(list[0], "native") != 0;
        bool chosen = list && list[0] && list[1] && be->choose_algo && (!be->chooses || be->chooses(k));
        c->algo_selects[k] = own_first || chosen;
    }
}

static mlc_status_t setup(mlc_comm_t *c, const mlc_cfg_t *cfg, const mlc_backend_t *be)
{
    c->cfg = *cfg;
    c->be = be;
    note_algo_selection(c);
    return MLC_SUCCESS;
}

/*
 * Install the MLC_ALGO_<COLL> overrides. Only after the ranks agree on them:
 * until then every collective runs the selector's choice, which depends on
 * nothing a rank's settings can change, so init's own exchanges always pair.
 */
static mlc_status_t force_algos(mlc_comm_t *c)
{
    for (mlc_coll_t k = 0; k < MLC_COLL_COUNT; k++) {
        const char *name = c->cfg.algo[k];
        if (!name[0]) continue;
        if (!algo_known(c->be, k, name))
            return mlc_error(MLC_ERR_CONFIG, "MLC_ALGO_%s=%s: backend '%s' has no such %s algorithm "
                             "(mlcomm-info --algos lists them)",
                             coll_env_suffix(k), name, c->be->name, mlc_coll_name(k));
        c->algo_forced[k] = c->cfg.algo[k];
    }
    return MLC_SUCCESS;
}

/*
 * Every rank must run with the same collective-relevant settings
 * (mlc_config_hash). One allgather of 8-byte hashes, with no algorithm
 * forced yet; only when some differ, rank 0's and the first differing rank's
 * settings are broadcast so that every rank names the same variable, the
 * two values and the ranks that differ, and fails with MLC_ERR_MISMATCH.
 */
static mlc_status_t check_agreement(mlc_comm_t *c)
{
    if (c->size == 1) return MLC_SUCCESS;
    int p = c->size;
    uint64_t mine = mlc_config_hash(&c->cfg), *all = malloc(sizeof *all * (size_t)p);
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_init: out of memory (%d ranks)", p);
    mlc_status_t st = mlc_allgather(&mine, all, 1, MLC_UINT64, c, NULL);
    int first = -1, ndiff = 0;
    char ranks[128] = "";
    for (int r = 1; st == MLC_SUCCESS && r < p; r++) {
        if (all[r] == all[0]) continue;
        if (first < 0) first = r;
        size_t used = strlen(ranks);
        if (ndiff++ < 8) snprintf(ranks + used, sizeof ranks - used, "%s%d", ndiff > 1 ? ", " : "", r);
    }
    free(all);
    if (st != MLC_SUCCESS || first < 0) return st;
    mlc_cfg_t base = c->cfg, other = c->cfg;
    st = mlc_broadcast(&c->cfg, &base, sizeof base, MLC_UINT8, 0, c, NULL);
    if (st == MLC_SUCCESS) st = mlc_broadcast(&c->cfg, &other, sizeof other, MLC_UINT8, first, c, NULL);
    if (st != MLC_SUCCESS) return st;
    char v0[64] = "", v1[64] = "";
    const char *var = mlc_config_diff_text(&base, &other, v0, v1, sizeof v0);
    if (ndiff > 8) {
        size_t used = strlen(ranks);
        snprintf(ranks + used, sizeof ranks - used, " and %d more", ndiff - 8);
    }
    return mlc_error(MLC_ERR_MISMATCH, "%s differs: rank 0 %s, rank %d %s (ranks differing from rank 0: %s); "
                     "every rank must use the same value", var ? var : "a collective setting", v0, first, v1,
                     ranks);
}

mlc_status_t mlc_comm_agree_settings(mlc_comm_t *c)
{
    const char *forced[MLC_COLL_COUNT];
    memcpy(forced, c->algo_forced, sizeof forced);
    memset(c->algo_forced, 0, sizeof c->algo_forced); /* the exchange itself runs unforced */
    uint64_t seq = c->coll_seq;
    int outer = mlc_comm_own_begin(c, MLC_COMM_CALL_SETTINGS);
    mlc_status_t st = check_agreement(c);
    mlc_comm_own_end(c, outer);
    c->seq_base += c->coll_seq - seq; /* call numbers never repeat (signature.h) */
    c->coll_seq = seq;
    memcpy(c->algo_forced, forced, sizeof forced);
    return st;
}

void mlc_random_hex(char *out, size_t nbytes)
{
    unsigned char raw[32];
    if (nbytes > sizeof raw) nbytes = sizeof raw;
    if (getrandom(raw, nbytes, 0) != (ssize_t)nbytes) {
        /* getrandom cannot fail for small sizes after boot; fall back to time + address. */
        uint64_t x = (uint64_t)(mlc_now() * 1e9) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < nbytes; i++) raw[i] = (unsigned char)(x >> (8 * (i % 8)));
    }
    for (size_t i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", raw[i]);
}

/* be == NULL: choose the backend from cfg. */
static mlc_status_t create(const mlc_cfg_t *cfg, const mlc_boot_t *boot, const mlc_backend_t *be,
                           mlc_comm_t **out)
{
    mlc_status_t st = be ? MLC_SUCCESS : mlc_backend_select(cfg, &be);
    if (st != MLC_SUCCESS) return st;
    mlc_comm_t *c = mlc_comm_alloc();
    if (!c) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_init: out of memory");
    c->rank = boot->rank;
    c->size = boot->size;
    st = setup(c, cfg, be);
    if (st != MLC_SUCCESS) goto fail;
    st = be->init(c, boot);
    if (st != MLC_SUCCESS) goto fail;
    note_algo_selection(c); /* init may have put a loaded module's table in c->be */
    int outer = mlc_comm_own_begin(c, MLC_COMM_CALL_INIT);
    st = check_agreement(c);
    if (st == MLC_SUCCESS) st = force_algos(c);
    if (st == MLC_SUCCESS) st = mlc_model_agree(c);
    if (st == MLC_SUCCESS) st = mlc_decorate(c);
    mlc_comm_own_end(c, outer);
    c->seq_base += c->coll_seq; /* signatures keep counting (src/core/signature.h) */
    c->coll_seq = 0; /* init's own collectives are complete: the user's first is #0 */
    if (st == MLC_SUCCESS) st = mlc_prof_open(c, NULL, 0);
    if (st != MLC_SUCCESS) {
        c->be->destroy(c);
        goto fail;
    }
    MLC_INFO("rank %d/%d: communicator ready on backend '%s' (job %s, timeout %g s); %s",
             c->rank, c->size, be->name, cfg->job_id, cfg->timeout_s,
             cfg->rank_origin);
    *out = c;
    return MLC_SUCCESS;
fail:
    mlc_comm_release(c);
    return st;
}

mlc_status_t mlc_comm_create_boot(const mlc_cfg_t *cfg, const mlc_boot_t *boot, const mlc_backend_t *be,
                                  mlc_comm_t **out)
{
    return create(cfg, boot, be, out);
}

mlc_status_t mlc_comm_init(const mlc_config_t *cfg_in, mlc_comm_t **out)
{
    mlc_error_clear();
    if (!out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init: comm (output) is NULL");
    mlc_cfg_t cfg;
    mlc_status_t st = mlc_config_resolve(cfg_in, &cfg);
    if (st != MLC_SUCCESS) return mlc_error_in("mlc_comm_init", st);
    mlc_log_configure(cfg.log_level, cfg.log_file);
    const mlc_backend_t *be;
    st = mlc_backend_select(&cfg, &be);
    if (st != MLC_SUCCESS) return st;
    if (!cfg.job_id[0]) {
        /* Only shm names shared objects after the job; MPI (e.g. MPICH's Hydra,
         * which sets no job id) and the others need none agreed across ranks. */
        if (cfg.world_size > 1 && be->host_shared)
            return mlc_error(MLC_ERR_CONFIG, "rank %d of %d: no job id: set MLC_JOB_ID to the same value "
                             "on every rank (mlcomm-run does this)", cfg.rank, cfg.world_size);
        mlc_random_hex(cfg.job_id, 8);
    }
    mlc_boot_t boot = {.rank = cfg.rank, .size = cfg.world_size, .local_rank = cfg.local_rank,
                       .local_size = cfg.local_size, .job_id = cfg.job_id};
    return create(&cfg, &boot, be, out);
}

mlc_status_t mlc_comm_create_with(const mlc_backend_t *be, const mlc_config_t *cfg_in, const mlc_boot_t *boot_in,
                                  mlc_comm_t **out)
{
    mlc_error_clear();
    if (!be || !boot_in || !out)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_create_with: %s is NULL", !be ? "be" : !boot_in ? "boot" : "out");
    if (boot_in->size < 1 || boot_in->rank < 0 || boot_in->rank >= boot_in->size)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_create_with: rank %d of %d is out of range", boot_in->rank,
                         boot_in->size);
    mlc_cfg_t cfg;
    mlc_status_t st = mlc_config_resolve(cfg_in, &cfg);
    if (st != MLC_SUCCESS) return mlc_error_in("mlc_comm_create_with", st);
    mlc_log_configure(cfg.log_level, cfg.log_file);
    /* Rank and size come from whoever handed the communicator over, not the environment. */
    snprintf(cfg.backend, sizeof cfg.backend, "%s", be->name);
    cfg.rank = boot_in->rank;
    cfg.world_size = boot_in->size;
    cfg.local_rank = boot_in->local_rank;
    cfg.local_size = boot_in->local_size;
    cfg.rank_source = "handed over";
    snprintf(cfg.rank_origin, sizeof cfg.rank_origin, "rank and size from mlc_comm_create_with's caller");
    if (boot_in->job_id && boot_in->job_id[0]) snprintf(cfg.job_id, sizeof cfg.job_id, "%s", boot_in->job_id);
    else if (!cfg.job_id[0]) mlc_random_hex(cfg.job_id, 8);
    mlc_boot_t boot = *boot_in;
    boot.job_id = cfg.job_id;
    return create(&cfg, &boot, be, out);
}

mlc_status_t mlc_comm_init_all(int n, const mlc_config_t *cfg_in, mlc_comm_t **comms)
{
    mlc_error_clear();
    if (!comms) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_all: comms is NULL");
    if (n < 1) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_all: n = %d, need at least 1", n);
    mlc_cfg_t cfg;
    mlc_status_t st = mlc_config_resolve_given_ranks(cfg_in, &cfg);
    if (st != MLC_SUCCESS) return mlc_error_in("mlc_comm_init_all", st);
    mlc_log_configure(cfg.log_level, cfg.log_file);
    if (cfg_in && cfg_in->backend && strcmp(cfg_in->backend, "threads") != 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_all creates threads ranks; backend '%s' "
                         "was asked for", cfg_in->backend);
    snprintf(cfg.backend, sizeof cfg.backend, "threads");
    cfg.world_size = cfg.local_size = n;
    cfg.rank_source = "mlc_comm_init_all";
    snprintf(cfg.rank_origin, sizeof cfg.rank_origin, "rank and size: threads of mlc_comm_init_all");
    mlc_random_hex(cfg.job_id, 8);
    const mlc_backend_t *be = mlc_backend_find("threads");
    if (!be) return mlc_error(MLC_ERR_UNAVAILABLE, "mlc_comm_init_all: backend 'threads' is not usable");
    for (int i = 0; i < n; i++) comms[i] = NULL;
    for (int i = 0; i < n; i++) {
        mlc_comm_t *c = mlc_comm_alloc();
        if (!c) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_init_all: out of memory");
            goto fail;
        }
        comms[i] = c;
        c->rank = cfg.rank = cfg.local_rank = i;
        c->size = n;
        st = setup(c, &cfg, be);
        if (st == MLC_SUCCESS) st = force_algos(c); /* one configuration for every rank */
        if (st == MLC_SUCCESS) st = mlc_prof_open(c, NULL, 0);
        if (st != MLC_SUCCESS) goto fail;
    }
    st = be->init_all(n, comms);
    if (st != MLC_SUCCESS) goto fail;
    /* One process: rank 0's model is every rank's, no communication needed. */
    comms[0]->size = 1;
    st = mlc_model_agree(comms[0]);
    comms[0]->size = n;
    if (st != MLC_SUCCESS) goto fail;
    for (int i = 1; i < n; i++) comms[i]->model = comms[0]->model;
    st = mlc_decorate_local(n, comms);
    if (st != MLC_SUCCESS) {
        for (int i = 0; i < n; i++) comms[i]->be->destroy(comms[i]);
        goto fail;
    }
    return MLC_SUCCESS;
fail:
    for (int i = 0; i < n; i++) {
        mlc_comm_release(comms[i]);
        comms[i] = NULL;
    }
    return st;
}

int mlc_comm_rank(const mlc_comm_t *comm) { return comm ? comm->rank : -1; }
int mlc_comm_size(const mlc_comm_t *comm) { return comm ? comm->size : -1; }
const char *mlc_comm_backend(const mlc_comm_t *comm) { return comm ? comm->be->name : NULL; }
double mlc_comm_timeout(const mlc_comm_t *comm) { return comm ? comm->cfg.timeout_s : -1.0; }

mlc_memory_kind_t mlc_comm_memory(const mlc_comm_t *comm)
{
    if (!comm || comm->gpu_kind < 0) return MLC_MEMORY_KIND_HOST;
    return comm->gpu_kind == MLC_GPU_HIP ? MLC_MEMORY_KIND_ROCM : MLC_MEMORY_KIND_CUDA;
}

int mlc_comm_device(const mlc_comm_t *comm) { return comm && comm->gpu_kind >= 0 ? comm->gpu_device : -1; }
mlc_status_t mlc_comm_status(const mlc_comm_t *comm)
{
    if (!comm) return MLC_ERR_INVALID_ARG;
    mlc_comm_t *c = (mlc_comm_t *)comm;
    /* A failure another member posted (its abort, a death or mismatch it
     * found) counts before this rank's next call would find it; peers are
     * not probed. */
    if (!atomic_load(&c->failed) && c->be && c->be->posted_failure) c->be->posted_failure(c);
    return (mlc_status_t)atomic_load(&c->failed);
}

typedef struct split_entry {
    int32_t color, key;
} split_entry_t;

const char *mlc_comm_call_name(int call)
{
#define MLC_COMM_CALL_NAME(id, name) name,
    static const char *const names[] = {MLC_COMM_CALLS(MLC_COMM_CALL_NAME)};
#undef MLC_COMM_CALL_NAME
    return call >= 0 && call < MLC_COMM_CALL_COUNT ? names[call] : "a communicator call";
}

mlc_status_t mlc_comm_split(mlc_comm_t *comm, int color, int key, mlc_comm_t **out)
{
    mlc_error_clear();
    if (!comm || !out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_split: %s is NULL", comm ? "out" : "comm");
    if (color < 0 && color != MLC_UNDEFINED)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_split: color %d is negative (use MLC_UNDEFINED)", color);
    mlc_status_t st = mlc_comm_check(comm);
    if (st != MLC_SUCCESS) return mlc_error_in("mlc_comm_split", st);
    int p = comm->size;
    split_entry_t mine = {color, key};
    split_entry_t *all = malloc(sizeof *all * (size_t)p);
    int *members = malloc(sizeof *members * (size_t)p);
    if (!all || !members) {
        st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_split: out of memory");
        goto out;
    }
    int outer = mlc_comm_own_begin(comm, MLC_COMM_CALL_SPLIT);
    st = mlc_allgather(&mine, all, 2, MLC_INT32, comm, NULL);
    mlc_comm_own_end(comm, outer);
    if (st != MLC_SUCCESS) goto out;
    /* Members of my colour, ordered by (key, parent rank): insertion sort, p is small. */
    int n = 0, newrank = -1;
    if (color != MLC_UNDEFINED) {
        for (int r = 0; r < p; r++) {
            if (all[r].color != color) continue;
            int i = n++;
            while (i > 0 && all[members[i - 1]].key > all[r].key) {
                members[i] = members[i - 1];
                i--;
            }
            members[i] = r;
        }
        for (int i = 0; i < n; i++)
            if (members[i] == comm->rank) newrank = i;
    }
    mlc_comm_t *child = NULL;
    if (color != MLC_UNDEFINED) {
        child = mlc_comm_alloc();
        if (!child) {
            st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_split: out of memory");
            goto out; /* peers will time out in the backend's split: nothing better to do */
        }
        child->rank = newrank;
        child->size = n;
        child->world_ranks = malloc(sizeof *child->world_ranks * (size_t)n);
        if (!child->world_ranks) {
            mlc_comm_release(child);
            st = mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_split: out of memory");
            goto out;
        }
        for (int i = 0; i < n; i++)
            child->world_ranks[i] = comm->world_ranks ? comm->world_ranks[members[i]] : members[i];
        child->cfg = comm->cfg;
        child->be = comm->be;
        memcpy(child->algo_forced, comm->algo_forced, sizeof child->algo_forced);
        memcpy(child->algo_selects, comm->algo_selects, sizeof child->algo_selects);
        for (int k = 0; k < MLC_COLL_COUNT; k++)
            if (child->algo_forced[k]) child->algo_forced[k] = child->cfg.algo[k];
        child->model = comm->model;
    }
    outer = mlc_comm_own_begin(comm, MLC_COMM_CALL_SPLIT);
    st = comm->be->split(comm, color, key, members, n, child);
    mlc_comm_own_end(comm, outer);
    if (st == MLC_SUCCESS && child) st = mlc_prof_open(child, comm, color);
    if (st != MLC_SUCCESS) {
        if (child && child->impl) comm->be->destroy(child);
        mlc_comm_release(child);
        goto out;
    }
    *out = child;
out:
    free(all);
    free(members);
    return st;
}

/* The sticky error of a freed communicator, unless it had failed before (its
 * calls keep failing with that); quietly, unlike mlc_comm_fail. */
static void mark_freed(mlc_comm_t *comm)
{
    int unclaimed = 0;
    if (!atomic_compare_exchange_strong(&comm->fail_claim, &unclaimed, 1)) return;
    snprintf(comm->fail_msg, sizeof comm->fail_msg,
             "rank %d freed this communicator (mlc_comm_free): its handle may not be used any more", comm->rank);
    atomic_store(&comm->failed, (int)MLC_ERR_INVALID_ARG);
}

mlc_status_t mlc_comm_free(mlc_comm_t *comm)
{
    mlc_error_clear();
    if (!comm) return MLC_SUCCESS;
    /* A request still holds the handle: freeing it again would tear the
     * backend down twice. */
    if (comm->freed)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_free: rank %d already freed this communicator", comm->rank);
    if (comm->group_ops > 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_free: %d operation%s of an open group (mlc_group_start) "
                         "use%s this communicator: call mlc_group_end first", comm->group_ops,
                         comm->group_ops == 1 ? "" : "s", comm->group_ops == 1 ? "s" : "");
    comm->be->destroy(comm);
    /* Handles the user still holds stay valid (they end ABORTED); the object
     * goes with the last of them (mlc_request_release). Until then a call
     * on it fails like one on a failed communicator, before it reaches the
     * backend that is gone (after that the memory is gone, as after free()). */
    mark_freed(comm);
    mlc_prof_close(comm);
    if (mlc_request_orphan_all(comm)) mlc_comm_release(comm);
    return MLC_SUCCESS;
}

mlc_status_t mlc_comm_abort(mlc_comm_t *comm)
{
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_abort: comm is NULL");
    mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d called mlc_comm_abort", comm->rank);
    comm->be->abort(comm);
    return MLC_SUCCESS;
}

mlc_status_t mlc_comm_set_algo(mlc_comm_t *comm, mlc_coll_t coll, const char *algo)
{
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_algo: comm is NULL");
    if (coll < 0 || coll >= MLC_COLL_COUNT)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_algo: unknown collective %d", (int)coll);
    if (!algo || strcmp(algo, "auto") == 0 || !algo[0]) {
        comm->algo_forced[coll] = NULL;
        comm->cfg.algo[coll][0] = '\0';
        return MLC_SUCCESS;
    }
    if (!algo_known(comm->be, coll, algo))
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_algo: backend '%s' has no %s algorithm '%s'",
                         comm->be->name, mlc_coll_name(coll), algo);
    snprintf(comm->cfg.algo[coll], sizeof comm->cfg.algo[coll], "%s", algo);
    comm->algo_forced[coll] = comm->cfg.algo[coll];
    return MLC_SUCCESS;
}

mlc_status_t mlc_comm_set_timeout(mlc_comm_t *comm, double seconds)
{
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_timeout: comm is NULL");
    long long most = mlc_env_vars[MLC_ENV_TIMEOUT].hi; /* MLC_TIMEOUT's range */
    if (!isfinite(seconds) || seconds < 0 || seconds > (double)most)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_timeout: %g seconds (need 0..%lld; 0 = never)", seconds,
                         most);
    if (seconds > 0 && comm->timeout_refused)
        return mlc_error(MLC_ERR_UNSUPPORTED, "mlc_comm_set_timeout(%g): %s", seconds, comm->timeout_refused);
    comm->cfg.timeout_s = seconds;
    return MLC_SUCCESS;
}

mlc_status_t mlc_comm_set_stream(mlc_comm_t *comm, void *stream)
{
    mlc_error_clear();
    if (!comm) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_set_stream: comm is NULL");
    if (!comm->be->set_stream)
        return mlc_error(MLC_ERR_UNSUPPORTED, "mlc_comm_set_stream: backend '%s' has no streams (on a "
                         "communicator of memory kind cuda/rocm/auto it orders the staging copies)",
                         comm->be->name);
    return comm->be->set_stream(comm, stream);
}

int mlc_comm_tag_max(const mlc_comm_t *comm)
{
    if (!comm) return -1;
    return comm->be->tag_max ? comm->be->tag_max((mlc_comm_t *)comm) : MLC_TAG_MAX_DEFAULT;
}
