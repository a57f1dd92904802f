/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicators on MPI: the world one (a duplicate of MPI_COMM_WORLD), one
 * handed over by the program (a duplicate of its MPI_Comm), split ones
 * (MPI_Comm_split). Abort reaches the peers as a control message on the
 * hidden communicator; each rank keeps one receive posted for it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "base/wait.h"
#include "mpi_impl.h"

/* A request's completion, for the shared wait loop. */
typedef struct request_wait {
    MPI_Request rq;
    int rc; /* MPI_Test's failure, if any */
} request_wait_t;

static int request_step(void *p)
{
    request_wait_t *w = p;
    int flag = 0;
    w->rc = MPI_Test(&w->rq, &flag, MPI_STATUS_IGNORE);
    if (w->rc != MPI_SUCCESS) return MLC_WAIT_STOP;
    return flag ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
}

static int request_done(void *p) { return ((request_wait_t *)p)->rq == MPI_REQUEST_NULL; }

/* Whether every rank was created without a deadline (then MPI's blocking
 * collectives may be used, and a deadline set later is refused: both read
 * comm->timeout_refused). Found with a nonblocking allreduce, which every
 * rank calls whatever its own timeout, waited for with this rank's deadline
 * (or by MPI_Wait without one). The
 * MPI_Comm_dup just before has already met every rank, so the deadline
 * only fires for a rank that died in between. */
static mlc_status_t agree_blocking(mlc_comm_t *comm, mlc_mpi_comm_t *c)
{
    /* This rank's {has a deadline, a random number}, then every rank's
     * maximum of each: no rank has a deadline, and the uid of control
     * messages (mpi_impl.h). MPI may hold them past a timeout. */
    int64_t *vals = malloc(4 * sizeof *vals);
    if (!vals) return mlc_core->error(MLC_ERR_NO_MEMORY, "rank %d: creating a communicator: out of memory", comm->rank);
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) /* cannot fail this small after boot */
        rnd = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)vals ^ (uint64_t)time(NULL);
    vals[0] = comm->cfg.timeout_s > 0;
    vals[1] = (int64_t)(rnd >> 1);
    vals[2] = vals[3] = 0;
    bool native = vals[0] == 0;
    request_wait_t rw = {.rq = MPI_REQUEST_NULL, .rc = MPI_SUCCESS};
    int rc = MPI_Iallreduce(&vals[0], &vals[2], 2, MPI_INT64_T, MPI_MAX, c->hidden, &rw.rq);
    if (rc == MPI_SUCCESS && native) {
        rc = MPI_Wait(&rw.rq, MPI_STATUS_IGNORE);
    } else if (rc == MPI_SUCCESS) {
        mlc_wait_t w = {.step = request_step, .done = request_done, .ctx = &rw, .timeout_s = comm->cfg.timeout_s,
                        .what = "creating a communicator"};
        mlc_wait_status_t how = mlc_wait_run(&w);
        rc = rw.rc;
        if (how == MLC_WAIT_TIMEOUT) {
            /* MPI cannot cancel a collective: the request, its buffers and hidden are left to it. */
            c->hidden_in_flight = true;
            return mlc_core->error(MLC_ERR_TIMEOUT, "rank %d: creating a communicator on mpi: not every rank joined "
                                   "within %g s (MLC_TIMEOUT)", comm->rank, comm->cfg.timeout_s);
        }
    }
    bool all = vals[2] == 0;
    c->uid = vals[3];
    free(vals);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: agreeing on a deadline (MPI_Iallreduce)", comm->rank);
    comm->timeout_refused = all ?
        "this mpi communicator was created without a deadline on every rank (MLC_TIMEOUT=0), so its blocking "
        "collectives are MPI's blocking ones, which no deadline can end; give it a timeout when it is created "
        "(MLC_TIMEOUT or mlc_config_t.timeout_s)" : NULL;
    return MLC_SUCCESS;
}

static mlc_status_t comm_setup(mlc_comm_t *comm, mlc_mpi_comm_t *c)
{
    int rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Comm_set_errhandler", comm->rank);
    int r = -1, p = -1;
    MPI_Comm_rank(c->comm, &r);
    MPI_Comm_size(c->comm, &p);
    if (r != comm->rank || p != comm->size)
        return mlc_core->error(MLC_ERR_INTERNAL, "backend 'mpi': MPI made rank %d of %d where mlcomm expects rank %d of %d",
                         r, p, comm->rank, comm->size);
    rc = MPI_Comm_dup(c->comm, &c->hidden);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Comm_dup (hidden context)", comm->rank);
    /* MPI_TAG_UB is defined on MPI_COMM_WORLD and holds for every communicator;
     * Open MPI does not copy the attribute to split or duplicated ones. */
    int *ub = NULL, flag = 0;
    rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    c->tag_ub = rc == MPI_SUCCESS && flag && ub ? *ub : 32767; /* the least MPI guarantees */
    /* Hidden tags: the two at the top carry control messages (ctrl_tag) and
     * their replies (ctrl_tag - 1); algorithm tags stay below both:
     * (window << KEY_BITS) - 1 <= tag_ub - 2. */
    c->ctrl_tag = c->tag_ub;
    c->seq_window = (unsigned)(c->tag_ub - 1) >> MLC_SCHED_KEY_BITS;
    if (c->seq_window == 0) {
        /* No room for algorithm tags: MPI's own collectives run, and the
         * selector, mlc_comm_get_algo and the profiler say so. */
        comm->no_own_algos = true;
        MLC_DEBUG("rank %d: MPI_TAG_UB %d leaves no room for mlcomm's algorithms; MPI's own collectives run",
                  comm->rank, c->tag_ub);
    }
    mlc_status_t st = agree_blocking(comm, c);
    if (st != MLC_SUCCESS) return st;
    comm->impl = c;
    return mlc_mpi_ctrl_start(comm);
}

/* in_flight: collectives MPI still runs on c->comm. MPI allows freeing a
 * communicator under them, but Open MPI 4.1's libnbc then progresses them on
 * the freed communicator and crashes: such a communicator is left to MPI. */
static void comm_release(mlc_mpi_comm_t *c, int in_flight)
{
    mlc_mpi_progress_leave(c);
    if (!mlc_mpi_finalized()) {
        mlc_mpi_ctrl_stop(c);
        if (c->hidden != MPI_COMM_NULL && !c->hidden_in_flight) MPI_Comm_free(&c->hidden);
        if (c->comm != MPI_COMM_NULL && !in_flight) MPI_Comm_free(&c->comm);
    }
    mlc_mpi_handles_free(c);
    free(c->notices);
    free(c);
}

mlc_status_t mlc_mpi_comm_create(mlc_comm_t *comm, MPI_Comm base, bool adopt)
{
    mlc_mpi_comm_t *c = calloc(1, sizeof *c);
    if (!c) {
        if (adopt) MPI_Comm_free(&base);
        return mlc_core->error(MLC_ERR_NO_MEMORY, "backend 'mpi': out of memory for a communicator");
    }
    c->magic = MLC_MPI_COMM_MAGIC;
    c->owner = comm;
    c->comm = c->hidden = MPI_COMM_NULL;
    c->ctrl = MPI_REQUEST_NULL;
    atomic_flag_clear(&c->busy);
    mlc_status_t st = MLC_SUCCESS;
    if (adopt) {
        c->comm = base;
    } else {
        int rc = MPI_Comm_dup(base, &c->comm);
        if (rc != MPI_SUCCESS) {
            st = mlc_mpi_error(rc, "rank %d: MPI_Comm_dup", comm->rank);
            goto fail;
        }
    }
    st = comm_setup(comm, c);
    if (st == MLC_SUCCESS) {
        mlc_mpi_progress_join(c);
        return MLC_SUCCESS;
    }
fail:
    comm->impl = NULL;
    comm_release(c, 0);
    return st;
}

/* ---- abort ------------------------------------------------------------------- */

void mlc_mpi_abort(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    int none = MLC_MPI_ABORT_NONE;
    atomic_compare_exchange_strong(&c->abort_pending, &none, MLC_MPI_ABORT_PENDING);
    /* Below MPI_THREAD_MULTIPLE only the owner may call MPI: it sends at its next call. */
    if (mlc_mpi_thread_level() == MPI_THREAD_MULTIPLE) mlc_mpi_flush_abort(c);
}

mlc_status_t mlc_mpi_health(mlc_comm_t *comm)
{
    mlc_mpi_flush_abort(comm->impl);
    return mlc_mpi_check_ctrl(comm);
}

int mlc_mpi_tag_max(mlc_comm_t *comm)
{
    const mlc_mpi_comm_t *c = comm->impl;
    return c->tag_ub;
}

/* ---- table entries ---------------------------------------------------------------- */

/*
 * A store bootstrap (mlc_comm_init_rank, mlc_comm_init_store) on MPI: every
 * MPI process joins (MPI cannot rendezvous a subset of processes that do not
 * know each other, and the store cannot make MPI connect processes it did
 * not launch), in the rank order the callers asked for. Every caller must
 * hold the same job (the job id the store agreed) and ask for a different
 * rank; the checks see the same data everywhere, so all fail alike.
 */
static mlc_status_t init_by_id(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (boot->size != world)
        return mlc_core->error(MLC_ERR_UNSUPPORTED, "%s on backend 'mpi' joins every MPI process: "
                         "nranks is %d but MPI_COMM_WORLD has %d (mlc_comm_split makes a subset)",
                         boot->store->caller, boot->size, world);
    MPI_Comm all = MPI_COMM_NULL;
    int64_t *every = malloc(sizeof *every * 2 * (size_t)world);
    char *seen = calloc((size_t)world, 1);
    mlc_status_t st = MLC_SUCCESS;
    if (!every || !seen) {
        st = mlc_core->error(MLC_ERR_NO_MEMORY, "%s: out of memory for %d ranks", boot->store->caller, world);
        goto out;
    }
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &all);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(all, MPI_ERRORS_RETURN);
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the job id */
    for (const char *p = boot->job_id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    int64_t mine[2] = {(int64_t)h, boot->rank};
    if (rc == MPI_SUCCESS) rc = MPI_Allgather(mine, 2, MPI_INT64_T, every, 2, MPI_INT64_T, all);
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "%s: rank %d: agreeing on the job over MPI_COMM_WORLD", boot->store->caller, boot->rank);
        goto out;
    }
    for (int k = 0; k < world && st == MLC_SUCCESS; k++) {
        int64_t r = every[2 * k + 1];
        if (every[2 * k] != (int64_t)h)
            st = mlc_core->error(MLC_ERR_MISMATCH, "%s: MPI process %d joined another job (another unique id or "
                                 "store)", boot->store->caller, k);
        else if (seen[r]++)
            st = mlc_core->error(MLC_ERR_MISMATCH, "%s: two MPI processes asked for rank %lld", boot->store->caller,
                           (long long)r);
    }
    if (st != MLC_SUCCESS) goto out;
    MPI_Comm nc = MPI_COMM_NULL;
    rc = MPI_Comm_split(all, 0, boot->rank, &nc);
    if (rc != MPI_SUCCESS) {
        st = mlc_mpi_error(rc, "%s: rank %d: MPI_Comm_split", boot->store->caller, boot->rank);
        goto out;
    }
    st = mlc_mpi_comm_create(comm, nc, true);
out:
    if (all != MPI_COMM_NULL) MPI_Comm_free(&all);
    free(every);
    free(seen);
    return st;
}

mlc_status_t mlc_mpi_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    mlc_status_t st = mlc_mpi_env_start(comm->cfg.mpi_thread_level, comm->cfg.timeout_s);
    if (st != MLC_SUCCESS) return st;
    if (boot->store) return init_by_id(comm, boot);
    if (boot->be_arg) return mlc_mpi_comm_create(comm, *(const MPI_Comm *)boot->be_arg, false);
    int r = -1, p = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (r != comm->rank || p != comm->size)
        return mlc_core->error(MLC_ERR_CONFIG,
                         "backend 'mpi': rank %d of %d (from %s) but MPI_COMM_WORLD has rank %d of %d: "
                         "start the job with mpirun, mpiexec or srun",
                         comm->rank, comm->size, comm->cfg.rank_source ? comm->cfg.rank_source : "config", r, p);
    return mlc_mpi_comm_create(comm, MPI_COMM_WORLD, false);
}

mlc_status_t mlc_mpi_split(mlc_comm_t *parent, int color, int key, const int *members, int nmembers,
                           mlc_comm_t *child)
{
    (void)members;
    (void)nmembers;
    mlc_mpi_comm_t *pc = parent->impl;
    MPI_Comm nc = MPI_COMM_NULL;
    int rc = MPI_Comm_split(pc->comm, color == MLC_UNDEFINED ? MPI_UNDEFINED : color, key, &nc);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Comm_split(color %d, key %d)", parent->rank, color, key);
    if (!child) {
        if (nc != MPI_COMM_NULL) MPI_Comm_free(&nc);
        return MLC_SUCCESS;
    }
    if (nc == MPI_COMM_NULL)
        return mlc_core->error(MLC_ERR_INTERNAL, "rank %d: MPI_Comm_split gave no communicator for color %d",
                         parent->rank, color);
    /* Core orders members by (key, parent rank), as MPI does; comm_setup checks it. */
    return mlc_mpi_comm_create(child, nc, true);
}

void mlc_mpi_destroy(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    if (!c) return;
    mlc_mpi_progress_leave(c); /* no other thread polls it from here on */
    int in_flight = 0;
    if (!mlc_mpi_finalized()) {
        mlc_mpi_flush_abort(c);
        in_flight = mlc_mpi_abandon_all(comm);
    }
    comm_release(c, in_flight);
    comm->impl = NULL;
}
