/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process's MPI: initialized once, by us only if nobody did, at the
 * thread level the config asks for (MLC_MPI_THREAD_LEVEL, default multiple);
 * finalized at process exit only if we initialized it, never by
 * mlc_comm_free. Errors become MLC_ERR_BACKEND with MPI's own text.
 *
 * A process that exits with a failure status is not finalized: MPI_Finalize
 * would wait for ranks that may be stuck waiting for this one, whereas an
 * exit without it makes the launcher end the whole job at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mpi_impl.h"

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool env_started; /* mlc_mpi_env_start succeeded once (read without env_lock) */
static bool we_initialized; /* MPI_Init_thread was ours: finalize at exit */
static atomic_bool finalizing_at_exit; /* our own MPI_Finalize at process exit has begun */
static int env_level = MPI_THREAD_SINGLE; /* set before env_started */

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
    }
}

static int mpi_level_of(int cfg_level)
{
    static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                                 MPI_THREAD_MULTIPLE};
    return cfg_level >= 0 && cfg_level <= 3 ? levels[cfg_level] : MPI_THREAD_MULTIPLE;
}

/*
 * Open MPI 4.1's single-copy path (btl vader: CMA or XPMEM) writes a message
 * past the end of a contiguous receive buffer that is too short for it,
 * while returning MPI_ERR_TRUNCATE: a collective whose ranks pass different
 * counts wrote the root's whole message past the others' buffers (a
 * broadcast of 4000 int32 into 1000: 12000 bytes). Point-to-point receives
 * are bounded by the module itself (mpi_recv_size.c), MPI's collectives
 * cannot be. So when mlcomm starts Open MPI 4 it turns single copy off
 * unless the environment chose (docs/MPI.md: measured faster on one host
 * here). Open MPI 5 moved single copy to its smsc framework; untried, left
 * alone.
 */
static void single_copy_off(void)
{
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
    const char *set = mlc_core->env_text(MLC_ENV_EXPORT_OMPI_SINGLE_COPY);
    if (set) {
        MLC_DEBUG("OMPI_MCA_btl_vader_single_copy_mechanism=%s (from the environment): a message too long for "
                  "a collective's buffer may be written past its end", set);
        return;
    }
    if (mlc_core->env_export(MLC_ENV_EXPORT_OMPI_SINGLE_COPY, "none") == MLC_SUCCESS)
        MLC_DEBUG("OMPI_MCA_btl_vader_single_copy_mechanism=none: Open MPI's single copy writes a message too "
                  "long for a buffer past its end");
#endif
}

/*
 * MPI_Init_thread waits for every rank of the job (Open MPI's PMIx fence)
 * and has no deadline: a rank that failed before it (a bad setting on that
 * rank only) or started late held the others there, silent, for as long as
 * it lived. So where any thread may initialize MPI (thread level multiple
 * or serialized) and there is a deadline, it runs on a thread of its own and
 * the caller waits at most MLC_TIMEOUT. Past that the call is left running
 * and MPI is unusable in this process: every later start says so.
 */
typedef struct init_call {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC (init_call_once) */
    bool done;
    int want, got, rc;
} init_call_t;

static init_call_t init_call = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t init_call_once = PTHREAD_ONCE_INIT;
static double init_abandoned_s; /* > 0: MPI_Init_thread did not return within this many seconds */

static void init_call_setup(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&init_call.cond, &a);
    pthread_condattr_destroy(&a);
}

static void *init_thread(void *arg)
{
    init_call_t *c = arg;
    int got = MPI_THREAD_SINGLE;
    int rc = MPI_Init_thread(NULL, NULL, c->want, &got);
    pthread_mutex_lock(&c->lock);
    c->rc = rc;
    c->got = got;
    c->done = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static mlc_status_t init_failed(int rc, int want)
{
    return mlc_mpi_error(rc, "backend 'mpi': MPI_Init_thread(%s)", level_name(want));
}

/* MPI_Init_thread(want), within timeout_s where it can be (above). */
static mlc_status_t init_mpi(int want, double timeout_s, int *got)
{
    pthread_t t;
    pthread_once(&init_call_once, init_call_setup);
    init_call.want = want;
    init_call.done = false;
    if (timeout_s <= 0 || want < MPI_THREAD_SERIALIZED || pthread_create(&t, NULL, init_thread, &init_call) != 0) {
        int rc = MPI_Init_thread(NULL, NULL, want, got);
        return rc == MPI_SUCCESS ? MLC_SUCCESS : init_failed(rc, want);
    }
    double wait_s = timeout_s < 1e6 ? timeout_s : 1e6;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)wait_s;
    until.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&init_call.lock);
    while (!init_call.done)
        if (pthread_cond_timedwait(&init_call.cond, &init_call.lock, &until) == ETIMEDOUT) break;
    bool done = init_call.done;
    pthread_mutex_unlock(&init_call.lock);
    if (!done) {
        pthread_detach(t);
        init_abandoned_s = timeout_s;
        return mlc_core->error(MLC_ERR_TIMEOUT, "backend 'mpi': MPI_Init_thread did not return within %g s "
                               "(MLC_TIMEOUT): it waits for every rank of the job, and some rank has not called "
                               "it (it failed before it, or is late); MPI cannot be used in this process: exit, "
                               "and the launcher ends the job", timeout_s);
    }
    pthread_join(t, NULL);
    *got = init_call.got;
    if (init_call.rc != MPI_SUCCESS) return init_failed(init_call.rc, want);
    /* Below serialized only the initializing thread, gone now, may call MPI. */
    if (*got < MPI_THREAD_SERIALIZED)
        return mlc_core->error(MLC_ERR_UNAVAILABLE, "backend 'mpi': MPI provided thread level %s when %s was asked "
                               "for, on a thread of mlcomm's that has ended (only it may call MPI now); set "
                               "MLC_MPI_THREAD_LEVEL=funneled to start MPI on the calling thread",
                               level_name(*got), level_name(want));
    return MLC_SUCCESS;
}

/* on_exit: finalize what we initialized, unless the program already did. */
static void finalize_at_exit(int status, void *arg)
{
    (void)arg;
    int fin = 1;
    MPI_Finalized(&fin);
    if (fin) return;
    if (status != 0) {
        MLC_DEBUG("exit status %d: leaving MPI unfinalized so the launcher ends the job", status);
        return;
    }
    MLC_DEBUG("finalizing MPI (initialized by mlcomm)");
    atomic_store(&finalizing_at_exit, true);
    MPI_Finalize();
}

bool mlc_mpi_finalizing_at_exit(void) { return atomic_load(&finalizing_at_exit); }

void mlc_mpi_errtext(int rc, char *buf, size_t len)
{
    char s[MPI_MAX_ERROR_STRING + 1];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS || n <= 0) snprintf(s, sizeof s, "MPI error %d", rc);
    s[n > 0 && n <= MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING] = '\0';
    /* MPICH returns a multi-line error stack: keep it on one line. */
    for (char *p = s; *p; p++)
        if (*p == '\n') *p = ' ';
    snprintf(buf, len, "%s", s);
}

bool mlc_mpi_truncated(int rc)
{
    int cls = rc;
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return cls == MPI_ERR_TRUNCATE;
}

const char *mlc_mpi_count_hint(const mlc_request_t *req, int rc)
{
    return req->coll < MLC_COLL_SEND && mlc_mpi_truncated(rc)
               ? "; " MLC_MPI_COUNT_QUESTION
               : "";
}

mlc_status_t mlc_mpi_error(int rc, const char *fmt, ...)
{
    char what[256], text[MPI_MAX_ERROR_STRING + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    mlc_mpi_errtext(rc, text, sizeof text);
    return mlc_core->error(mlc_mpi_truncated(rc) ? MLC_ERR_TRUNCATE : MLC_ERR_BACKEND, "%s: %s", what, text);
}

mlc_status_t mlc_mpi_env_start(int cfg_level, double timeout_s)
{
    mlc_status_t st = MLC_SUCCESS;
    pthread_mutex_lock(&env_lock);
    if (init_abandoned_s > 0) {
        st = mlc_core->error(MLC_ERR_UNAVAILABLE, "backend 'mpi': MPI_Init_thread did not return within %g s "
                             "earlier in this process (MLC_TIMEOUT): MPI cannot be used here", init_abandoned_s);
        goto out;
    }
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin) {
        st = mlc_core->error(MLC_ERR_UNAVAILABLE, "backend 'mpi': MPI has already been finalized in this process");
        goto out;
    }
    if (!inited) {
        int want = mpi_level_of(cfg_level), got = MPI_THREAD_SINGLE;
        single_copy_off();
        st = init_mpi(want, timeout_s, &got);
        if (st != MLC_SUCCESS) goto out;
        we_initialized = true;
        on_exit(finalize_at_exit, NULL);
        /* Nobody else uses this MPI: request errors (which MPICH raises on
         * MPI_COMM_WORLD's handler) must come back as codes, not abort. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        env_level = got;
        char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int vlen = 0;
        MPI_Get_library_version(version, &vlen);
        char *nl = strchr(version, '\n');
        if (nl) *nl = '\0';
        if (got < want)
            MLC_WARN("MPI initialized by mlcomm at thread level %s, below the %s asked for "
                     "(MLC_MPI_THREAD_LEVEL); mlc_comm_abort from another thread reaches MPI only "
                     "at the owner's next call (%s)",
                     level_name(got), level_name(want), version);
        else
            MLC_INFO("MPI initialized by mlcomm: thread level %s provided (%s asked for); %s",
                     level_name(got), level_name(want), version);
    } else if (!env_started) {
        MPI_Query_thread(&env_level);
        MLC_INFO("MPI was initialized by the program: thread level %s; mlcomm will not finalize it",
                 level_name(env_level));
    }
    if (!env_started) {
        st = mlc_mpi_types_start();
        if (st == MLC_SUCCESS) st = mlc_mpi_recv_size_start();
        if (st == MLC_SUCCESS) {
            mlc_mpi_report_cuda();
            env_started = true;
        }
    }
out:
    pthread_mutex_unlock(&env_lock);
    return st;
}

int mlc_mpi_thread_level(void) { return env_level; }

static pthread_mutex_t serial_lock;
static pthread_once_t serial_once = PTHREAD_ONCE_INIT;

static void serial_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE); /* entries nest: a split runs collectives */
    pthread_mutex_init(&serial_lock, &a);
    pthread_mutexattr_destroy(&a);
}

/* Before MPI is started the level is not known yet: lock (creation is rare). */
bool mlc_mpi_serialized(void) { return !env_started || env_level < MPI_THREAD_MULTIPLE; }

bool mlc_mpi_serial_enter(void)
{
    if (!mlc_mpi_serialized()) return false;
    pthread_once(&serial_once, serial_init);
    pthread_mutex_lock(&serial_lock);
    return true;
}

void mlc_mpi_serial_leave(bool locked)
{
    if (locked) pthread_mutex_unlock(&serial_lock);
}

bool mlc_mpi_finalized(void)
{
    int fin = 1;
    MPI_Finalized(&fin);
    return fin != 0;
}
