/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The executor on hand-made schedules: the round rule (local steps after the
 * round's communication, in list order), operand order of reductions (two-
 * and three-operand, SRC_HIGHER), zero-byte steps, message keys and tags,
 * avg, refusal of schedules that misuse buffers, transport failures ending
 * the execution with their status, and pending_peers.
 */
#include <stdint.h>
#include <stdlib.h>
#include "algos/build.h"
#include "algos/exec.h"
#include "base/scratch.h"
#include "cases.h"
#include "check.h"
#include "sim.h"


/* Run p single-step-list schedules to completion on the simulator; returns sim_run's status. */
static int run(int p, mlc_sched_t *s, void **send, void **recv, mlc_dtype_t dt, mlc_op_t op,
               sim_opts_t o, long *isends)
{
    sim_world_t *w = sim_create(p, o);
    mlc_exec_t *x[8] = {0};
    bool done[8];
    char msg[256];
    int rc = 0;
    for (int r = 0; r < p && !rc; r++) rc = mlc_exec_create(&s[r], send[r], recv[r], dt, op, 0, p, 1, NULL, &x[r]);
    if (!rc) rc = sim_run(w, x, done, msg, sizeof msg);
    if (!rc) sim_finish(w);
    for (int r = 0; r < p; r++) {
        mlc_exec_destroy(x[r], &sim_transport, sim_tp(w, r));
        mlc_sched_free(&s[r]); /* those not handed over yet */
    }
    CHECK(sim_errors(w) == 0, "protocol: %s", sim_last_problem(w));
    if (isends) *isends = sim_isend_count(w);
    sim_destroy(w);
    return rc;
}

static void mat(uint32_t m[4], uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    m[0] = a, m[1] = b, m[2] = c, m[3] = d;
}
static void matmul(const uint32_t a[4], const uint32_t b[4], uint32_t out[4])
{
    uint32_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                     a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
    memcpy(out, r, sizeof r);
}

/* Local REDUCE: dbuf = buf (op) sbuf, or sbuf (op) buf with SRC_HIGHER, two or three operands. */
static void test_reduce_order(void)
{
    uint32_t A[4], B[4], C[4], AB[4], BA[4], AC[4], CA[4];
    mat(A, 1, 2, 3, 4), mat(B, 5, 6, 7, 8), mat(C, 2, 0, 1, 3);
    matmul(A, B, AB), matmul(B, A, BA), matmul(A, C, AC), matmul(C, A, CA);
    for (int variant = 0; variant < 4; variant++) {
        bool higher = variant & 1, three = variant & 2;
        uint32_t send[4], recv[8];
        memcpy(send, A, 16);
        memcpy(recv, B, 16);
        memcpy(recv + 4, C, 16);
        mlc_sched_t s;
        mlc_sched_init(&s);
        CHECK_OK(mlc_sched_add_reduce(&s, MLC_STEP_REDUCE, 0, -1, MLC_BUF_SEND, 0, MLC_BUF_RECV,
                                      three ? 16 : 0, MLC_BUF_RECV, 0, 16,
                                      higher ? MLC_STEP_SRC_HIGHER : 0));
        void *sp = send, *rp = recv;
        CHECK(run(1, &s, &sp, &rp, tcase_matrix_dtype, tcase_matrix_op, (sim_opts_t){0}, NULL) == 0,
              "run: %s", mlc_last_error());
        const uint32_t *want = three ? (higher ? CA : AC) : (higher ? BA : AB);
        CHECK(memcmp(recv, want, 16) == 0, "variant %d: got %u %u %u %u", variant, recv[0], recv[1],
              recv[2], recv[3]);
    }
}

/* RECV_REDUCE: the received data is `buf`; rank 1 has B, rank 0 sends A. */
static void test_recv_reduce_order(void)
{
    uint32_t A[4], B[4], AB[4], BA[4];
    mat(A, 1, 2, 3, 4), mat(B, 5, 6, 7, 8);
    matmul(A, B, AB), matmul(B, A, BA);
    for (int higher = 0; higher < 2; higher++)
        for (int rv = 0; rv < 2; rv++) {
            uint32_t s0[4], s1[4], r1[4] = {0};
            memcpy(s0, A, 16), memcpy(s1, B, 16);
            mlc_sched_t s[2];
            mlc_sched_init(&s[0]), mlc_sched_init(&s[1]);
            CHECK_OK(mlc_sched_add(&s[0], MLC_STEP_SEND, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 16, 0));
            CHECK_OK(mlc_sched_add_reduce(&s[1], MLC_STEP_RECV_REDUCE, 0, 0, MLC_BUF_TMP, 0,
                                          MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, 16,
                                          higher ? MLC_STEP_SRC_HIGHER : 0));
            s[1].tmp_bytes = 16;
            void *sp[2] = {s0, s1}, *rp[2] = {NULL, r1};
            sim_opts_t o = {.rendezvous = rv != 0, .seed = 3};
            CHECK(run(2, s, sp, rp, tcase_matrix_dtype, tcase_matrix_op, o, NULL) == 0, "run: %s",
                  mlc_last_error());
            CHECK(memcmp(r1, higher ? BA : AB, 16) == 0, "recv_reduce higher=%d: %u %u %u %u",
                  higher, r1[0], r1[1], r1[2], r1[3]);
        }
}

/* Local steps of a round run after its communication, in list order; rounds in order. */
static void test_rounds(void)
{
    int32_t s0[2] = {11, 22}, r1[4] = {0, 0, 0, 0};
    mlc_sched_t s[2];
    mlc_sched_init(&s[0]), mlc_sched_init(&s[1]);
    /* rank 1, added out of order: round 1 first, then round 0 */
    CHECK_OK(mlc_sched_add(&s[1], MLC_STEP_RECV, 1, 0, MLC_BUF_RECV, 4, MLC_BUF_RECV, 4, 4, 0));
    CHECK_OK(mlc_sched_add(&s[1], MLC_STEP_COPY, 0, -1, MLC_BUF_RECV, 0, MLC_BUF_RECV, 8, 4, 0));
    CHECK_OK(mlc_sched_add(&s[1], MLC_STEP_RECV, 0, 0, MLC_BUF_RECV, 0, MLC_BUF_RECV, 0, 4, 0));
    CHECK_OK(mlc_sched_add(&s[1], MLC_STEP_COPY, 0, -1, MLC_BUF_RECV, 8, MLC_BUF_RECV, 12, 4, 0));
    CHECK_OK(mlc_sched_add(&s[0], MLC_STEP_SEND, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_OK(mlc_sched_add(&s[0], MLC_STEP_SEND, 1, 1, MLC_BUF_SEND, 4, MLC_BUF_SEND, 4, 4, 0));
    CHECK(s[1].nrounds == 2, "nrounds %u", s[1].nrounds);
    CHECK_OK(mlc_sched_finalize(&s[1]));
    CHECK(s[1].steps[0].kind == MLC_STEP_COPY && s[1].steps[1].kind == MLC_STEP_RECV &&
              s[1].steps[2].kind == MLC_STEP_COPY && s[1].steps[3].round == 1,
          "stable sort by round broken");
    void *sp[2] = {s0, NULL}, *rp[2] = {NULL, r1};
    CHECK(run(2, s, sp, rp, MLC_INT32, MLC_SUM, (sim_opts_t){.rendezvous = true, .seed = 9}, NULL) == 0,
          "run: %s", mlc_last_error());
    CHECK(r1[0] == 11 && r1[1] == 22 && r1[2] == 11 && r1[3] == 11, "got %d %d %d %d", r1[0], r1[1],
          r1[2], r1[3]);
}

/* Zero-byte steps reach the transport as empty messages (the receiving side
 * checks that the sizes agree: a v-form pair with one count 0), and need no
 * buffer: neither rank has one here. */
static void test_zero_bytes(void)
{
    mlc_sched_t s[2];
    mlc_sched_init(&s[0]), mlc_sched_init(&s[1]);
    CHECK_OK(mlc_sched_add(&s[0], MLC_STEP_SEND, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 0, 0));
    CHECK_OK(mlc_sched_add(&s[1], MLC_STEP_RECV, 0, 0, MLC_BUF_RECV, 0, MLC_BUF_RECV, 0, 0, 0));
    void *sp[2] = {NULL, NULL}, *rp[2] = {NULL, NULL};
    long isends = -1;
    CHECK(run(2, s, sp, rp, MLC_INT32, MLC_SUM, (sim_opts_t){0}, &isends) == 0, "run: %s",
          mlc_last_error());
    CHECK(isends == 1, "%ld sends for one zero-byte send step", isends);
}

/* Keys count messages per peer and direction; the tag puts seq above them. */
static void test_keys(void)
{
    mlc_sched_t s;
    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, 2, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, 1, 2, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_RECV, 1, 1, MLC_BUF_RECV, 0, MLC_BUF_RECV, 0, 4, 0));
    CHECK_OK(mlc_sched_finalize(&s));
    /* sorted: send->1 (r0), send->2 (r1), recv<-1 (r1), send->1 (r2) */
    CHECK(s.steps[0].peer == 1 && s.steps[0].key == 0, "first send key %u", s.steps[0].key);
    CHECK(s.steps[1].peer == 2 && s.steps[1].key == 0, "send to 2 key %u", s.steps[1].key);
    CHECK(s.steps[2].kind == MLC_STEP_RECV && s.steps[2].key == 0, "recv key %u", s.steps[2].key);
    CHECK(s.steps[3].peer == 1 && s.steps[3].key == 1, "second send to 1 key %u", s.steps[3].key);
    CHECK(mlc_exec_tag(5, 3) == ((5ull << MLC_SCHED_KEY_BITS) | 3), "tag layout");
    CHECK(mlc_exec_tag(1, 0) != mlc_exec_tag(0, (1u << MLC_SCHED_KEY_BITS) - 1), "tags collide");
    mlc_sched_free(&s);
    /* growing past the inline steps keeps everything */
    mlc_sched_init(&s);
    for (int i = 0; i < 100; i++)
        CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, (uint32_t)(99 - i), 1, MLC_BUF_SEND, (size_t)i,
                               MLC_BUF_SEND, 0, 1, 0));
    CHECK_OK(mlc_sched_finalize(&s));
    for (int i = 0; i < 100; i++)
        CHECK(s.steps[i].round == (uint32_t)i && s.steps[i].off == (size_t)(99 - i) &&
                  s.steps[i].key == (uint32_t)i,
              "step %d: round %u off %zu key %u", i, s.steps[i].round, s.steps[i].off, s.steps[i].key);
    mlc_sched_free(&s);
}

static void test_refusals(void)
{
    int32_t buf[4] = {0};
    mlc_exec_t *x = NULL;
    mlc_sched_t s;
    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_COPY, 0, -1, MLC_BUF_RECV, 0, MLC_BUF_TMP, 8, 16, 0));
    s.tmp_bytes = 16;
    CHECK_ERR_MSG(mlc_exec_create(&s, buf, buf, MLC_INT32, MLC_SUM, 0, 1, 0, NULL, &x), MLC_ERR_INTERNAL,
                  "scratch");
    CHECK(s.nsteps == 0 && s.steps == s.inline_steps && x == NULL, "failed create kept the schedule");

    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_ERR_MSG(mlc_exec_create(&s, NULL, buf, MLC_INT32, MLC_SUM, 0, 1, 0, NULL, &x), MLC_ERR_INTERNAL,
                  "send buffer");
    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_RECV, 0, 1, MLC_BUF_SEND, 0, MLC_BUF_SEND, 0, 4, 0));
    CHECK_ERR_MSG(mlc_exec_create(&s, buf, buf, MLC_INT32, MLC_SUM, 0, 1, 0, NULL, &x), MLC_ERR_INTERNAL,
                  "writes the send buffer");
    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_REDUCE, 0, -1, MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, 6, 0));
    CHECK_ERR_MSG(mlc_exec_create(&s, buf, buf, MLC_INT32, MLC_SUM, 0, 1, 0, NULL, &x), MLC_ERR_INTERNAL,
                  "whole elements");
    mlc_sched_init(&s);
    CHECK_ERR_MSG(mlc_exec_create(&s, buf, NULL, MLC_INT32, MLC_AVG, 4, 2, 0, NULL, &x), MLC_ERR_INTERNAL,
                  "avg");
    CHECK(x == NULL, "output written on failure");
    /* a zero-byte step may name a buffer the rank lacks */
    mlc_sched_init(&s);
    CHECK_OK(mlc_sched_add(&s, MLC_STEP_COPY, 0, -1, MLC_BUF_SEND, 0, MLC_BUF_RECV, 0, 0, 0));
    CHECK_OK(mlc_exec_create(&s, NULL, NULL, MLC_INT32, MLC_SUM, 0, 1, 0, NULL, &x));
    int progressed = 0;
    CHECK(mlc_exec_progress(x, &sim_transport, NULL, &progressed) == 1, "empty run not done");
    CHECK(mlc_exec_progress(x, &sim_transport, NULL, &progressed) == 1, "done is not sticky");
    mlc_exec_destroy(x, &sim_transport, NULL);
    mlc_exec_destroy(NULL, &sim_transport, NULL);
}

/* avg: recv[0, avg_count) / p at the end; integers truncate toward zero. */
static void test_avg(void)
{
    int32_t iv[4] = {7, -7, 9, 100};
    float fv[3] = {3.0f, -1.0f, 0.5f};
    mlc_exec_t *x;
    int progressed = 0;
    mlc_sched_t s;
    mlc_sched_init(&s);
    CHECK_OK(mlc_exec_create(&s, NULL, iv, MLC_INT32, MLC_AVG, 3, 2, 0, NULL, &x));
    CHECK(mlc_exec_progress(x, &sim_transport, NULL, &progressed) == 1 && progressed, "not done");
    mlc_exec_destroy(x, &sim_transport, NULL);
    CHECK(iv[0] == 3 && iv[1] == -3 && iv[2] == 4 && iv[3] == 100, "int avg %d %d %d %d", iv[0],
          iv[1], iv[2], iv[3]);
    mlc_sched_init(&s);
    CHECK_OK(mlc_exec_create(&s, NULL, fv, MLC_FLOAT32, MLC_AVG, 3, 4, 0, NULL, &x));
    CHECK(mlc_exec_progress(x, &sim_transport, NULL, &progressed) == 1, "not done");
    mlc_exec_destroy(x, &sim_transport, NULL);
    CHECK(fv[0] == 0.75f && fv[1] == -0.25f && fv[2] == 0.125f, "float avg %g %g %g", (double)fv[0],
          (double)fv[1], (double)fv[2]);
}

/* Build every rank's schedule of a real algorithm and its executors. */
static void make(const char *coll_algo, mlc_coll_t coll, int p, size_t count, int32_t *bufs,
                 mlc_exec_t **x)
{
    const char *name = strchr(coll_algo, '/') + 1;
    const mlc_algo_t *a = mlc_algo_find(coll, name);
    for (int r = 0; r < p; r++) {
        mlc_coll_desc_t d = {.coll = coll, .rank = r, .size = p, .count = count, .esize = 4,
                             .commutative = true, .has_send = true, .has_recv = true};
        mlc_sched_t s;
        CHECK_OK(mlc_algo_build(a, &d, &s));
        int32_t *send = bufs + (size_t)r * 2 * count * (size_t)p, *recv = send + count * (size_t)p;
        CHECK_OK(mlc_exec_create(&s, send, recv, MLC_INT32, MLC_SUM, 0, p, 42, NULL, &x[r]));
    }
}

/* A failing transport ends the execution with its status; destroy cancels the rest. */
static void test_failures(void)
{
    for (int kind = 0; kind < 2; kind++)
        for (long at = 1; at <= 6; at++) {
            int p = 4;
            int32_t *bufs = calloc((size_t)p * 2 * 8 * (size_t)p, sizeof *bufs);
            mlc_exec_t *x[4];
            make("allreduce/ring", MLC_COLL_ALLREDUCE, p, 8, bufs, x);
            sim_opts_t o = {.rendezvous = true, .seed = (unsigned)at};
            if (kind == 0) o.fail_send_at = at;
            else o.fail_test_at = at;
            sim_world_t *w = sim_create(p, o);
            bool done[4];
            char msg[256];
            int rc = sim_run(w, x, done, msg, sizeof msg);
            mlc_status_t want = kind == 0 ? MLC_ERR_PEER_LOST : MLC_ERR_TIMEOUT;
            CHECK(rc == (int)want, "failure %d at %ld: run gave %d", kind, at, rc);
            CHECK(strstr(mlc_last_error(), "simulated") != NULL, "message: %s", mlc_last_error());
            /* the failed executor keeps reporting it */
            int sticky = 0;
            for (int r = 0; r < p; r++) {
                if (done[r]) continue;
                int progressed = 0, again = mlc_exec_progress(x[r], &sim_transport, sim_tp(w, r),
                                                              &progressed);
                CHECK(again >= 0 || again == (int)want, "rank %d after failure: %d", r, again);
                sticky += again == (int)want;
            }
            CHECK(sticky == 1, "failure %d at %ld: %d executors report it", kind, at, sticky);
            for (int r = 0; r < p; r++) mlc_exec_destroy(x[r], &sim_transport, sim_tp(w, r));
            sim_destroy(w);
            free(bufs);
        }
}

/* pending_peers names the peers of outstanding steps, in order, and shortens. */
static void test_pending(void)
{
    int p = 5;
    int32_t send[4] = {1}, recv[5 * 4] = {0};
    mlc_coll_desc_t d = {.coll = MLC_COLL_GATHER, .rank = 0, .size = p, .root = 0, .count = 1,
                         .esize = 4, .commutative = true, .has_send = true, .has_recv = true};
    mlc_sched_t s;
    CHECK_OK(mlc_algo_build(mlc_algo_find(MLC_COLL_GATHER, "linear"), &d, &s));
    mlc_exec_t *x;
    CHECK_OK(mlc_exec_create(&s, send, recv, MLC_INT32, MLC_SUM, 0, p, 0, NULL, &x));
    sim_world_t *w = sim_create(p, (sim_opts_t){0});
    int progressed = 0;
    CHECK(mlc_exec_progress(x, &sim_transport, sim_tp(w, 0), &progressed) == 0 && progressed,
          "root gather finished alone");
    char buf[64];
    mlc_exec_pending_peers(x, buf, sizeof buf);
    CHECK(strcmp(buf, "1, 2, 3, 4") == 0, "pending '%s'", buf);
    mlc_exec_pending_peers(x, buf, 8);
    CHECK(strcmp(buf, "1, ...") == 0, "short pending '%s'", buf);
    mlc_exec_pending_peers(x, buf, 1);
    CHECK(buf[0] == '\0', "one-byte buffer not empty");
    mlc_exec_destroy(x, &sim_transport, sim_tp(w, 0));
    sim_finish(w);
    CHECK(sim_errors(w) == 0, "cancel left something behind: %s", sim_last_problem(w));
    sim_destroy(w);
}

/* A transport that cannot take back a send it started (MPI with a send it
 * cannot cancel) leaves it running: its buffer may still be read, so the
 * executor must not give that scratch back to the cache for the next call. */
static const void *sent_from; /* the buffer of the send left running */

static mlc_status_t isend_noted(void *tp, int peer, uint64_t tag, const void *buf, size_t bytes, void **handle)
{
    sent_from = buf;
    return sim_transport.isend(tp, peer, tag, buf, bytes, handle);
}

static bool leave_running(void *tp, void *handle)
{
    sim_transport.cancel(tp, handle);
    return false;
}

static void test_left_running(void)
{
    for (int leaves = 0; leaves < 2; leaves++) {
        mlc_transport_t t = sim_transport;
        if (leaves) {
            t.isend = isend_noted;
            t.cancel = leave_running;
        }
        mlc_scratch_t cache = {0};
        mlc_sched_t s;
        mlc_sched_init(&s);
        CHECK_OK(mlc_sched_add(&s, MLC_STEP_SEND, 0, 1, MLC_BUF_TMP, 0, MLC_BUF_TMP, 0, 64, 0));
        s.tmp_bytes = 64;
        mlc_exec_t *x;
        CHECK_OK(mlc_exec_create(&s, NULL, NULL, MLC_INT32, MLC_SUM, 0, 2, 0, &cache, &x));
        sim_world_t *w = sim_create(2, (sim_opts_t){.rendezvous = true});
        int progressed = 0;
        CHECK(mlc_exec_progress(x, &t, sim_tp(w, 0), &progressed) == 0 && progressed,
              "a send nobody receives completed");
        mlc_exec_destroy(x, &t, sim_tp(w, 0)); /* abandoned, as after a failure */
        void *cached = atomic_load(&cache.cached);
        if (leaves) {
            CHECK(cached == NULL, "the scratch of a send left running went back to the cache");
            mlc_scratch_give(NULL, (void *)sent_from); /* here the test is the transport that finishes it */
        } else
            CHECK(cached != NULL, "the scratch of a cancelled send was not kept for the next call");
        mlc_scratch_drain(&cache);
        sim_destroy(w);
    }
}

int main(void)
{
    CHECK_OK(tcase_init());
    test_reduce_order();
    test_recv_reduce_order();
    test_rounds();
    test_zero_bytes();
    test_keys();
    test_refusals();
    test_avg();
    test_failures();
    test_pending();
    test_left_running();
    return check_result("test_algos_exec");
}
