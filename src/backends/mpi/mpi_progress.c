/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One progress list for the process. MPI advances its own operations inside
 * any MPI call, but the steps of mlcomm's algorithms over MPI point-to-point
 * (op->exec) advance only when mlcomm polls them. A rank waiting on one
 * communicator must therefore also poll every other communicator's
 * algorithm steps, or two ranks waiting on two communicators in different
 * orders wait on each other forever.
 *
 * Every communicator is on the list from creation to destruction. Its
 * operations list is guarded by its `busy` flag: the owner thread takes it
 * (it is almost never contended), a thread progressing other communicators
 * only tries it and skips a communicator that is busy. The list itself is
 * guarded by a mutex that progressing threads only try, too: whoever holds it
 * is already polling everybody. Communicators are destroyed only after
 * leaving the list under that mutex, so nobody polls a freed one.
 */
#include <pthread.h>
#include <sched.h>
#include "mpi_impl.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static mlc_mpi_comm_t *list_head;
atomic_int mlc_mpi_polled_ops;

void mlc_mpi_lock(mlc_mpi_comm_t *c)
{
    while (atomic_flag_test_and_set_explicit(&c->busy, memory_order_acquire)) sched_yield();
}

void mlc_mpi_unlock(mlc_mpi_comm_t *c) { atomic_flag_clear_explicit(&c->busy, memory_order_release); }

void mlc_mpi_progress_join(mlc_mpi_comm_t *c)
{
    pthread_mutex_lock(&list_lock);
    c->list_prev = NULL;
    c->list_next = list_head;
    if (list_head) list_head->list_prev = c;
    list_head = c;
    c->listed = true;
    pthread_mutex_unlock(&list_lock);
}

void mlc_mpi_progress_leave(mlc_mpi_comm_t *c)
{
    if (!c->listed) return;
    pthread_mutex_lock(&list_lock);
    if (c->list_prev) c->list_prev->list_next = c->list_next;
    else list_head = c->list_next;
    if (c->list_next) c->list_next->list_prev = c->list_prev;
    c->listed = false;
    pthread_mutex_unlock(&list_lock);
}

void mlc_mpi_progress_fail_all(void)
{
    /* At process exit, after the program's last call: nothing to warn about. */
    if (mlc_mpi_finalizing_at_exit()) return;
    pthread_mutex_lock(&list_lock);
    for (mlc_mpi_comm_t *c = list_head; c; c = c->list_next)
        mlc_core->comm_fail(c->owner, MLC_ERR_UNAVAILABLE,
                            "rank %d: MPI_Finalize was called while this communicator was alive: MPI cannot be "
                            "used any more (free communicators before MPI_Finalize, mlcomm_mpi.h)",
                            c->owner->rank);
    pthread_mutex_unlock(&list_lock);
}

void mlc_mpi_progress_others(const mlc_mpi_comm_t *self, int *moved)
{
    /* Only when some other communicator has algorithm steps to poll. */
    int mine = self ? self->npolled : 0;
    if (atomic_load_explicit(&mlc_mpi_polled_ops, memory_order_relaxed) <= mine) return;
    if (pthread_mutex_trylock(&list_lock) != 0) return;
    for (mlc_mpi_comm_t *c = list_head; c; c = c->list_next) {
        if (c == self || c->npolled == 0) continue;
        if (atomic_flag_test_and_set_explicit(&c->busy, memory_order_acquire)) continue;
        mlc_mpi_progress_polled(c, moved);
        mlc_mpi_unlock(c);
    }
    pthread_mutex_unlock(&list_lock);
}
