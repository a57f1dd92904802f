/*
 * Communicators on MPI: the world one (a duplicate of MPI_COMM_WORLD), one
 * handed over by the program (a duplicate of its MPI_Comm), split ones
 * (MPI_Comm_split). Abort reaches the peers as a control message on the
 * hidden communicator; each rank keeps one receive posted for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_impl.h"

static mlc_status_t comm_setup(mlc_comm_t *comm, mlc_mpi_comm_t *c)
{
    int rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Comm_set_errhandler", comm->rank);
    int r = -1, p = -1;
    MPI_Comm_rank(c->comm, &r);
    MPI_Comm_size(c->comm, &p);
    if (r != comm->rank || p != comm->size)
        return mlc_error(MLC_ERR_INTERNAL, "backend 'mpi': MPI made rank %d of %d where mlcomm expects rank %d of %d",
                         r, p, comm->rank, comm->size);
    rc = MPI_Comm_dup(c->comm, &c->hidden);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Comm_dup (hidden context)", comm->rank);
    int *ub = NULL, flag = 0;
    rc = MPI_Comm_get_attr(c->comm, MPI_TAG_UB, &ub, &flag);
    c->tag_ub = rc == MPI_SUCCESS && flag && ub ? *ub : 32767; /* the least MPI guarantees */
    c->ctrl_tag = c->tag_ub;
    /* hidden tags stay below ctrl_tag: (window << KEY_BITS) - 1 < tag_ub */
    c->seq_window = (unsigned)c->tag_ub >> MLC_SCHED_KEY_BITS;
    rc = MPI_Irecv(c->ctrl_msg, 2, MPI_INT, MPI_ANY_SOURCE, c->ctrl_tag, c->hidden, &c->ctrl);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "rank %d: MPI_Irecv (control messages)", comm->rank);
    return MLC_SUCCESS;
}

static void comm_release(mlc_mpi_comm_t *c)
{
    if (!mlc_mpi_finalized()) {
        if (c->ctrl != MPI_REQUEST_NULL) {
            MPI_Cancel(&c->ctrl);
            MPI_Wait(&c->ctrl, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < c->nnotices; i++) {
            int done = 0;
            MPI_Test(&c->notices[i], &done, MPI_STATUS_IGNORE);
            if (!done) {
                /* A peer that never looked: cancelling is local (MPI_Cancel + MPI_Wait). */
                MPI_Cancel(&c->notices[i]);
                MPI_Wait(&c->notices[i], MPI_STATUS_IGNORE);
            }
        }
        if (c->hidden != MPI_COMM_NULL) MPI_Comm_free(&c->hidden);
        if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
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
        return mlc_error(MLC_ERR_NO_MEMORY, "backend 'mpi': out of memory for a communicator");
    }
    c->magic = MLC_MPI_COMM_MAGIC;
    c->comm = c->hidden = MPI_COMM_NULL;
    c->ctrl = MPI_REQUEST_NULL;
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
    if (st != MLC_SUCCESS) goto fail;
    comm->impl = c;
    return MLC_SUCCESS;
fail:
    comm_release(c);
    return st;
}

/* ---- abort and control messages --------------------------------------------- */

void mlc_mpi_flush_abort(mlc_mpi_comm_t *c)
{
    if (!atomic_exchange(&c->abort_pending, 0)) return;
    int p = 0, me = 0;
    MPI_Comm_size(c->hidden, &p);
    MPI_Comm_rank(c->hidden, &me);
    c->abort_msg[0] = MLC_MPI_CTRL_ABORT;
    c->abort_msg[1] = me;
    c->notices = malloc(sizeof *c->notices * (size_t)p);
    if (!c->notices) {
        MLC_WARN("rank %d: out of memory: the peers are not told of mlc_comm_abort", me);
        return;
    }
    /* Everyone, ourselves included: our own notice wakes a wait blocked in MPI. */
    for (int r = 0; r < p; r++)
        if (MPI_Isend(c->abort_msg, 2, MPI_INT, r, c->ctrl_tag, c->hidden, &c->notices[c->nnotices]) ==
            MPI_SUCCESS)
            c->nnotices++;
}

mlc_status_t mlc_mpi_check_ctrl(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    if (c->ctrl != MPI_REQUEST_NULL) {
        int flag = 0;
        int rc = MPI_Test(&c->ctrl, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            c->ctrl = MPI_REQUEST_NULL;
            MLC_WARN("rank %d: the control receive failed; remote aborts will not be seen", comm->rank);
        } else if (flag && c->ctrl_msg[0] == MLC_MPI_CTRL_ABORT) {
            mlc_comm_fail(comm, MLC_ERR_ABORTED, "rank %d aborted the communicator (mlc_comm_abort)",
                          c->ctrl_msg[1]);
        }
    }
    return (mlc_status_t)atomic_load(&comm->failed);
}

void mlc_mpi_abort(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    atomic_store(&c->abort_pending, 1);
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

/* ---- table slots ---------------------------------------------------------------- */

mlc_status_t mlc_mpi_init(mlc_comm_t *comm, const mlc_boot_t *boot)
{
    if (boot->uid)
        return mlc_error(MLC_ERR_UNSUPPORTED, "mlc_comm_init_rank does not apply to backend 'mpi': its ranks "
                         "are MPI's (mlc_comm_init, or mlc_comm_from_mpi from mlcomm_mpi.h)");
    mlc_status_t st = mlc_mpi_env_start(comm->cfg.mpi_thread_level);
    if (st != MLC_SUCCESS) return st;
    if (boot->be_arg) return mlc_mpi_comm_create(comm, *(const MPI_Comm *)boot->be_arg, false);
    int r = -1, p = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (r != comm->rank || p != comm->size)
        return mlc_error(MLC_ERR_CONFIG,
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
        return mlc_error(MLC_ERR_INTERNAL, "rank %d: MPI_Comm_split gave no communicator for color %d",
                         parent->rank, color);
    /* Core orders members by (key, parent rank), as MPI does; comm_setup checks it. */
    return mlc_mpi_comm_create(child, nc, true);
}

void mlc_mpi_destroy(mlc_comm_t *comm)
{
    mlc_mpi_comm_t *c = comm->impl;
    if (!c) return;
    if (!mlc_mpi_finalized()) {
        mlc_mpi_flush_abort(c);
        mlc_mpi_abandon_all(comm);
    }
    comm_release(c);
    comm->impl = NULL;
}
