/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Our own algorithms on MPI: MLC_ALGO_ALLREDUCE=ring (etc.) runs the
 * src/algos schedule over MPI point-to-point on the hidden communicator, so
 * its steps never match a user receive. Native (MPI's collective) is first
 * in every list this backend reports and the default but for large reduce
 * and reduce_scatter (mlc_mpi_choose_algo).
 *
 * Executor tags are (seq << MLC_SCHED_KEY_BITS) | key; MPI tags are ints up
 * to MPI_TAG_UB, so the sequence number is taken modulo a window
 * (MPI_TAG_UB >> MLC_SCHED_KEY_BITS: 2047 operations with Open MPI, 255 with
 * MPICH). Collective S takes the tags of S - window: it posts nothing until
 * that one has completed on this rank (window_blocker below).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_impl.h"

struct mlc_mpi_handle {
    mlc_mpi_handle_t *next_free, *next_all;
    MPI_Request r;
    MPI_Datatype type; /* a big or bounded type to free, or MPI_DATATYPE_NULL */
    bool recv;         /* a receive: its message must be `bytes` long */
    bool capped;       /* posted with the bounded type (a longer message shows its length) */
    int peer;
    size_t bytes;
};

int mlc_mpi_hidden_tag(const mlc_mpi_comm_t *c, uint64_t seq, uint32_t key)
{
    if (c->seq_window == 0) return -1;
    return (int)(((seq % c->seq_window) << MLC_SCHED_KEY_BITS) | key);
}

static mlc_mpi_handle_t *handle_get(mlc_mpi_comm_t *c)
{
    mlc_mpi_handle_t *h = c->free_handles;
    if (h) {
        c->free_handles = h->next_free;
    } else {
        h = calloc(1, sizeof *h);
        if (!h) return NULL;
        h->next_all = c->all_handles;
        c->all_handles = h;
    }
    h->r = MPI_REQUEST_NULL;
    h->type = MPI_DATATYPE_NULL;
    return h;
}

static void handle_put(mlc_mpi_comm_t *c, mlc_mpi_handle_t *h)
{
    if (h->type != MPI_DATATYPE_NULL) MPI_Type_free(&h->type);
    h->next_free = c->free_handles;
    c->free_handles = h;
}

void mlc_mpi_handles_free(mlc_mpi_comm_t *c)
{
    for (mlc_mpi_handle_t *h = c->all_handles, *n; h; h = n) {
        n = h->next_all;
        free(h);
    }
    c->all_handles = c->free_handles = NULL;
}

/* ---- the transport the executor drives -------------------------------------------- */

static mlc_status_t tp_post(void *tp, bool send, int peer, uint64_t tag64, void *buf, size_t bytes,
                            void **handle)
{
    mlc_mpi_op_t *op = tp;
    mlc_request_t *req = op->req;
    mlc_mpi_comm_t *c = req->comm->impl;
    uint32_t key = (uint32_t)(tag64 & ((UINT64_C(1) << MLC_SCHED_KEY_BITS) - 1));
    int tag = mlc_mpi_hidden_tag(c, tag64 >> MLC_SCHED_KEY_BITS, key);
    mlc_mpi_handle_t *h = handle_get(c);
    if (!h) return mlc_core->error(MLC_ERR_NO_MEMORY, "rank %d: out of memory for an algorithm step", req->comm->rank);
    h->recv = !send;
    h->peer = peer;
    h->bytes = bytes;
    h->capped = false;
    int rc = MPI_SUCCESS;
    /* A receive whose message is longer than planned (ranks that passed
     * different counts) must not run past buf: Open MPI's single copy writes a
     * plain receive's whole message into it. Device memory keeps MPI's own
     * bounds, and so does host memory where no spill area could be reserved. */
    bool bounded = !send && req->comm->cfg.memory == MLC_MEMORY_HOST && mlc_mpi_spill_ready();
    if (bounded) {
        rc = mlc_mpi_irecv_capped(buf, bytes, peer, tag, c->hidden, &h->r, &h->type);
        h->capped = rc == MPI_SUCCESS;
    } else if (bytes <= mlc_mpi_limits.count) {
        rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->hidden, &h->r)
                  : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->hidden, &h->r);
#if MLC_MPI_HAS_LARGE_COUNT
    } else if (mlc_mpi_use_c()) {
        rc = send ? MPI_Isend_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, tag, c->hidden, &h->r)
                  : MPI_Irecv_c(buf, (MPI_Count)bytes, MPI_BYTE, peer, tag, c->hidden, &h->r);
#endif
    } else {
        rc = mlc_mpi_big_type(bytes, MPI_BYTE, 1, &h->type);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&h->type);
        if (rc == MPI_SUCCESS)
            rc = send ? MPI_Isend(buf, 1, h->type, peer, tag, c->hidden, &h->r)
                      : MPI_Irecv(buf, 1, h->type, peer, tag, c->hidden, &h->r);
    }
    if (rc != MPI_SUCCESS) {
        handle_put(c, h);
        return mlc_mpi_error(rc, "rank %d: %s algorithm '%s': %s of %zu bytes %s rank %d", req->comm->rank,
                             mlc_core->coll_name(req->coll), req->algo, send ? "send" : "receive", bytes,
                             send ? "to" : "from", peer);
    }
    *handle = h;
    return MLC_SUCCESS;
}

static mlc_status_t tp_isend(void *tp, int peer, uint64_t tag, const void *buf, size_t bytes, void **handle)
{
    return tp_post(tp, true, peer, tag, (void *)buf, bytes, handle);
}

static mlc_status_t tp_irecv(void *tp, int peer, uint64_t tag, void *buf, size_t bytes, void **handle)
{
    return tp_post(tp, false, peer, tag, buf, bytes, handle);
}

static int tp_test(void *tp, void *handle)
{
    mlc_mpi_op_t *op = tp;
    mlc_request_t *req = op->req;
    mlc_mpi_comm_t *c = req->comm->impl;
    mlc_mpi_handle_t *h = handle;
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Test(&h->r, &flag, h->recv ? &st : MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        /* longer than buffer and spill area: the spill was written whole */
        if (h->capped && mlc_mpi_truncated(rc)) mlc_mpi_spill_release(h->bytes, SIZE_MAX);
        handle_put(c, h);
        return mlc_mpi_error(rc, "rank %d: %s algorithm '%s': a step failed (%s)", req->comm->rank,
                             mlc_core->coll_name(req->coll), req->algo,
                             mlc_mpi_truncated(rc) ? "a message longer than planned: " MLC_MPI_COUNT_QUESTION
                                                   : "MPI's error follows");
    }
    if (!flag) return 0;
    size_t got = h->recv ? mlc_mpi_received_bytes(&st, MPI_BYTE) : h->bytes;
    if (h->capped) mlc_mpi_spill_release(h->bytes, got);
    bool exact = !h->recv || got == h->bytes;
    int peer = h->peer;
    size_t planned = h->bytes;
    handle_put(c, h);
    if (!exact)
        /* A piece of another length: the ranks passed different counts (the
         * schedule's pieces follow from the count). Longer is a truncation. */
        return mlc_core->error(got > planned ? MLC_ERR_TRUNCATE : MLC_ERR_MISMATCH,
                               "rank %d: %s algorithm '%s': a message of %zu bytes from rank %d where this rank's "
                               "count plans %zu; " MLC_MPI_COUNT_QUESTION,
                               req->comm->rank, mlc_core->coll_name(req->coll), req->algo, got, peer, planned);
    return 1;
}

/* A receive is cancelled; a send MPI cannot cancel is left to MPI (the
 * communicator has failed: its buffers may still be read, docs/MPI.md). */
static bool tp_cancel(void *tp, void *handle)
{
    mlc_mpi_op_t *op = tp;
    mlc_mpi_handle_t *h = handle;
    bool released = true;
    if (!mlc_mpi_finalized() && h->r != MPI_REQUEST_NULL) released = mlc_mpi_drop_request(&h->r);
    handle_put(op->req->comm->impl, h);
    return released;
}

static const mlc_transport_t mpi_transport = {tp_isend, tp_irecv, tp_test, tp_cancel};

/* ---- the tag window ---------------------------------------------------------------------- */

/* The sequence number of an earlier algorithm operation still in flight on
 * this rank that shares op's tags (a window or more back), or -1. With 600
 * ring allreduces in flight on MPICH their messages crossed: wrong sums and
 * no error. So an operation posts nothing until every such one has
 * completed here (mlc_mpi_algo_progress); its start stays local, since MPI
 * lets ranks start nonblocking collectives of different communicators in
 * different orders. Then `seq`'s receives are posted after all of theirs
 * have matched, on every rank, and MPI's order between two messages of one
 * sender and tag pairs each with its own. The list is in start order, which
 * is call order (one thread at a time calls on a communicator): the oldest
 * algorithm operation in it blocks op if any does. Called with c locked. */
static int64_t window_blocker(const mlc_mpi_op_t *op)
{
    const mlc_mpi_comm_t *c = op->req->comm->impl;
    for (const mlc_mpi_op_t *e = c->head; e && e != op; e = e->next)
        if (e->exec) return e->req->seq + c->seq_window <= op->req->seq ? (int64_t)e->req->seq : -1;
    return -1;
}

/* ---- operations ----------------------------------------------------------------------- */

mlc_status_t mlc_mpi_start_algo(mlc_request_t *req)
{
    const mlc_args_t *a = &req->args;
    mlc_mpi_comm_t *c = req->comm->impl;
    mlc_mpi_op_t *op = mlc_mpi_op_init(req);
    const char *cn = mlc_core->coll_name(req->coll);
    if (c->seq_window == 0)
        return mlc_core->error(MLC_ERR_UNSUPPORTED, "rank %d: %s algorithm '%s': MPI_TAG_UB %d leaves no room for "
                         "algorithm tags (use native)", req->comm->rank, cn, req->algo, c->tag_ub);
    const mlc_algo_t *algo = mlc_core->algo_find(req->coll, req->algo);
    if (!algo)
        return mlc_core->error(MLC_ERR_INTERNAL, "%s: no algorithm '%s' in src/algos", cn, req->algo);
    mlc_coll_desc_t d;
    mlc_core->request_desc(req, &d);
    mlc_sched_t s;
    mlc_status_t st = mlc_core->algo_build(algo, &d, &s);
    if (st != MLC_SUCCESS) {
        mlc_core->sched_free(&s);
        if (st == MLC_ERR_UNSUPPORTED)
            return mlc_core->error(st, "%s: algorithm '%s' cannot run this call (%s)", cn, algo->name, mlc_core->last_error());
        return st;
    }
    size_t avg_count = 0;
    if (a->op == MLC_AVG && a->recvbuf &&
        (req->coll == MLC_COLL_ALLREDUCE || req->coll == MLC_COLL_REDUCE || req->coll == MLC_COLL_REDUCE_SCATTER))
        avg_count = a->count;
    st = mlc_core->exec_create(&s, a->sendbuf, a->recvbuf, a->dtype, a->op, avg_count, req->comm->size, req->seq,
                         &req->comm->host_scratch, &op->exec);
    if (st != MLC_SUCCESS) return st;
    op->polled = true;
    return mlc_mpi_op_submit(op);
}

int mlc_mpi_algo_progress(mlc_mpi_op_t *op, int *moved)
{
    if (window_blocker(op) >= 0) return 0; /* its tags are still another's */
    int progressed = 0;
    int r = mlc_core->exec_progress(op->exec, &mpi_transport, op, &progressed);
    if (progressed) *moved = 1;
    if (r != 0) {
        mlc_core->exec_destroy(op->exec, &mpi_transport, op);
        op->exec = NULL;
    }
    return r;
}

void mlc_mpi_algo_abandon(mlc_mpi_op_t *op)
{
    mlc_core->exec_destroy(op->exec, &mpi_transport, op);
    op->exec = NULL;
}

void mlc_mpi_algo_pending_peers(const mlc_mpi_op_t *op, char *buf, size_t len)
{
    int64_t blocker = window_blocker(op);
    if (blocker < 0) {
        mlc_core->exec_pending_peers(op->exec, buf, len);
        return;
    }
    const mlc_mpi_comm_t *c = op->req->comm->impl;
    snprintf(buf, len, "none yet: it has not begun, as #%lld, %llu collectives earlier, uses the same MPI tags "
             "(they repeat every %u collectives) and has not completed here", (long long)blocker,
             (unsigned long long)(op->req->seq - (uint64_t)blocker), c->seq_window);
}

/* ---- the algorithms this backend offers ---------------------------------------------- */

static const char **algo_lists[MLC_COLL_COUNT];
static pthread_once_t algo_lists_once = PTHREAD_ONCE_INIT;

static void build_algo_lists(void)
{
    for (mlc_coll_t k = 0; k < MLC_COLL_COUNT; k++) {
        const char *const *names = mlc_core->algo_names(k);
        size_t n = 0;
        while (names && names[n]) n++;
        const char **list = malloc(sizeof *list * (n + 2));
        if (!list) continue; /* NULL: native only */
        list[0] = "native";
        for (size_t i = 0; i < n; i++) list[i + 1] = names[i];
        list[n + 1] = NULL;
        algo_lists[k] = list;
    }
}

/* MPI's own collective, except where ours were measured far faster: MPI's
 * nonblocking reduce and reduce_scatter (what every call with a deadline
 * runs, the default) move a segment per test; Open MPI 4.1 and MPICH 4.0 on
 * one host, 2 and 4 ranks, took 12-180 ms for a 16 MiB reduce and 68-144 ms
 * for a 16 MiB reduce_scatter, against 3-6 ms for binomial and ring over MPI
 * point-to-point (docs/MPI.md). The sizes where ours start to win here: 64
 * KiB for reduce, 256 KiB (the whole send buffer) for reduce_scatter.
 * Without a deadline on any rank, MPI's blocking collectives run: they stay;
 * so do calls on device memory. Every rank gives the same answer (the deadline is agreed at creation, the
 * counts must match). An op ours cannot take falls back to MPI's. */
#define OWN_REDUCE_MIN_BYTES ((size_t)64 << 10)
#define OWN_REDUCE_SCATTER_MIN_BYTES ((size_t)256 << 10)

bool mlc_mpi_chooses(mlc_coll_t coll) { return coll == MLC_COLL_REDUCE || coll == MLC_COLL_REDUCE_SCATTER; }

const char *mlc_mpi_choose_algo(const mlc_request_t *req)
{
    const mlc_comm_t *comm = req->comm;
    const mlc_mpi_comm_t *c = comm->impl;
    size_t bytes = req->args.count * req->args.esize;
    /* Device memory (agreed at creation) goes to a CUDA-aware MPI as it is
     * only through MPI's own collectives (mpi_gpu.c). */
    if (comm->timeout_refused || comm->size < 2 || c->seq_window == 0 || comm->gpu_kind >= 0) return "native";
    if (req->coll == MLC_COLL_REDUCE && bytes >= OWN_REDUCE_MIN_BYTES) return "binomial";
    if (req->coll == MLC_COLL_REDUCE_SCATTER && bytes * (size_t)comm->size >= OWN_REDUCE_SCATTER_MIN_BYTES)
        return "ring";
    return "native";
}

const char *const *mlc_mpi_algos(mlc_coll_t coll)
{
    pthread_once(&algo_lists_once, build_algo_lists);
    return coll >= 0 && coll < MLC_COLL_COUNT ? algo_lists[coll] : NULL;
}
