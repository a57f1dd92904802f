/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * User receives that never write outside the user's buffer, and learn the
 * size of a message longer than it (MLC_ERR_TRUNCATE names the sent size and
 * the buffer size).
 *
 * Why: MPI may write a truncated message past the end of a contiguous
 * receive buffer. Open MPI 4.1 does (ob1 reads the sender's whole message
 * into the buffer on its RDMA-read path: past about 1 KiB to self and 4 KiB
 * between processes), and still returns MPI_ERR_TRUNCATE. A receive type that
 * is not contiguous is bounded by its type in both Open MPI and MPICH (the
 * data goes through the datatype engine, which stops at the type's end). And
 * MPI's status does not always hold a truncated message's size: MPICH 4.0
 * reports none (0 bytes, or a count left over from an earlier receive);
 * Open MPI does (checked at start by a 2-byte message to self into 1 byte).
 *
 * So a contiguous receive into the user's buffer is posted only for a message
 * whose size is known and fits:
 *  - blocking: MPI_Mprobe tells the size; MPI_Mrecv takes that message into
 *    the buffer when it fits. MPI_Mprobe only matches (no message is sent):
 *    about 0.1 us per 8-byte receive;
 *  - nonblocking: MPI_Improbe; a message already there is taken the same way
 *    with MPI_Imrecv. A receive into 4 KiB or more that its caller waits on
 *    at once (a blocking call with a deadline, the default) keeps probing for up to
 *    2 ms, as long as core's wait would spin anyway. Otherwise the receive
 *    is posted as usual (MPI_Irecv, so
 *    MPI matches and progresses it as any posted receive, in posting order,
 *    any source and any tag: a receive waiting outside MPI's queue would
 *    stall a peer's rendezvous or a blocking send to self) with the bounded
 *    type: the caller's buffer followed by a spill area in two blocks with a
 *    gap (never contiguous, whatever memory lies after the buffer). MPI sees
 *    no truncation for up to about 1 GiB more and reports the full size; a
 *    message longer still is truncated inside the type. Cost: a datatype
 *    (cached for the last few buffers), and MPI moves the data through its
 *    datatype engine (Open MPI 4.1: no single copy; a 1 MiB receive posted
 *    before its message takes up to about twice as long; docs/MPI.md);
 *  - a matched message longer than the buffer is taken with the bounded type
 *    too (device memory: into scratch host memory, the buffer untouched).
 * The spill area is address space only (reserved once per process, pages
 * given back after a receive wrote them, never read, shared by concurrent
 * receives): it is never the user's memory.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "mpi_impl.h"

#define MLC_MPI_SPILL_BYTES ((size_t)1 << 30) /* address space; pages only where written */
#define MLC_MPI_PROBE_SPIN_S 0.002 /* as core's wait spins before it sleeps (src/core/request.c) */
#define MLC_MPI_PROBE_SPIN_FROM 4096 /* buffers this large probe-spin (Open MPI's shared-memory eager limit) */

static bool reports_size = true; /* MPI reports a truncated message's size */
static size_t spill_len = MLC_MPI_SPILL_BYTES; /* what a receive type names of it (test knob) */

static void *spill;
static pthread_once_t spill_once = PTHREAD_ONCE_INIT;

static void spill_map(void)
{
    void *p = mmap(NULL, MLC_MPI_SPILL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    spill = p == MAP_FAILED ? NULL : p;
    if (!spill)
        MLC_WARN("backend 'mpi': cannot reserve %u MiB of address space for receives (%s): a receive posted "
                 "before its message is a plain one, which Open MPI may let a longer message overrun; a "
                 "truncated message's size goes unreported", (unsigned)(MLC_MPI_SPILL_BYTES >> 20),
                 strerror(errno));
}

/* Receive 1 byte of a 2-byte message to self: did MPI report MPI_ERR_TRUNCATE and 2 bytes? */
static int truncation_reported(MPI_Comm self, bool *ok)
{
    unsigned char out[2] = {1, 2}, in[1] = {0};
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Status st;
    int rc = MPI_Isend(out, 2, MPI_BYTE, 0, 0, self, &send);
    if (rc != MPI_SUCCESS) return rc;
    int rrc = MPI_Recv(in, 1, MPI_BYTE, 0, 0, self, &st);
    int cls = MPI_SUCCESS;
    if (rrc != MPI_SUCCESS) MPI_Error_class(rrc, &cls);
    *ok = cls == MPI_ERR_TRUNCATE && mlc_mpi_received_bytes(&st, MPI_BYTE) == 2;
    return MPI_Wait(&send, MPI_STATUS_IGNORE);
}

mlc_status_t mlc_mpi_recv_size_start(void)
{
    MPI_Comm self = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_SELF, &self);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = truncation_reported(self, &reports_size);
    if (self != MPI_COMM_NULL) MPI_Comm_free(&self);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "backend 'mpi': probing how MPI reports truncated messages");
    MLC_DEBUG("MPI %s a truncated message's size", reports_size ? "reports" : "hides");
    return MLC_SUCCESS;
}

bool mlc_mpi_truncation_reported(void) { return reports_size; }

void mlc_mpi_set_spill_bytes(size_t bytes)
{
    spill_len = bytes == 0 || bytes > MLC_MPI_SPILL_BYTES ? MLC_MPI_SPILL_BYTES : bytes < 2 ? 2 : bytes;
}

/*
 * The bounded type (used with MPI_BOTTOM): the caller's cap bytes at buf,
 * then the spill area as two blocks with a one-byte gap between them, so the
 * type is never contiguous. Not committed.
 */
static int bounded_type(void *buf, size_t cap, MPI_Datatype *out)
{
    MPI_Datatype head = MPI_BYTE;
    int headn = (int)cap, rc = MPI_SUCCESS;
    if (cap > mlc_mpi_limits.count) {
        rc = mlc_mpi_big_type(cap, MPI_BYTE, 1, &head);
        headn = 1;
    }
    size_t half = spill_len / 2;
    MPI_Aint at[3];
    int len[3] = {headn, (int)half, (int)(spill_len - half - 1)};
    MPI_Datatype parts[3] = {head, MPI_BYTE, MPI_BYTE};
    if (rc == MPI_SUCCESS) rc = MPI_Get_address(cap ? buf : spill, &at[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Get_address(spill, &at[1]);
    if (rc == MPI_SUCCESS) rc = MPI_Get_address((char *)spill + half + 1, &at[2]);
    if (rc == MPI_SUCCESS) rc = MPI_Type_create_struct(3, len, at, parts, out);
    if (head != MPI_BYTE) MPI_Type_free(&head);
    return rc;
}

/* The same, kept by op until it ends; sets op->recv_type and op->spilled. */
static int op_bounded_type(mlc_mpi_op_t *op, void *buf, size_t cap, MPI_Datatype *out)
{
    int rc = bounded_type(buf, cap, out);
    if (rc != MPI_SUCCESS) return rc;
    if (mlc_mpi_op_keep_type(op, *out) != MLC_SUCCESS) return MPI_ERR_TYPE;
    op->recv_type = *out;
    op->spilled = true;
    return MPI_SUCCESS;
}

/*
 * Bounded types of the last few buffers posted before their message (a
 * program receives into the same buffers again and again): building one costs
 * about 0.2 us under Open MPI 4.1 and 1 us under MPICH 4.0, a look-up nothing.
 * The receive is posted under the lock, so an evicted type is only freed
 * once MPI holds it (MPI frees it when that receive ends).
 */
#define MLC_MPI_TYPE_CACHE 8
static struct {
    const void *buf;
    size_t cap, len;
    MPI_Datatype type;
} cache[MLC_MPI_TYPE_CACHE];
static unsigned cache_used, cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

void mlc_mpi_recv_size_stop(void)
{
    pthread_mutex_lock(&cache_lock);
    for (unsigned i = 0; i < cache_used; i++) MPI_Type_free(&cache[i].type);
    cache_used = cache_next = 0;
    pthread_mutex_unlock(&cache_lock);
}

static int irecv_cached(mlc_mpi_op_t *op, void *buf, size_t cap, int src, int tag, MPI_Comm comm, MPI_Request *mreq)
{
    pthread_mutex_lock(&cache_lock);
    unsigned i = 0;
    while (i < cache_used && !(cache[i].buf == buf && cache[i].cap == cap && cache[i].len == spill_len)) i++;
    int rc = MPI_SUCCESS;
    if (i == cache_used) {
        MPI_Datatype t;
        rc = bounded_type(buf, cap, &t);
        if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&t)) != MPI_SUCCESS) MPI_Type_free(&t);
        if (rc == MPI_SUCCESS) {
            if (cache_used < MLC_MPI_TYPE_CACHE) {
                i = cache_used++;
            } else { /* evict the oldest */
                i = cache_next++ % MLC_MPI_TYPE_CACHE;
                MPI_Type_free(&cache[i].type);
            }
            cache[i].buf = buf;
            cache[i].cap = cap;
            cache[i].len = spill_len;
            cache[i].type = t;
        }
    }
    if (rc == MPI_SUCCESS) rc = MPI_Irecv(MPI_BOTTOM, 1, cache[i].type, src, tag, comm, mreq);
    pthread_mutex_unlock(&cache_lock);
    /* The type may be freed once the receive is posted: its size is read as bytes. */
    op->recv_type = MPI_BYTE;
    op->spilled = true;
    return rc;
}

static bool host_buffer(const mlc_mpi_op_t *op) { return op->req->comm->cfg.memory == MLC_MEMORY_HOST; }

/* Take the message *msg that the probe `probed` describes (blocking when mreq is NULL). */
static int take(mlc_mpi_op_t *op, void *buf, size_t cap, MPI_Message *msg, const MPI_Status *probed,
                MPI_Request *mreq)
{
    op->size_known = true;
    op->msg_bytes = mlc_mpi_received_bytes(probed, MPI_BYTE);
    if (op->msg_bytes <= cap) return mlc_mpi_imrecv_bytes(op, buf, op->msg_bytes, msg, mreq, &op->recv_type);
    MPI_Datatype t;
    int rc;
    if (host_buffer(op)) {
        pthread_once(&spill_once, spill_map);
        if (spill) {
            if ((rc = op_bounded_type(op, buf, cap, &t)) != MPI_SUCCESS) return rc;
            return mreq ? MPI_Imrecv(MPI_BOTTOM, 1, t, msg, mreq)
                        : MPI_Mrecv(MPI_BOTTOM, 1, t, msg, &op->recv_status);
        }
    }
    /* Device memory (or no spill area): the whole message into scratch host memory. */
    void *scratch = mlc_mpi_op_alloc(op, op->msg_bytes);
    if (!scratch) return MPI_ERR_NO_MEM;
    return mlc_mpi_imrecv_bytes(op, scratch, op->msg_bytes, msg, mreq, &op->recv_type);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int mlc_mpi_recv_bounded(mlc_mpi_op_t *op, void *buf, size_t cap, int src, int tag, MPI_Comm comm,
                         MPI_Request *mreq, bool waited)
{
    MPI_Message msg;
    MPI_Status probed;
    int rc, found = 1;
    if (!mreq) rc = MPI_Mprobe(src, tag, comm, &msg, &probed);
    else rc = MPI_Improbe(src, tag, comm, &found, &msg, &probed);
    /* Waited on at once, into 4 KiB or more: look for the message as long as
     * core's wait would spin before sleeping (it usually comes within that),
     * so it lands by a contiguous receive. Smaller buffers take the bounded
     * type at once: for eager messages it costs less than probing. */
    double until = waited && cap >= MLC_MPI_PROBE_SPIN_FROM && !found ? seconds() + MLC_MPI_PROBE_SPIN_S : 0;
    for (unsigned i = 1; rc == MPI_SUCCESS && !found; i++) {
        if (i % 64 == 0 && seconds() > until) break; /* the clock every 64 probes */
        if (until == 0) break;
        rc = MPI_Improbe(src, tag, comm, &found, &msg, &probed);
    }
    if (rc != MPI_SUCCESS) return rc;
    if (found) return take(op, buf, cap, &msg, &probed, mreq);
    pthread_once(&spill_once, spill_map);
    /* Device memory (MPI's own bounds apply) or no spill area: a plain receive. */
    if (!spill || !host_buffer(op)) return mlc_mpi_irecv_bytes(op, buf, cap, src, tag, comm, mreq, &op->recv_type);
    return irecv_cached(op, buf, cap, src, tag, comm, mreq);
}

void mlc_mpi_spill_release(size_t cap, size_t got)
{
    if (!spill || got <= cap) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = got - cap + 1; /* + the gap */
    if (n > MLC_MPI_SPILL_BYTES) n = MLC_MPI_SPILL_BYTES;
    madvise(spill, (n + page - 1) / page * page, MADV_DONTNEED);
}

void mlc_mpi_spill_done(const mlc_mpi_op_t *op, size_t got)
{
    if (op->spilled) mlc_mpi_spill_release(op->recv_cap, got);
}

bool mlc_mpi_spill_ready(void)
{
    pthread_once(&spill_once, spill_map);
    return spill != NULL;
}

int mlc_mpi_irecv_capped(void *buf, size_t cap, int src, int tag, MPI_Comm comm, MPI_Request *r,
                         MPI_Datatype *type)
{
    *type = MPI_DATATYPE_NULL;
    if (!mlc_mpi_spill_ready()) return MPI_ERR_NO_MEM;
    int rc = bounded_type(buf, cap, type);
    if (rc != MPI_SUCCESS) return rc;
    if ((rc = MPI_Type_commit(type)) == MPI_SUCCESS) rc = MPI_Irecv(MPI_BOTTOM, 1, *type, src, tag, comm, r);
    if (rc != MPI_SUCCESS) MPI_Type_free(type); /* sets MPI_DATATYPE_NULL */
    return rc;
}
