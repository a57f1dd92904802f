/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups (mlc_group_start / mlc_group_end), as ncclGroupStart/End: the
 * calling thread's operations between them progress together and complete
 * by mlc_group_end. State is per thread, nesting is counted.
 *
 * Each call in an open group starts as a nonblocking operation (a blocking
 * form gets a request that the group owns); host backends move it at once.
 * A backend that must issue a group as one (nccl: one NCCL group) defers its
 * grouped operations and has a group_end hook, called once per hook with
 * every communicator of the group that uses it. mlc_group_end then waits
 * for the blocking forms with the shared wait loop over every communicator
 * involved (MLC_TIMEOUT: no progress for that long); request forms complete
 * when their requests do.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "base/error.h"
#include "base/log.h"
#include "base/wait.h"

typedef struct group_op {
    mlc_request_t *req;
    bool owned; /* blocking form: the group waits for it and releases it */
} group_op_t;

typedef struct group_state {
    int depth;
    group_op_t *ops;
    size_t n, cap;
} group_state_t;

static _Thread_local group_state_t g;

/* Threads with an open group: the common path (none) costs one relaxed load. */
atomic_int mlc_groups_open;

/* A thread that exits with its group open would leave the group's
 * operations unissued and its communicators impossible to free: a
 * thread-exit hook (registered when the thread first opens a group) ends
 * the group as mlc_group_end would, and says so. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

static void end_at_exit(void *unused)
{
    (void)unused;
    if (g.depth == 0) return;
    MLC_WARN("a thread exited with a group open (mlc_group_start without mlc_group_end, %zu operation%s): "
             "ending it now", g.n, g.n == 1 ? "" : "s");
    g.depth = 1;
    if (mlc_group_end() != MLC_SUCCESS) MLC_WARN("ending the group of an exiting thread: %s", mlc_last_error());
}

static void make_exit_key(void) { exit_key_ok = pthread_key_create(&exit_key, end_at_exit) == 0; }

/* When the library is unloaded (dlclose) or the process ends: a key left
 * behind would make every thread that opened a group here call end_at_exit,
 * unmapped by then, when it exits. Deleting a key calls no hook. A
 * communicator cannot be freed while a group uses it (mlc_comm_free refuses),
 * so a hook that does run never meets a freed one. */
__attribute__((destructor)) static void delete_exit_key(void)
{
    if (!exit_key_ok) return;
    exit_key_ok = false;
    pthread_key_delete(exit_key);
}

static void watch_thread_exit(void)
{
    pthread_once(&exit_once, make_exit_key);
    /* Any non-NULL value: the hook reads this thread's own state. */
    if (exit_key_ok && !pthread_getspecific(exit_key)) pthread_setspecific(exit_key, &g);
}

bool mlc_group_is_open(void)
{
    return atomic_load_explicit(&mlc_groups_open, memory_order_relaxed) > 0 && g.depth > 0;
}

mlc_status_t mlc_group_refuse(const char *fn)
{
    if (!mlc_group_is_open()) return MLC_SUCCESS;
    return mlc_error(MLC_ERR_INVALID_ARG, "%s: not inside an open group (mlc_group_start): it waits for "
                     "operations of its own, which the group would hold until mlc_group_end; call it "
                     "outside the group", fn);
}

mlc_status_t mlc_group_start(void)
{
    mlc_error_clear();
    if (g.depth == __INT_MAX__)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_group_start: groups nested %d deep", g.depth);
    if (g.depth++ == 0) {
        atomic_fetch_add_explicit(&mlc_groups_open, 1, memory_order_relaxed);
        watch_thread_exit();
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_group_submit(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out)
{
    if (g.n == g.cap) {
        size_t cap = g.cap ? 2 * g.cap : 16;
        group_op_t *grown = realloc(g.ops, cap * sizeof *grown);
        if (!grown)
            return mlc_error(MLC_ERR_NO_MEMORY, "mlc_%s: out of memory for operation %zu of a group",
                             mlc_coll_name(coll), g.n + 1);
        g.ops = grown;
        g.cap = cap;
    }
    mlc_request_t *req = NULL;
    comm->group_submitting = true;
    mlc_status_t st = mlc_submit_now(comm, coll, args, bytes, &req);
    comm->group_submitting = false;
    if (st != MLC_SUCCESS) return st;
    req->group_open = true;
    comm->group_ops++;
    g.ops[g.n++] = (group_op_t){req, out == NULL};
    if (out) *out = req;
    return MLC_SUCCESS;
}

/* Distinct communicators of the ops in [0, n) whose owned requests are not
 * done (all of them when `all`), into comms (at most n). */
static int comms_of(mlc_comm_t **comms, bool all)
{
    int k = 0;
    for (size_t i = 0; i < g.n; i++) {
        mlc_request_t *r = g.ops[i].req;
        if (!all && (!g.ops[i].owned || atomic_load_explicit(&r->done, memory_order_acquire))) continue;
        int j = 0;
        while (j < k && comms[j] != r->comm) j++;
        if (j == k) comms[k++] = r->comm;
    }
    return k;
}

/* Every backend hook once, with its communicators (nccl: one NCCL group). */
static mlc_status_t run_hooks(mlc_comm_t **comms, int ncomms, mlc_comm_t **scratch)
{
    mlc_status_t first = MLC_SUCCESS;
    char first_msg[512] = "";
    for (int i = 0; i < ncomms; i++) {
        mlc_status_t (*hook)(mlc_comm_t *const *, int) = comms[i]->be->group_end;
        if (!hook) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = comms[j]->be->group_end == hook;
        if (seen) continue;
        int k = 0;
        for (int j = i; j < ncomms; j++)
            if (comms[j]->be->group_end == hook) scratch[k++] = comms[j];
        mlc_status_t st = hook(scratch, k);
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            first = st;
            snprintf(first_msg, sizeof first_msg, "%s", mlc_last_error());
        }
    }
    if (first != MLC_SUCCESS) mlc_error_set_text(first_msg);
    return first;
}

/* The group's owned requests as the shared wait loop sees them (base/wait.h). */
typedef struct group_wait {
    mlc_comm_t **comms; /* communicators with owned requests not done */
    int ncomms;
    uint64_t epochs;    /* sum of their progress epochs last seen */
} group_wait_t;

static uint64_t epoch_sum(const group_wait_t *w)
{
    uint64_t s = 0;
    for (int i = 0; i < w->ncomms; i++) s += w->comms[i]->progress_epoch;
    return s;
}

/* Owned requests of comm not done yet fail with st (a progress call failed). */
static void fail_comm_ops(mlc_comm_t *comm, mlc_status_t st)
{
    int failed = atomic_load(&comm->failed);
    for (size_t i = 0; i < g.n; i++) {
        mlc_request_t *r = g.ops[i].req;
        if (g.ops[i].owned && r->comm == comm && !atomic_load_explicit(&r->done, memory_order_acquire))
            mlc_request_fail_pending(r, failed ? (mlc_status_t)failed : st);
    }
}

static int group_step(void *p)
{
    group_wait_t *w = p;
    int moved = 0;
    for (int i = 0; i < w->ncomms; i++) {
        int progressed = 0;
        mlc_status_t st = mlc_request_progress(w->comms[i], &progressed);
        if (st != MLC_SUCCESS) {
            fail_comm_ops(w->comms[i], st);
            progressed = 1;
        }
        moved |= progressed;
    }
    uint64_t e = epoch_sum(w);
    if (moved) {
        w->epochs = e;
        return MLC_WAIT_MOVED;
    }
    if (e != w->epochs) {
        w->epochs = e;
        return MLC_WAIT_MOVED_ELSEWHERE;
    }
    for (int i = 0; i < w->ncomms; i++)
        if (mlc_request_idle_step(w->comms[i]) != MLC_WAIT_BLOCK_NOW) return MLC_WAIT_NOTHING;
    return MLC_WAIT_BLOCK_NOW;
}

static int group_done(void *p)
{
    (void)p;
    for (size_t i = 0; i < g.n; i++)
        if (g.ops[i].owned && !atomic_load_explicit(&g.ops[i].req->done, memory_order_acquire)) return 0;
    return 1;
}

/* Health of every communicator (abort, dead peer), once each: the
 * requests of one that failed end. */
static int group_check(void *p)
{
    group_wait_t *w = p;
    for (int c = 0; c < w->ncomms; c++) {
        bool failed = false, asked = false;
        for (size_t i = 0; i < g.n; i++) {
            mlc_request_t *r = g.ops[i].req;
            if (!g.ops[i].owned || r->comm != w->comms[c] || atomic_load_explicit(&r->done, memory_order_acquire))
                continue;
            if (!asked) failed = mlc_request_sick(r);
            else if (failed) mlc_request_sick(r);
            asked = true;
        }
    }
    return 0;
}

static int group_block(void *p, double max_s)
{
    group_wait_t *w = p;
    if (w->ncomms != 1 || !w->comms[0]->be->idle) return 0;
    w->comms[0]->be->idle(w->comms[0], max_s);
    return 1;
}

/* The smallest MLC_TIMEOUT among the communicators (0: none has one). */
static double group_timeout(mlc_comm_t **comms, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++) {
        double ti = comms[i]->cfg.timeout_s;
        if (ti > 0 && (t == 0 || ti < t)) t = ti;
    }
    return t;
}

/* Wait for every owned request; on a timeout each communicator still
 * waiting fails, naming its first pending operation. */
static void wait_owned(mlc_comm_t **comms)
{
    group_wait_t gw = {.comms = comms, .ncomms = comms_of(comms, false)};
    if (gw.ncomms == 0) return;
    gw.epochs = epoch_sum(&gw);
    double timeout = group_timeout(comms, gw.ncomms);
    mlc_wait_t w = {.step = group_step, .done = group_done, .check = group_check, .block = group_block,
                    .ctx = &gw, .timeout_s = timeout, .what = "group", .spin_s = 2e-3, .yield_s = -1,
                    .sleep_min_s = 20e-6, .sleep_max_s = 2e-4};
    if (mlc_wait_run(&w) != MLC_WAIT_TIMEOUT) return;
    for (size_t i = 0; i < g.n; i++) {
        mlc_request_t *r = g.ops[i].req;
        if (!g.ops[i].owned || atomic_load_explicit(&r->done, memory_order_acquire)) continue;
        if (atomic_load(&r->comm->failed) == MLC_SUCCESS) mlc_request_time_out(r, timeout);
        else mlc_request_sick(r);
    }
}

mlc_status_t mlc_group_end(void)
{
    mlc_error_clear();
    if (g.depth == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_group_end: no group is open on this thread "
                         "(mlc_group_end without mlc_group_start)");
    if (--g.depth > 0) return MLC_SUCCESS;
    atomic_fetch_sub_explicit(&mlc_groups_open, 1, memory_order_relaxed);
    size_t n = g.n;
    mlc_status_t first = MLC_SUCCESS;
    char first_msg[640] = "";
    mlc_comm_t **comms = n ? malloc(2 * n * sizeof *comms) : NULL;
    if (n && !comms) {
        /* Without room for the list, wait for each alone: they are all started. */
        first = mlc_error(MLC_ERR_NO_MEMORY, "mlc_group_end: out of memory; operations waited one by one");
        snprintf(first_msg, sizeof first_msg, "%s", mlc_last_error());
    }
    for (size_t i = 0; i < n; i++) {
        g.ops[i].req->group_open = false;
        g.ops[i].req->comm->group_ops--;
    }
    mlc_status_t hook_st = MLC_SUCCESS;
    char hook_msg[600] = "";
    if (comms) {
        hook_st = run_hooks(comms, comms_of(comms, true), comms + n);
        if (hook_st != MLC_SUCCESS) snprintf(hook_msg, sizeof hook_msg, "mlc_group_end: %s", mlc_last_error());
        wait_owned(comms);
    }
    for (size_t i = 0; i < n; i++) {
        if (!g.ops[i].owned) continue;
        mlc_request_t *r = g.ops[i].req;
        mlc_status_t st = comms ? mlc_request_finish(r) : mlc_request_wait_internal(r);
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) {
            char what[160];
            mlc_request_describe(r, what, sizeof what);
            first = st;
            snprintf(first_msg, sizeof first_msg, "mlc_group_end: grouped operation %zu of %zu, %s on rank %d, "
                     "failed: %s", i + 1, n, what, r->comm->rank, mlc_last_error());
        }
        mlc_request_release(r);
    }
    /* A failure of only request forms: the hook's message (their requests have theirs). */
    if (first == MLC_SUCCESS && hook_st != MLC_SUCCESS) {
        first = hook_st;
        snprintf(first_msg, sizeof first_msg, "%s", hook_msg);
    }
    free(comms);
    free(g.ops);
    g.ops = NULL;
    g.n = g.cap = 0;
    if (first != MLC_SUCCESS) {
        mlc_error_set_text(first_msg);
        return first;
    }
    mlc_error_clear();
    return MLC_SUCCESS;
}
