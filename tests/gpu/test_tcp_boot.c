/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous that carries the NCCL unique id under torchrun. Ranks
 * are threads of this process on loopback (127.0.0.1 only, port chosen by
 * the kernel): success for 4 ranks, a wrong secret, a wrong world size, a
 * rank that never comes (rank 0 names it), and no rank 0 (the peer names
 * the address). Timeouts are short; nothing is timed, only codes checked.
 */
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include "../unit/unit.h"
#include "backends/nccl/tcp_boot.h"

typedef struct peer {
    mlc_tcp_boot_t b;
    unsigned char got[128];
    mlc_status_t st;
    char msg[512];
} peer_t;

static void *fetch(void *p)
{
    peer_t *pe = p;
    pe->st = mlc_tcp_boot_fetch(&pe->b, pe->got, sizeof pe->got);
    snprintf(pe->msg, sizeof pe->msg, "%s", mlc_last_error());
    return NULL;
}

static void make_payload(unsigned char *id)
{
    for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 7 + 3);
}

static void test_share(void)
{
    mlc_tcp_listener_t *l;
    int port = 0;
    CHECK_OK(mlc_tcp_boot_listen("127.0.0.1", 0, &l, &port));
    CHECK(port > 0, "port %d", port);
    unsigned char id[128];
    make_payload(id);
    peer_t peers[4];
    pthread_t t[4];
    for (int r = 1; r < 4; r++) {
        peers[r] = (peer_t){.b = {"127.0.0.1", port, r, 4, "job-42", 10.0}};
        pthread_create(&t[r], NULL, fetch, &peers[r]);
    }
    mlc_tcp_boot_t b = {"127.0.0.1", port, 0, 4, "job-42", 10.0};
    CHECK_OK(mlc_tcp_boot_serve(l, &b, id, sizeof id));
    for (int r = 1; r < 4; r++) {
        pthread_join(t[r], NULL);
        CHECK(peers[r].st == MLC_SUCCESS, "rank %d: %s", r, peers[r].msg);
        CHECK(memcmp(peers[r].got, id, sizeof id) == 0, "rank %d got other bytes", r);
    }
}

static void *serve_thread(void *p)
{
    void **a = p;
    mlc_tcp_listener_t *l = a[0];
    mlc_tcp_boot_t *b = a[1];
    static unsigned char id[128];
    make_payload(id);
    mlc_status_t *st = a[2];
    *st = mlc_tcp_boot_serve(l, b, id, sizeof id);
    snprintf(a[3], 512, "%s", mlc_last_error());
    return NULL;
}

static void test_refusals_concurrent(void)
{
    mlc_tcp_listener_t *l;
    int port = 0;
    CHECK_OK(mlc_tcp_boot_listen("127.0.0.1", 0, &l, &port));
    mlc_tcp_boot_t b = {"127.0.0.1", port, 0, 2, "job", 5.0};
    mlc_status_t sst = MLC_ERR_INTERNAL;
    char smsg[512] = "";
    void *args[4] = {l, &b, &sst, smsg};
    pthread_t server;
    pthread_create(&server, NULL, serve_thread, args);

    peer_t bad_secret = {.b = {"127.0.0.1", port, 1, 2, "wrong", 5.0}};
    fetch(&bad_secret);
    CHECK(bad_secret.st == MLC_ERR_CONFIG && strstr(bad_secret.msg, "job secret does not match"),
          "%s: %s", mlc_status_name(bad_secret.st), bad_secret.msg);
    peer_t bad_size = {.b = {"127.0.0.1", port, 1, 3, "job", 5.0}};
    fetch(&bad_size);
    CHECK(bad_size.st == MLC_ERR_MISMATCH && strstr(bad_size.msg, "world size differs"), "%s", bad_size.msg);
    peer_t bad_rank = {.b = {"127.0.0.1", port, 0, 2, "job", 5.0}};
    fetch(&bad_rank);
    CHECK(bad_rank.st == MLC_ERR_MISMATCH && strstr(bad_rank.msg, "rank out of range"), "%s", bad_rank.msg);
    peer_t good = {.b = {"127.0.0.1", port, 1, 2, "job", 5.0}};
    fetch(&good);
    CHECK(good.st == MLC_SUCCESS, "good peer after refusals: %s", good.msg);
    pthread_join(server, NULL);
    CHECK(sst == MLC_SUCCESS, "server: %s", smsg);
}

static void test_timeouts(void)
{
    /* Rank 2 never comes: rank 0 names it. */
    mlc_tcp_listener_t *l;
    int port = 0;
    CHECK_OK(mlc_tcp_boot_listen("127.0.0.1", 0, &l, &port));
    peer_t one = {.b = {"127.0.0.1", port, 1, 3, "s", 5.0}};
    pthread_t t;
    pthread_create(&t, NULL, fetch, &one);
    unsigned char id[128];
    make_payload(id);
    mlc_tcp_boot_t b = {"127.0.0.1", port, 0, 3, "s", 1.0};
    CHECK_ERR_MSG(mlc_tcp_boot_serve(l, &b, id, sizeof id), MLC_ERR_TIMEOUT, "heard nothing from rank(s) 2 ");
    pthread_join(t, NULL);
    CHECK(one.st == MLC_SUCCESS, "rank 1: %s", one.msg);

    /* No rank 0: the peer gives up at its deadline, naming where it looked. */
    CHECK_OK(mlc_tcp_boot_listen("127.0.0.1", 0, &l, &port));
    mlc_tcp_boot_close(l); /* the port is now (very likely) closed */
    peer_t lonely = {.b = {"127.0.0.1", port, 1, 2, "s", 0.5}};
    fetch(&lonely);
    CHECK(lonely.st == MLC_ERR_TIMEOUT, "lonely peer: %s", mlc_status_name(lonely.st));
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    CHECK(strstr(lonely.msg, where) != NULL, "message does not name %s: %s", where, lonely.msg);

    /* Bad arguments fail at once. */
    mlc_tcp_boot_t bad = {"127.0.0.1", 0, 1, 2, "s", 1.0};
    CHECK_ERR_MSG(mlc_tcp_boot_fetch(&bad, id, sizeof id), MLC_ERR_INVALID_ARG, "bad arguments");
    CHECK_ERR_MSG(mlc_tcp_boot_listen("no.such.host.invalid", 0, &l, &port), MLC_ERR_CONFIG, "cannot resolve");
    /* world size 1: nothing to do */
    mlc_tcp_boot_t single = {"127.0.0.1", 1, 0, 1, "s", 1.0};
    CHECK_OK(mlc_tcp_boot_share(&single, id, sizeof id));
}

static void *fetch_late(void *p)
{
    peer_t *pe = p;
    long ns = 600000000L * pe->b.rank; /* rank r arrives at 0.6 r s */
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
    return fetch(p);
}

/* MLC_TIMEOUT is "no progress for N s": ranks that arrive 0.6 s apart keep a
 * 1 s rendezvous alive for 1.8 s in all. */
static void test_timeout_counts_from_progress(void)
{
    mlc_tcp_listener_t *l;
    int port = 0;
    CHECK_OK(mlc_tcp_boot_listen("127.0.0.1", 0, &l, &port));
    peer_t peers[4];
    pthread_t t[4];
    for (int r = 1; r < 4; r++) {
        peers[r] = (peer_t){.b = {"127.0.0.1", port, r, 4, "slow", 10.0}};
        pthread_create(&t[r], NULL, fetch_late, &peers[r]);
    }
    unsigned char id[128];
    make_payload(id);
    mlc_tcp_boot_t b = {"127.0.0.1", port, 0, 4, "slow", 1.0};
    mlc_status_t st = mlc_tcp_boot_serve(l, &b, id, sizeof id);
    CHECK(st == MLC_SUCCESS, "rank 0 gave up while ranks kept arriving: %s", mlc_last_error());
    for (int r = 1; r < 4; r++) pthread_join(t[r], NULL);
}

int main(void)
{
    test_timeout_counts_from_progress();
    test_share();
    test_refusals_concurrent();
    test_timeouts();
    return unit_result("tcp_boot");
}
