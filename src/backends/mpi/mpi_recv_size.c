/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a user receive learns the size of a message longer than its buffer
 * (MLC_ERR_TRUNCATE names the sent size and the buffer size) where MPI would
 * not say:
 *  - MPICH 4.0 reports no size for a truncated message (0 bytes, or a count
 *    left over from an earlier receive);
 *  - Open MPI 4.1 reports the sender's size, except that a message to self
 *    meeting an already posted, smaller receive is cut silently (success,
 *    buffer-size bytes).
 * Which case this MPI is, two 2-byte messages to self into 1 byte tell at
 * start (the receive posted after, then before the message). Receives MPI
 * reports correctly stay plain MPI_Recv / MPI_Irecv: nothing extra on them.
 * The others:
 *  - blocking: MPI_Mprobe tells the size, MPI_Mrecv takes that message;
 *  - nonblocking: MPI_Improbe; a message already there is taken with
 *    MPI_Imrecv. Otherwise the receive is posted as usual (MPI_Irecv, so MPI
 *    matches and progresses it as any posted receive: a receive waiting
 *    outside MPI's queue would stall a peer's rendezvous or self send), with a
 *    datatype of the caller's buffer followed by a spill area: MPI sees no
 *    truncation for up to MLC_MPI_SPILL_BYTES more and reports the full size;
 *    the spilled pages are given back afterwards. The area is shared and never
 *    read, so concurrent receives may write it at once. A message longer
 *    still is truncated by MPI and reported without its size.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mpi_impl.h"

#define MLC_MPI_SPILL_BYTES ((size_t)1 << 30) /* address space; pages only where written */

static int forced = -1;            /* test knob: -1 = as found */
static bool reports_size = true;   /* MPI reports a truncated message's size... */
static bool posted_self_ok = true; /* ... also for a message to self meeting a posted receive */

static void *spill;
static pthread_once_t spill_once = PTHREAD_ONCE_INIT;

static void spill_map(void)
{
    void *p = mmap(NULL, MLC_MPI_SPILL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    spill = p == MAP_FAILED ? NULL : p;
    if (!spill) MLC_DEBUG("no spill area for nonblocking receives: truncated sizes may go unreported");
}

/* Receive 1 byte of a 2-byte message to self, posted after or before the
 * message: did MPI report MPI_ERR_TRUNCATE and 2 bytes? */
static int truncation_reported(MPI_Comm self, bool receive_first, bool *ok)
{
    unsigned char out[2] = {1, 2}, in[1] = {0};
    MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    MPI_Status st;
    int rc = receive_first ? MPI_Irecv(in, 1, MPI_BYTE, 0, 0, self, &recv) : MPI_SUCCESS;
    if (rc == MPI_SUCCESS) rc = MPI_Isend(out, 2, MPI_BYTE, 0, 0, self, &send);
    if (rc != MPI_SUCCESS) return rc;
    int rrc = receive_first ? MPI_Wait(&recv, &st) : MPI_Recv(in, 1, MPI_BYTE, 0, 0, self, &st);
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
    if (rc == MPI_SUCCESS) rc = truncation_reported(self, false, &reports_size);
    if (rc == MPI_SUCCESS) rc = truncation_reported(self, true, &posted_self_ok);
    if (self != MPI_COMM_NULL) MPI_Comm_free(&self);
    if (rc != MPI_SUCCESS) return mlc_mpi_error(rc, "backend 'mpi': probing how MPI reports truncated messages");
    MLC_DEBUG("MPI %s a truncated message's size%s; receives probe first: %s", reports_size ? "reports" : "hides",
              reports_size && !posted_self_ok ? " (not a message to self meeting a posted receive)" : "",
              !reports_size ? "all" : posted_self_ok ? "none" : "nonblocking ones that self may match");
    return MLC_SUCCESS;
}

bool mlc_mpi_truncation_reported(void) { return reports_size; }

void mlc_mpi_set_recv_probes(int mode) { forced = mode < 0 ? -1 : mode != 0; }

bool mlc_mpi_recv_probes(const mlc_comm_t *comm, int src, bool posted)
{
    if (forced >= 0) return forced == 1;
    if (!reports_size) return true;
    return posted && !posted_self_ok && (src == MPI_ANY_SOURCE || src == comm->rank);
}

int mlc_mpi_recv_probed(mlc_mpi_op_t *op, void *buf, size_t cap, int src, int tag, MPI_Comm comm)
{
    MPI_Message msg;
    MPI_Status probed;
    int rc = MPI_Mprobe(src, tag, comm, &msg, &probed);
    if (rc != MPI_SUCCESS) return rc;
    op->size_known = true;
    op->msg_bytes = mlc_mpi_received_bytes(&probed, MPI_BYTE);
    return mlc_mpi_imrecv_bytes(op, buf, cap, &msg, NULL, &op->recv_type);
}

/* The caller's cap bytes at buf, then the spill area (used with MPI_BOTTOM). */
static int spill_type(const void *buf, size_t cap, MPI_Datatype *out)
{
    MPI_Aint at[2];
    int len[2] = {(int)cap, (int)MLC_MPI_SPILL_BYTES};
    int rc = MPI_Get_address(cap ? buf : spill, &at[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Get_address(spill, &at[1]);
    if (rc == MPI_SUCCESS) rc = MPI_Type_create_hindexed(2, len, at, MPI_BYTE, out);
    return rc;
}

int mlc_mpi_irecv_sized(mlc_mpi_op_t *op, void *buf, size_t cap, int src, int tag, MPI_Comm comm,
                        MPI_Request *slot)
{
    int found = 0;
    MPI_Message msg;
    MPI_Status probed;
    int rc = MPI_Improbe(src, tag, comm, &found, &msg, &probed);
    if (rc != MPI_SUCCESS) return rc;
    if (found) {
        op->size_known = true;
        op->msg_bytes = mlc_mpi_received_bytes(&probed, MPI_BYTE);
        return mlc_mpi_imrecv_bytes(op, buf, cap, &msg, slot, &op->recv_type);
    }
    pthread_once(&spill_once, spill_map);
    /* Device memory or a buffer one block cannot describe: a plain receive. */
    if (!spill || cap > INT_MAX || op->req->comm->cfg.memory != MLC_MEMORY_HOST)
        return mlc_mpi_irecv_bytes(op, buf, cap, src, tag, comm, slot, &op->recv_type);
    MPI_Datatype t;
    rc = spill_type(buf, cap, &t);
    if (rc != MPI_SUCCESS) return rc;
    if (mlc_mpi_op_keep_type(op, t) != MLC_SUCCESS) return MPI_ERR_TYPE;
    op->recv_type = t;
    op->spilled = true;
    return MPI_Irecv(MPI_BOTTOM, 1, t, src, tag, comm, slot);
}

void mlc_mpi_spill_done(const mlc_mpi_op_t *op, size_t got)
{
    if (!op->spilled || got <= op->recv_cap) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = got - op->recv_cap;
    if (n > MLC_MPI_SPILL_BYTES) n = MLC_MPI_SPILL_BYTES;
    madvise(spill, (n + page - 1) / page * page, MADV_DONTNEED);
}
