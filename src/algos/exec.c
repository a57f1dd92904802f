/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The schedule executor (exec.h). Rule for one round k:
 *   1. post every receive (RECV, RECV_REDUCE) of round k, then every SEND,
 *      through the transport; zero-byte steps are skipped;
 *   2. test the outstanding ones; a RECV_REDUCE is reduced the moment its
 *      data has landed;
 *   3. when every communication step of round k has completed, run the
 *      round's local COPY/REDUCE steps in list order;
 *   4. go on with round k+1.
 * A message's tag is mlc_exec_tag(seq, step key) (see mlc_sched_finalize).
 * The first transport failure ends the execution with its status.
 */
#include "exec.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/dtype.h"
#include "base/error.h"

struct mlc_exec {
    mlc_sched_t s;
    const unsigned char *send;
    unsigned char *recv, *tmp;
    mlc_scratch_t *scratch; /* where tmp came from and goes back to */
    mlc_dtype_t dtype;
    mlc_op_t op;
    size_t esize;
    size_t avg_count;
    int avg_p;
    uint64_t seq;
    size_t rbeg, rend;   /* steps of the current round */
    bool posted;         /* the current round's communication is posted */
    bool done;
    size_t outstanding;  /* handles not yet completed */
    mlc_status_t status; /* sticky failure */
    void **handles;      /* per step; non-NULL while a communication step is outstanding */
};

/* Scratch up to this size is zeroed, so signal-only messages (barrier) never
 * carry uninitialised bytes. */
#define MLC_EXEC_ZERO_TMP 256

static bool mlc_is_comm(const mlc_step_t *t)
{
    return t->kind == MLC_STEP_SEND || t->kind == MLC_STEP_RECV || t->kind == MLC_STEP_RECV_REDUCE;
}

static const unsigned char *mlc_exec_src(const mlc_exec_t *x, uint8_t buf)
{
    return buf == MLC_BUF_SEND ? x->send : buf == MLC_BUF_RECV ? x->recv : x->tmp;
}

static unsigned char *mlc_exec_dst(const mlc_exec_t *x, uint8_t buf)
{
    return buf == MLC_BUF_RECV ? x->recv : x->tmp;
}

static const char *const mlc_buf_names[] = {"send buffer", "receive buffer", "scratch"};

/* One buffer access of step i: present, not sendbuf when written, inside TMP. */
static mlc_status_t mlc_exec_check_access(const mlc_exec_t *x, size_t i, uint8_t buf, size_t off,
                                          size_t bytes, bool write)
{
    if (buf >= MLC_BUF_COUNT)
        return mlc_error(MLC_ERR_INTERNAL, "schedule step %zu: bad buffer id %u", i, buf);
    if (write && buf == MLC_BUF_SEND)
        return mlc_error(MLC_ERR_INTERNAL, "schedule step %zu writes the send buffer", i);
    if (buf == MLC_BUF_TMP) {
        if (off > x->s.tmp_bytes || bytes > x->s.tmp_bytes - off)
            return mlc_error(MLC_ERR_INTERNAL,
                             "schedule step %zu: scratch bytes [%zu, %zu) beyond its %zu bytes", i,
                             off, off + bytes, x->s.tmp_bytes);
    } else if (!mlc_exec_src(x, buf)) {
        return mlc_error(MLC_ERR_INTERNAL, "schedule step %zu uses the %s, which this rank lacks",
                         i, mlc_buf_names[buf]);
    }
    return MLC_SUCCESS;
}

static mlc_status_t mlc_exec_check(const mlc_exec_t *x)
{
    for (size_t i = 0; i < x->s.nsteps; i++) {
        const mlc_step_t *t = &x->s.steps[i];
        if (t->bytes == 0) continue;
        mlc_status_t st = MLC_SUCCESS;
        bool reduces = t->kind == MLC_STEP_REDUCE || t->kind == MLC_STEP_RECV_REDUCE;
        switch (t->kind) {
        case MLC_STEP_SEND:
            st = mlc_exec_check_access(x, i, t->buf, t->off, t->bytes, false);
            break;
        case MLC_STEP_RECV:
            st = mlc_exec_check_access(x, i, t->buf, t->off, t->bytes, true);
            break;
        case MLC_STEP_COPY:
            st = mlc_exec_check_access(x, i, t->buf, t->off, t->bytes, false);
            if (!st) st = mlc_exec_check_access(x, i, t->dbuf, t->doff, t->bytes, true);
            break;
        case MLC_STEP_RECV_REDUCE:
        case MLC_STEP_REDUCE:
            st = mlc_exec_check_access(x, i, t->buf, t->off, t->bytes,
                                       t->kind == MLC_STEP_RECV_REDUCE);
            if (!st) st = mlc_exec_check_access(x, i, t->sbuf, t->soff, t->bytes, false);
            if (!st) st = mlc_exec_check_access(x, i, t->dbuf, t->doff, t->bytes, true);
            break;
        default:
            st = mlc_error(MLC_ERR_INTERNAL, "schedule step %zu: bad kind %u", i, t->kind);
        }
        if (st) return st;
        if (reduces && (x->esize == 0 || t->bytes % x->esize != 0))
            return mlc_error(MLC_ERR_INTERNAL,
                             "schedule step %zu reduces %zu bytes, not whole elements of %zu bytes",
                             i, t->bytes, x->esize);
    }
    return MLC_SUCCESS;
}

mlc_status_t mlc_exec_create(mlc_sched_t *s, const void *sendbuf, void *recvbuf, mlc_dtype_t dtype,
                             mlc_op_t op, size_t avg_count, int avg_p, uint64_t seq,
                             mlc_scratch_t *scratch, mlc_exec_t **out)
{
    if (!s || !out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exec_create: schedule or output is NULL");
    mlc_exec_t *x = calloc(1, sizeof *x + s->nsteps * sizeof(void *));
    if (!x) {
        mlc_sched_free(s);
        return mlc_error(MLC_ERR_NO_MEMORY, "executor: no memory for %zu steps", s->nsteps);
    }
    /* Take the schedule over (its inline steps move with it). */
    x->s = *s;
    if (s->steps == s->inline_steps) x->s.steps = x->s.inline_steps;
    mlc_sched_init(s);
    x->handles = (void **)(x + 1);
    x->send = sendbuf;
    x->recv = recvbuf;
    x->dtype = dtype;
    x->op = op;
    x->esize = mlc_dtype_size(dtype);
    x->avg_count = avg_count;
    x->avg_p = avg_p;
    x->seq = seq;
    x->scratch = scratch;

    mlc_status_t st = mlc_sched_finalize(&x->s);
    if (!st && avg_count > 0 && (!recvbuf || avg_p < 1 || x->esize == 0))
        st = mlc_error(MLC_ERR_INTERNAL, "executor: avg over %zu elements needs a receive buffer, "
                                         "a dtype and p >= 1 (p = %d)",
                       avg_count, avg_p);
    if (!st && x->s.tmp_bytes > 0) {
        void *tmp = mlc_scratch_take(scratch, x->s.tmp_bytes);
        if (!tmp)
            st = mlc_error(MLC_ERR_NO_MEMORY, "executor: no memory for %zu bytes of scratch",
                           x->s.tmp_bytes);
        else if (x->s.tmp_bytes <= MLC_EXEC_ZERO_TMP)
            memset(tmp, 0, x->s.tmp_bytes);
        x->tmp = tmp;
    }
    if (!st) st = mlc_exec_check(x);
    if (st) {
        mlc_scratch_give(scratch, x->tmp);
        mlc_sched_free(&x->s);
        free(x);
        return st;
    }
    *out = x;
    return MLC_SUCCESS;
}

static void mlc_exec_reduce(const mlc_exec_t *x, const mlc_step_t *t)
{
    const unsigned char *in = mlc_exec_src(x, t->buf) + t->off;
    const unsigned char *second = mlc_exec_src(x, t->sbuf) + t->soff;
    unsigned char *out = mlc_exec_dst(x, t->dbuf) + t->doff;
    size_t n = t->bytes / x->esize;
    if (t->flags & MLC_STEP_SRC_HIGHER)
        mlc_reduce_apply3(second, in, out, n, x->dtype, x->op);
    else if (second == out)
        mlc_reduce_apply(in, out, n, x->dtype, x->op);
    else
        mlc_reduce_apply3(in, second, out, n, x->dtype, x->op);
}

static void mlc_exec_local(const mlc_exec_t *x, const mlc_step_t *t)
{
    if (t->bytes == 0) return;
    if (t->kind == MLC_STEP_REDUCE) {
        mlc_exec_reduce(x, t);
        return;
    }
    const unsigned char *src = mlc_exec_src(x, t->buf) + t->off;
    unsigned char *dst = mlc_exec_dst(x, t->dbuf) + t->doff;
    if (src != dst) memmove(dst, src, t->bytes);
}

/* base + off, or NULL where the rank has no such buffer (a 0-byte step of a
 * v-collective may name one). */
static const unsigned char *mlc_exec_at(const unsigned char *base, size_t off)
{
    return base ? base + off : NULL;
}

/*
 * Post the current round's receives, then its sends. A 0-byte step is
 * posted too: its pair's counts come from two ranks' arguments (a v-form
 * block, an alltoallv pair), and the empty message is what lets the peer
 * see that they disagree (the transport takes a message of exactly the size
 * it expects only); skipping it left the peer waiting for a block that never
 * came, or taking nothing where a block arrived later.
 */
static mlc_status_t mlc_exec_post(mlc_exec_t *x, const mlc_transport_t *t, void *tp)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = x->rbeg; i < x->rend; i++) {
            const mlc_step_t *st = &x->s.steps[i];
            if (!mlc_is_comm(st) || (st->kind == MLC_STEP_SEND) != (pass == 1))
                continue;
            uint64_t tag = mlc_exec_tag(x->seq, st->key);
            mlc_status_t rc;
            if (pass == 1)
                rc = t->isend(tp, st->peer, tag, mlc_exec_at(mlc_exec_src(x, st->buf), st->off), st->bytes,
                              &x->handles[i]);
            else
                rc = t->irecv(tp, st->peer, tag, (unsigned char *)mlc_exec_at(mlc_exec_dst(x, st->buf), st->off),
                              st->bytes, &x->handles[i]);
            if (rc) {
                x->handles[i] = NULL;
                return rc;
            }
            x->outstanding++;
        }
    }
    return MLC_SUCCESS;
}

int mlc_exec_progress(mlc_exec_t *x, const mlc_transport_t *t, void *tp, int *progressed)
{
    if (x->status) return x->status;
    if (x->done) return 1;
    for (;;) {
        if (!x->posted) {
            if (x->rbeg >= x->s.nsteps) {
                if (x->avg_count > 0)
                    mlc_reduce_divide(x->recv, x->avg_count, x->dtype, x->avg_p);
                x->done = true;
                *progressed = 1;
                return 1;
            }
            uint32_t round = x->s.steps[x->rbeg].round;
            for (x->rend = x->rbeg; x->rend < x->s.nsteps && x->s.steps[x->rend].round == round;)
                x->rend++;
            x->posted = true;
            *progressed = 1;
            mlc_status_t rc = mlc_exec_post(x, t, tp);
            if (rc) return x->status = rc;
        }
        for (size_t i = x->rbeg; i < x->rend && x->outstanding > 0; i++) {
            if (!x->handles[i]) continue;
            int rc = t->test(tp, x->handles[i]);
            if (rc == 0) continue;
            x->handles[i] = NULL;
            x->outstanding--;
            if (rc < 0) return x->status = (mlc_status_t)rc;
            if (x->s.steps[i].kind == MLC_STEP_RECV_REDUCE && x->s.steps[i].bytes) mlc_exec_reduce(x, &x->s.steps[i]);
            *progressed = 1;
        }
        if (x->outstanding > 0) return 0;
        for (size_t i = x->rbeg; i < x->rend; i++)
            if (!mlc_is_comm(&x->s.steps[i])) mlc_exec_local(x, &x->s.steps[i]);
        x->rbeg = x->rend;
        x->posted = false;
        *progressed = 1;
    }
}

void mlc_exec_pending_peers(const mlc_exec_t *x, char *buf, size_t len)
{
    if (len == 0) return;
    buf[0] = '\0';
    size_t used = 0;
    int prev = -1;
    for (;;) {
        int next = -1;
        for (size_t i = x->rbeg; i < x->rend; i++)
            if (x->handles[i] && x->s.steps[i].peer > prev &&
                (next < 0 || x->s.steps[i].peer < next))
                next = x->s.steps[i].peer;
        if (next < 0) return;
        char item[24];
        int n = snprintf(item, sizeof item, "%s%d", used ? ", " : "", next);
        if (used + (size_t)n + 6 > len) { /* no room for this one and a ", ..." */
            if (used + 6 <= len) memcpy(buf + used, ", ...", 6);
            return;
        }
        memcpy(buf + used, item, (size_t)n + 1);
        used += (size_t)n;
        prev = next;
    }
}

int mlc_exec_waits_for(const mlc_exec_t *x, int peer)
{
    for (size_t i = x->rbeg; i < x->rend; i++)
        if (x->handles[i] && x->s.steps[i].peer == peer) return 1;
    return 0;
}

void mlc_exec_destroy(mlc_exec_t *x, const mlc_transport_t *t, void *tp)
{
    if (!x) return;
    bool released = true;
    for (size_t i = 0; i < x->s.nsteps; i++)
        if (x->handles[i] && t && t->cancel && !t->cancel(tp, x->handles[i])) released = false;
    /* A send left running may still read the scratch: it is neither cached for
     * the next call nor freed, but left to the transport (as MPI is left a
     * failed operation's buffers, docs/MPI.md). Only after a failure. */
    if (released) mlc_scratch_give(x->scratch, x->tmp);
    mlc_sched_free(&x->s);
    free(x);
}
