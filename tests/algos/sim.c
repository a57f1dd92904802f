/* SPDX-License-Identifier: BSD-3-Clause */
/* The simulated transport of the algos tests (see sim.h). */
#include "sim.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/error.h"

typedef struct sim_op sim_op_t;

/* A message in flight: eager (data copied) or rendezvous (read from sbuf on delivery). */
typedef struct sim_msg {
    struct sim_msg *next;
    int src, dst;
    uint64_t tag;
    size_t bytes;
    unsigned char *data;  /* eager copy */
    const void *sbuf;     /* rendezvous source */
    sim_op_t *send_op;    /* rendezvous: completes on delivery */
} sim_msg_t;

struct sim_op {
    sim_op_t *next; /* in the posted-receive list */
    bool is_send;
    int rank, peer;
    uint64_t tag;
    void *rbuf;
    size_t bytes;
    int state;      /* 0 pending, 1 done, < 0 failed */
    sim_msg_t *msg; /* rendezvous send: its message while undelivered */
};

typedef struct sim_rank {
    sim_world_t *w;
    int rank;
} sim_rank_t;

struct sim_world {
    int p;
    sim_opts_t o;
    unsigned rng;
    sim_msg_t *msgs;     /* undelivered, in send order */
    sim_op_t *recvs;     /* posted, in post order */
    sim_rank_t *ranks;
    long isends, tests;
    long activity;       /* deliveries and deliberate delays */
    int errors;
    char problem[256];
};

static void sim_problem(sim_world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sim_problem(sim_world_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    w->errors++;
    vsnprintf(w->problem, sizeof w->problem, fmt, ap);
    va_end(ap);
}

static unsigned sim_rand(sim_world_t *w)
{
    w->rng = w->rng * 1103515245u + 12345u;
    return (w->rng >> 16) & 0x7fff;
}

sim_world_t *sim_create(int p, sim_opts_t opts)
{
    sim_world_t *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->ranks = calloc((size_t)p, sizeof *w->ranks);
    if (!w->ranks) {
        free(w);
        return NULL;
    }
    w->p = p;
    w->o = opts;
    w->rng = opts.seed * 2654435761u + 1;
    for (int r = 0; r < p; r++) w->ranks[r] = (sim_rank_t){w, r};
    return w;
}

void *sim_tp(sim_world_t *w, int rank) { return &w->ranks[rank]; }
int sim_errors(const sim_world_t *w) { return w->errors; }
const char *sim_last_problem(const sim_world_t *w) { return w->problem; }
long sim_isend_count(const sim_world_t *w) { return w->isends; }

static void sim_msg_unlink(sim_world_t *w, sim_msg_t *m)
{
    for (sim_msg_t **pp = &w->msgs; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            return;
        }
}

static void sim_recv_unlink(sim_world_t *w, sim_op_t *op)
{
    for (sim_op_t **pp = &w->recvs; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            return;
        }
}

/* Deliver message m into posted receive r. */
static void sim_deliver(sim_world_t *w, sim_msg_t *m, sim_op_t *r)
{
    sim_msg_unlink(w, m);
    sim_recv_unlink(w, r);
    if (m->bytes != r->bytes) {
        sim_problem(w, "message %d -> %d tag %llu: %zu bytes sent, %zu expected", m->src, m->dst,
                    (unsigned long long)m->tag, m->bytes, r->bytes);
        r->state = mlc_error(MLC_ERR_TRUNCATE, "simulated message size mismatch");
    } else {
        if (m->bytes) memcpy(r->rbuf, m->data ? m->data : m->sbuf, m->bytes); /* an empty one may have no buffers */
        r->state = 1;
    }
    if (m->send_op) {
        m->send_op->state = 1;
        m->send_op->msg = NULL;
    }
    free(m->data);
    free(m);
    w->activity++;
}

/* Try to complete op (a receive, or a rendezvous send) now. */
static void sim_try(sim_world_t *w, sim_op_t *op)
{
    if (op->state != 0) return;
    if (op->is_send) {
        sim_msg_t *m = op->msg;
        for (sim_op_t *r = w->recvs; r; r = r->next)
            if (r->rank == m->dst && r->peer == m->src && r->tag == m->tag) {
                /* FIFO: only the oldest message with this key may match. */
                for (sim_msg_t *o = w->msgs; o != m; o = o->next)
                    if (o->src == m->src && o->dst == m->dst && o->tag == m->tag) return;
                sim_deliver(w, m, r);
                return;
            }
        return;
    }
    for (sim_msg_t *m = w->msgs; m; m = m->next)
        if (m->dst == op->rank && m->src == op->peer && m->tag == op->tag) {
            sim_deliver(w, m, op);
            return;
        }
}

static mlc_status_t sim_isend(void *tp, int peer, uint64_t tag, const void *buf, size_t bytes,
                              void **handle)
{
    sim_rank_t *me = tp;
    sim_world_t *w = me->w;
    if (++w->isends == w->o.fail_send_at)
        return mlc_error(MLC_ERR_PEER_LOST, "simulated: rank %d lost", peer);
    if (peer < 0 || peer >= w->p || peer == me->rank)
        sim_problem(w, "rank %d sends to rank %d (tag %llu, %zu bytes)", me->rank, peer,
                    (unsigned long long)tag, bytes);
    for (sim_msg_t *m = w->msgs; m; m = m->next)
        if (m->src == me->rank && m->dst == peer && m->tag == tag)
            sim_problem(w, "two messages %d -> %d with tag %llu outstanding (%zu, %zu bytes)",
                        me->rank, peer, (unsigned long long)tag, m->bytes, bytes);
    sim_op_t *op = calloc(1, sizeof *op);
    sim_msg_t *m = calloc(1, sizeof *m);
    if (!op || !m || (!w->o.rendezvous && !(m->data = malloc(bytes ? bytes : 1)))) {
        free(op);
        if (m) free(m->data);
        free(m);
        return mlc_error(MLC_ERR_NO_MEMORY, "simulated isend: no memory");
    }
    *m = (sim_msg_t){.src = me->rank, .dst = peer, .tag = tag, .bytes = bytes, .data = m->data};
    *op = (sim_op_t){.is_send = true, .rank = me->rank, .peer = peer, .tag = tag, .bytes = bytes};
    if (w->o.rendezvous) {
        m->sbuf = buf;
        m->send_op = op;
        op->msg = m;
    } else {
        if (bytes) memcpy(m->data, buf, bytes);
        op->state = 1;
    }
    /* append: delivery order is send order */
    sim_msg_t **pp = &w->msgs;
    while (*pp) pp = &(*pp)->next;
    *pp = m;
    *handle = op;
    return MLC_SUCCESS;
}

static mlc_status_t sim_irecv(void *tp, int peer, uint64_t tag, void *buf, size_t bytes,
                              void **handle)
{
    sim_rank_t *me = tp;
    sim_world_t *w = me->w;
    if (peer < 0 || peer >= w->p || peer == me->rank)
        sim_problem(w, "rank %d receives from rank %d (tag %llu, %zu bytes)", me->rank, peer,
                    (unsigned long long)tag, bytes);
    for (sim_op_t *r = w->recvs; r; r = r->next)
        if (r->rank == me->rank && r->peer == peer && r->tag == tag)
            sim_problem(w, "rank %d posts two receives from %d with tag %llu (%zu, %zu bytes)",
                        me->rank, peer, (unsigned long long)tag, r->bytes, bytes);
    sim_op_t *op = calloc(1, sizeof *op);
    if (!op) return mlc_error(MLC_ERR_NO_MEMORY, "simulated irecv: no memory");
    *op = (sim_op_t){.rank = me->rank, .peer = peer, .tag = tag, .rbuf = buf, .bytes = bytes};
    sim_op_t **pp = &w->recvs;
    while (*pp) pp = &(*pp)->next;
    *pp = op;
    *handle = op;
    return MLC_SUCCESS;
}

/* Remove op and whatever it still has in the world, and free it. */
static void sim_release(sim_world_t *w, sim_op_t *op)
{
    if (op->is_send && op->msg) {
        sim_msg_unlink(w, op->msg);
        free(op->msg->data);
        free(op->msg);
    } else if (!op->is_send && op->state == 0) {
        sim_recv_unlink(w, op);
    }
    free(op);
}

static int sim_test(void *tp, void *handle)
{
    sim_world_t *w = ((sim_rank_t *)tp)->w;
    sim_op_t *op = handle;
    if (op->state == 0) {
        if (++w->tests == w->o.fail_test_at) {
            sim_release(w, op);
            return mlc_error(MLC_ERR_TIMEOUT, "simulated: timed out");
        }
        if (w->o.seed && sim_rand(w) % 4 == 0) {
            w->activity++; /* pretend it is still on its way */
            return 0;
        }
        sim_try(w, op);
    }
    int st = op->state;
    if (st == 0) return 0;
    free(op); /* a completed op is out of every list */
    return st;
}

static bool sim_cancel(void *tp, void *handle)
{
    sim_release(((sim_rank_t *)tp)->w, handle);
    return true;
}

const mlc_transport_t sim_transport = {sim_isend, sim_irecv, sim_test, sim_cancel};

int sim_run(sim_world_t *w, mlc_exec_t **x, bool *done, char *msg, size_t len)
{
    int p = w->p;
    for (int r = 0; r < p; r++) done[r] = false;
    for (;;) {
        int ndone = 0, progressed = 0;
        long before = w->activity;
        /* A rotating start, so no rank is always first. */
        int first = w->o.seed ? (int)(sim_rand(w) % (unsigned)p) : 0;
        for (int i = 0; i < p; i++) {
            int r = (first + i) % p;
            if (done[r]) {
                ndone++;
                continue;
            }
            int rc = mlc_exec_progress(x[r], &sim_transport, sim_tp(w, r), &progressed);
            if (rc < 0) return rc;
            if (rc == 1) {
                done[r] = true;
                ndone++;
            }
        }
        if (ndone == p) return 0;
        if (!progressed && w->activity == before) {
            size_t used = 0;
            msg[0] = '\0';
            for (int r = 0; r < p && used + 40 < len; r++) {
                if (done[r]) continue;
                char peers[128];
                mlc_exec_pending_peers(x[r], peers, sizeof peers);
                used += (size_t)snprintf(msg + used, len - used, "rank %d waits on [%s]; ", r,
                                         peers);
            }
            return mlc_error(MLC_ERR_INTERNAL, "simulation deadlocked: %s", msg);
        }
    }
}

void sim_finish(sim_world_t *w)
{
    for (sim_msg_t *m = w->msgs; m; m = m->next)
        sim_problem(w, "message %d -> %d tag %llu (%zu bytes) never received", m->src, m->dst,
                    (unsigned long long)m->tag, m->bytes);
    for (sim_op_t *r = w->recvs; r; r = r->next)
        sim_problem(w, "receive at %d from %d tag %llu (%zu bytes) never matched", r->rank,
                    r->peer, (unsigned long long)r->tag, r->bytes);
}

void sim_destroy(sim_world_t *w)
{
    if (!w) return;
    while (w->msgs) {
        sim_msg_t *m = w->msgs;
        w->msgs = m->next;
        if (m->send_op) m->send_op->msg = NULL; /* the op itself belongs to its executor */
        free(m->data);
        free(m);
    }
    while (w->recvs) {
        sim_op_t *r = w->recvs;
        w->recvs = r->next;
        free(r);
    }
    free(w->ranks);
    free(w);
}
