/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pure schedule properties, no transport: for every algorithm, rank count
 * (1..17, 24, 32, 33, 64), size, root and in-place form, build every rank's
 * schedule and check that
 *  - every send has exactly one matching receive on its peer, with the same
 *    key (hence tag), byte count and round, and nobody talks to itself;
 *  - no step touches a buffer its rank does not have, writes the send
 *    buffer, or reaches outside a buffer (in-place aliasing included);
 *  - within a round no step writes bytes another step of the round reads or
 *    writes (the executor's round rule, sched.h);
 *  - message keys count up per peer and direction; building is repeatable;
 * plus algorithm-specific counts (ring allreduce sends 2(p-1) messages per
 * rank, ...) and that the dissemination barrier lets every rank hear from
 * every other.
 */
#include <stdint.h>
#include <stdlib.h>
#include "algos/build.h"
#include "cases.h"
#include "check.h"


typedef struct region {
    int space; /* 0 user memory (real addresses), 1 + rank: that rank's scratch */
    uintptr_t lo, hi;
} region_t;

static bool overlap(region_t a, region_t b)
{
    return a.space == b.space && a.lo < b.hi && b.lo < a.hi && a.lo < a.hi && b.lo < b.hi;
}
static bool same(region_t a, region_t b) { return a.space == b.space && a.lo == b.lo && a.hi == b.hi; }

typedef struct ctx {
    const char *what; /* "allreduce/ring p=5 count=7 ..." */
    const tcase_t *c;
    trank_t *ranks;
    mlc_sched_t *s;
} ctx_t;

/* The memory step t of rank r uses in buffer b at off; false (after reporting) when illegal. */
static bool locate(const ctx_t *x, int r, size_t i, uint8_t b, size_t off, size_t bytes, bool write,
                   region_t *out)
{
    const trank_t *t = &x->ranks[r];
    if (b == MLC_BUF_TMP) {
        CHECK(off + bytes <= x->s[r].tmp_bytes, "%s rank %d step %zu: scratch [%zu,+%zu) > %zu",
              x->what, r, i, off, bytes, x->s[r].tmp_bytes);
        *out = (region_t){1 + r, off, off + bytes};
        return off + bytes <= x->s[r].tmp_bytes;
    }
    const unsigned char *base = b == MLC_BUF_SEND ? t->send : t->recv;
    size_t len = b == MLC_BUF_SEND ? t->sendlen : t->recvlen;
    const char *name = b == MLC_BUF_SEND ? "send" : "recv";
    if (write && b == MLC_BUF_SEND) {
        CHECK(0, "%s rank %d step %zu writes the send buffer", x->what, r, i);
        return false;
    }
    if (!base) {
        CHECK(0, "%s rank %d step %zu uses the %s buffer it does not have", x->what, r, i, name);
        return false;
    }
    if (off + bytes > len) {
        CHECK(0, "%s rank %d step %zu: %s bytes [%zu,+%zu) beyond %zu", x->what, r, i, name, off,
              bytes, len);
        return false;
    }
    *out = (region_t){0, (uintptr_t)base + off, (uintptr_t)base + off + bytes};
    return true;
}

/* Reads and writes of one step (at most 2 reads, 2 writes). */
typedef struct access {
    region_t rd[2], wr[2];
    int nrd, nwr;
} access_t;

static bool step_access(const ctx_t *x, int r, size_t i, access_t *a)
{
    const mlc_step_t *t = &x->s[r].steps[i];
    a->nrd = a->nwr = 0;
    bool ok = true;
    switch (t->kind) {
    case MLC_STEP_SEND:
        ok = locate(x, r, i, t->buf, t->off, t->bytes, false, &a->rd[a->nrd++]);
        break;
    case MLC_STEP_RECV:
        ok = locate(x, r, i, t->buf, t->off, t->bytes, true, &a->wr[a->nwr++]);
        break;
    case MLC_STEP_COPY:
        ok = locate(x, r, i, t->buf, t->off, t->bytes, false, &a->rd[a->nrd++]) &&
             locate(x, r, i, t->dbuf, t->doff, t->bytes, true, &a->wr[a->nwr++]);
        break;
    case MLC_STEP_RECV_REDUCE:
    case MLC_STEP_REDUCE: {
        bool land = t->kind == MLC_STEP_RECV_REDUCE;
        region_t in, sec, out;
        ok = locate(x, r, i, t->buf, t->off, t->bytes, land, &in) &&
             locate(x, r, i, t->sbuf, t->soff, t->bytes, false, &sec) &&
             locate(x, r, i, t->dbuf, t->doff, t->bytes, true, &out);
        if (!ok) break;
        /* operands either are the output exactly or stay clear of it */
        CHECK(same(in, out) || !overlap(in, out), "%s rank %d step %zu: input partly overlaps output",
              x->what, r, i);
        CHECK(same(sec, out) || !overlap(sec, out),
              "%s rank %d step %zu: second operand partly overlaps output", x->what, r, i);
        CHECK(!overlap(in, sec), "%s rank %d step %zu: both operands overlap", x->what, r, i);
        if (land) a->wr[a->nwr++] = in;
        else a->rd[a->nrd++] = in;
        a->rd[a->nrd++] = sec;
        a->wr[a->nwr++] = out;
        break;
    }
    default:
        CHECK(0, "%s rank %d step %zu: bad kind %d", x->what, r, i, t->kind);
        ok = false;
    }
    return ok;
}

static bool is_comm(const mlc_step_t *t)
{
    return t->kind == MLC_STEP_SEND || t->kind == MLC_STEP_RECV || t->kind == MLC_STEP_RECV_REDUCE;
}

/* Buffers and the round rule for rank r. */
static void check_memory(const ctx_t *x, int r)
{
    const mlc_sched_t *s = &x->s[r];
    access_t *acc = calloc(s->nsteps ? s->nsteps : 1, sizeof *acc);
    bool *ok = calloc(s->nsteps ? s->nsteps : 1, sizeof *ok);
    for (size_t i = 0; i < s->nsteps; i++)
        ok[i] = s->steps[i].bytes > 0 && step_access(x, r, i, &acc[i]);
    for (size_t i = 0; i < s->nsteps; i++) {
        if (!ok[i] || !is_comm(&s->steps[i])) continue;
        for (size_t j = 0; j < s->nsteps && s->steps[j].round <= s->steps[i].round; j++) {
            if (j == i || !ok[j] || !is_comm(&s->steps[j]) || s->steps[j].round != s->steps[i].round)
                continue;
            for (int w = 0; w < acc[i].nwr; w++) {
                for (int k = 0; k < acc[j].nrd; k++)
                    CHECK(!overlap(acc[i].wr[w], acc[j].rd[k]),
                          "%s rank %d round %u: step %zu writes what step %zu reads", x->what, r,
                          s->steps[i].round, i, j);
                for (int k = 0; k < acc[j].nwr; k++)
                    CHECK(!overlap(acc[i].wr[w], acc[j].wr[k]),
                          "%s rank %d round %u: steps %zu and %zu write the same bytes", x->what, r,
                          s->steps[i].round, i, j);
            }
        }
    }
    free(acc);
    free(ok);
}

/* Matching, keys, peers. */
static void check_messages(const ctx_t *x)
{
    int p = x->c->p;
    for (int a = 0; a < p; a++) {
        const mlc_sched_t *s = &x->s[a];
        CHECK(s->finalized, "%s rank %d: schedule not finalized", x->what, a);
        for (size_t i = 1; i < s->nsteps; i++)
            CHECK(s->steps[i - 1].round <= s->steps[i].round, "%s rank %d: steps not sorted",
                  x->what, a);
        for (size_t i = 0; i < s->nsteps; i++) {
            const mlc_step_t *t = &s->steps[i];
            if (!is_comm(t)) continue;
            CHECK(t->peer >= 0 && t->peer < p && t->peer != a, "%s rank %d step %zu: peer %d",
                  x->what, a, i, t->peer);
            if (t->peer < 0 || t->peer >= p || t->peer == a) continue;
            bool send = t->kind == MLC_STEP_SEND;
            /* keys count up per peer and direction */
            uint32_t before = 0;
            for (size_t j = 0; j < i; j++) {
                const mlc_step_t *u = &s->steps[j];
                if (is_comm(u) && u->peer == t->peer && (u->kind == MLC_STEP_SEND) == send) before++;
            }
            CHECK(t->key == before, "%s rank %d step %zu: key %u, expected %u", x->what, a, i,
                  t->key, before);
            /* exactly one partner step on the peer */
            const mlc_sched_t *q = &x->s[t->peer];
            int found = 0;
            for (size_t j = 0; j < q->nsteps; j++) {
                const mlc_step_t *u = &q->steps[j];
                if (!is_comm(u) || u->peer != a || u->key != t->key || (u->kind == MLC_STEP_SEND) == send)
                    continue;
                found++;
                CHECK(u->bytes == t->bytes, "%s: %d -> %d key %u: %zu bytes sent, %zu received",
                      x->what, send ? a : t->peer, send ? t->peer : a, t->key,
                      send ? t->bytes : u->bytes, send ? u->bytes : t->bytes);
                CHECK(u->round == t->round, "%s: %d -> %d key %u: rounds %u and %u differ",
                      x->what, send ? a : t->peer, send ? t->peer : a, t->key, t->round, u->round);
            }
            CHECK(found == 1, "%s: rank %d step %zu (%s peer %d key %u): %d partners", x->what, a, i,
                  send ? "send to" : "receive from", t->peer, t->key, found);
        }
    }
}

static int count_kind(const mlc_sched_t *s, int kind)
{
    int n = 0;
    for (size_t i = 0; i < s->nsteps; i++) n += s->steps[i].kind == kind;
    return n;
}
static int count_recvs(const mlc_sched_t *s)
{
    return count_kind(s, MLC_STEP_RECV) + count_kind(s, MLC_STEP_RECV_REDUCE);
}
static size_t send_bytes(const mlc_sched_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nsteps; i++)
        if (s->steps[i].kind == MLC_STEP_SEND) n += s->steps[i].bytes;
    return n;
}

/* Algorithm-specific shapes. */
static void check_shape(const ctx_t *x, const mlc_algo_t *a)
{
    const tcase_t *c = x->c;
    int p = c->p, lg = mlc_log2_ceil(p);
    bool pow2 = (p & (p - 1)) == 0;
    size_t E = mlc_dtype_size(c->dtype), n = c->count * E;
    int total_sends = 0;
    for (int r = 0; r < p; r++) total_sends += count_kind(&x->s[r], MLC_STEP_SEND);
    for (int r = 0; r < p; r++) {
        const mlc_sched_t *s = &x->s[r];
        int sends = count_kind(s, MLC_STEP_SEND), recvs = count_recvs(s);
        if (a->coll == MLC_COLL_ALLREDUCE && !strcmp(a->name, "ring")) {
            CHECK(sends == 2 * (p - 1) && recvs == 2 * (p - 1), "%s rank %d: %d sends, %d receives",
                  x->what, r, sends, recvs);
            size_t expect = p == 1 ? 0
                                   : 2 * n - (mlc_blk_len(c->count, p, (r + 1) % p) +
                                              mlc_blk_len(c->count, p, (r + 2) % p)) * E;
            CHECK(send_bytes(s) == expect, "%s rank %d: sends %zu bytes, expected %zu", x->what, r,
                  send_bytes(s), expect);
        }
        if (a->coll == MLC_COLL_ALLREDUCE && !strcmp(a->name, "rd") && pow2)
            CHECK(sends == lg && send_bytes(s) == (size_t)lg * n, "%s rank %d: %d sends", x->what,
                  r, sends);
        if (a->coll == MLC_COLL_ALLREDUCE && !strcmp(a->name, "rabenseifner") && pow2 && p > 1)
            CHECK(sends == 2 * lg && s->nrounds == (uint32_t)(2 * lg), "%s rank %d: %d sends",
                  x->what, r, sends);
        if ((a->coll == MLC_COLL_ALLGATHER || a->coll == MLC_COLL_ALLGATHERV ||
             a->coll == MLC_COLL_REDUCE_SCATTER) && !strcmp(a->name, "ring"))
            CHECK(sends == p - 1 && recvs == p - 1, "%s rank %d: %d sends", x->what, r, sends);
        if (a->coll == MLC_COLL_ALLGATHER && !strcmp(a->name, "bruck"))
            CHECK(s->nrounds <= (uint32_t)(p > 1 ? lg : 1) && sends <= 2 * lg, "%s rank %d: %u rounds",
                  x->what, r, s->nrounds);
        if (a->coll == MLC_COLL_BARRIER)
            CHECK(sends == lg && recvs == lg, "%s rank %d: %d sends", x->what, r, sends);
        if ((a->coll == MLC_COLL_ALLTOALL || a->coll == MLC_COLL_ALLTOALLV) &&
            strcmp(a->name, "bruck") != 0)
            CHECK(sends == p - 1 && recvs == p - 1, "%s rank %d: %d sends", x->what, r, sends);
        if (a->coll == MLC_COLL_ALLTOALL && !strcmp(a->name, "bruck"))
            CHECK(sends == lg && recvs == lg, "%s rank %d: %d sends", x->what, r, sends);
        if (!strcmp(a->name, "linear") &&
            (a->coll == MLC_COLL_GATHER || a->coll == MLC_COLL_GATHERV ||
             a->coll == MLC_COLL_SCATTER || a->coll == MLC_COLL_SCATTERV)) {
            bool g = a->coll == MLC_COLL_GATHER || a->coll == MLC_COLL_GATHERV;
            int mine = g ? recvs : sends, other = g ? sends : recvs;
            if (r == c->root)
                CHECK(mine == p - 1 && other == 0, "%s root: %d messages", x->what, mine);
            else
                CHECK(other == 1 && mine == 0, "%s rank %d: %d messages", x->what, r, other);
        }
        if (a->coll == MLC_COLL_BROADCAST && !strcmp(a->name, "binomial"))
            CHECK(recvs == (r == c->root ? 0 : 1) && s->nrounds <= (uint32_t)(lg ? lg : 1),
                  "%s rank %d: %d receives", x->what, r, recvs);
    }
    if (a->coll == MLC_COLL_BROADCAST && !strcmp(a->name, "binomial"))
        CHECK(total_sends == p - 1, "%s: %d messages", x->what, total_sends);
}

/* The barrier: after the last round every rank has (transitively) heard from every rank. */
static void check_barrier(const ctx_t *x)
{
    int p = x->c->p;
    uint64_t heard[64] = {0}, next[64];
    if (p > 64) return;
    uint32_t rounds = 0;
    for (int r = 0; r < p; r++) {
        heard[r] = 1ull << r;
        if (x->s[r].nrounds > rounds) rounds = x->s[r].nrounds;
    }
    for (uint32_t k = 0; k < rounds; k++) {
        memcpy(next, heard, sizeof next);
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < x->s[r].nsteps; i++) {
                const mlc_step_t *t = &x->s[r].steps[i];
                if (t->round == k && t->kind == MLC_STEP_RECV) next[r] |= heard[t->peer];
            }
        memcpy(heard, next, sizeof next);
    }
    uint64_t all = p == 64 ? ~0ull : (1ull << p) - 1;
    for (int r = 0; r < p; r++)
        CHECK(heard[r] == all, "%s: rank %d heard from %llx only", x->what, r,
              (unsigned long long)heard[r]);
}

static void check_config(const mlc_algo_t *a, const tcase_t *c)
{
    int p = c->p;
    trank_t *ranks = calloc((size_t)p, sizeof *ranks);
    mlc_sched_t *s = calloc((size_t)p, sizeof *s);
    char what[200], d[160];
    tcase_describe(c, d, sizeof d);
    snprintf(what, sizeof what, "%s/%s %s", mlc_algos_coll_name(a->coll), a->name, d);
    ctx_t x = {what, c, ranks, s};
    bool built = tcase_setup(c, ranks) == 0;
    for (int r = 0; built && r < p; r++) {
        mlc_status_t st = mlc_algo_build(a, &ranks[r].d, &s[r]);
        CHECK(st == MLC_SUCCESS, "%s rank %d: %s", what, r, mlc_last_error());
        built = st == MLC_SUCCESS;
        if (built && r == c->p - 1) { /* repeatable */
            mlc_sched_t again;
            CHECK_OK(mlc_algo_build(a, &ranks[r].d, &again));
            CHECK(again.nsteps == s[r].nsteps && again.tmp_bytes == s[r].tmp_bytes &&
                      memcmp(again.steps, s[r].steps, again.nsteps * sizeof *again.steps) == 0,
                  "%s rank %d: a second build differs", what, r);
            mlc_sched_free(&again);
        }
    }
    if (built) {
        check_messages(&x);
        for (int r = 0; r < p; r++) check_memory(&x, r);
        check_shape(&x, a);
        if (a->coll == MLC_COLL_BARRIER) check_barrier(&x);
    }
    for (int r = 0; r < p; r++) mlc_sched_free(&s[r]);
    tcase_free(c, ranks);
    free(ranks);
    free(s);
}

/* The registry itself. */
static void check_registry(void)
{
    for (mlc_coll_t coll = 0; coll < MLC_COLL_COUNT; coll++) {
        const char *const *names = mlc_algo_names(coll);
        bool p2p = coll == MLC_COLL_SEND || coll == MLC_COLL_RECV || coll == MLC_COLL_SENDRECV;
        CHECK(p2p ? names[0] == NULL : names[0] != NULL, "%s: algorithms listed: %s",
              mlc_algos_coll_name(coll), names[0] ? names[0] : "none");
        bool ordered = false;
        size_t n = 0;
        for (const mlc_algo_t *a = mlc_algos; a->name; a++) {
            if (a->coll != coll) continue;
            CHECK(names[n] && !strcmp(names[n], a->name), "%s: names[%zu] is not %s",
                  mlc_algos_coll_name(coll), n, a->name);
            n++;
            ordered |= a->order_preserving;
            CHECK(mlc_algo_find(coll, a->name) == a, "find %s", a->name);
            CHECK(strspn(a->name, "abcdefghijklmnopqrstuvwxyz_") == strlen(a->name) &&
                      strlen(a->name) < 24,
                  "algorithm name '%s' is not short lowercase", a->name);
            CHECK(a->build && a->cost, "%s: missing functions", a->name);
        }
        if (!p2p) CHECK(ordered, "%s has no order-preserving algorithm", mlc_algos_coll_name(coll));
        CHECK(names[n] == NULL, "%s: extra names", mlc_algos_coll_name(coll));
    }
    CHECK(mlc_algo_find(MLC_COLL_ALLREDUCE, "nope") == NULL, "unknown name found");
    CHECK(mlc_algo_find(MLC_COLL_ALLREDUCE, NULL) == NULL, "NULL name found");
}

/* Bad descriptions are refused with a message naming the problem. */
static void check_refusals(void)
{
    const mlc_algo_t *ring = mlc_algo_find(MLC_COLL_ALLREDUCE, "ring");
    const mlc_algo_t *bino = mlc_algo_find(MLC_COLL_BROADCAST, "binomial");
    mlc_coll_desc_t d = {.coll = MLC_COLL_ALLREDUCE, .rank = 0, .size = 4, .count = 8, .esize = 4,
                         .commutative = true, .has_send = true, .has_recv = true};
    mlc_sched_t s;
    d.rank = 4;
    CHECK_ERR_MSG(mlc_algo_build(ring, &d, &s), MLC_ERR_INVALID_ARG, "rank 4");
    d.rank = 0;
    d.esize = 0;
    CHECK_ERR_MSG(mlc_algo_build(ring, &d, &s), MLC_ERR_INVALID_ARG, "element size");
    d.esize = 4;
    d.commutative = false;
    CHECK_ERR_MSG(mlc_algo_build(ring, &d, &s), MLC_ERR_UNSUPPORTED, "non-commutative");
    d.commutative = true;
    CHECK_ERR_MSG(mlc_algo_build(bino, &d, &s), MLC_ERR_INVALID_ARG, "broadcast");
    d.coll = MLC_COLL_BROADCAST;
    d.root = 7;
    CHECK_ERR_MSG(mlc_algo_build(bino, &d, &s), MLC_ERR_INVALID_ARG, "root 7");
    d.coll = MLC_COLL_ALLGATHERV;
    CHECK_ERR_MSG(mlc_algo_build(mlc_algo_find(MLC_COLL_ALLGATHERV, "ring"), &d, &s),
                  MLC_ERR_INVALID_ARG, "counts");
    CHECK_ERR_MSG(mlc_algo_build(NULL, &d, &s), MLC_ERR_INVALID_ARG, "NULL");
    /* the table's build entries check too (backends may call them directly) */
    d.coll = MLC_COLL_ALLREDUCE;
    d.commutative = false;
    mlc_sched_init(&s);
    CHECK_ERR_MSG(ring->build(&d, &s), MLC_ERR_UNSUPPORTED, "ring");
    mlc_sched_free(&s);
}

int main(void)
{
    CHECK_OK(tcase_init());
    check_registry();
    check_refusals();
    static const int procs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 32, 33, 64};
    static const size_t counts[] = {0, 1, 5, 64};
    for (const mlc_algo_t *a = mlc_algos; a->name; a++) {
        int before = check_failures;
        bool reducing = tcase_is_reducing(a->coll), rooted = tcase_is_rooted(a->coll);
        for (size_t pi = 0; pi < sizeof procs / sizeof procs[0]; pi++) {
            int p = procs[pi], roots[3] = {0, p / 2, p - 1};
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
                for (int ip = 0; ip < 2; ip++)
                    for (int ri = 0; ri < (rooted ? 3 : 1); ri++)
                        for (int nc = 0; nc < (reducing && a->order_preserving ? 2 : 1); nc++) {
                            if (ri > 0 && roots[ri] == roots[ri - 1]) continue;
                            tcase_t c = {a->coll, p, roots[ri], counts[ci],
                                         nc ? tcase_matrix_dtype : MLC_INT32,
                                         nc ? tcase_matrix_op : MLC_SUM, ip != 0, TV_EXACT};
                            check_config(a, &c);
                            if (check_failures > 40) return check_result("test_algos_sched");
                        }
        }
        char full[64];
        snprintf(full, sizeof full, "%s/%s", mlc_algos_coll_name(a->coll), a->name);
        printf("%-32s %s\n", full, check_failures == before ? "ok" : "FAILED");
    }
    return check_result("test_algos_sched");
}
