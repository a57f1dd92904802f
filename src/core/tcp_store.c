/* SPDX-License-Identifier: BSD-3-Clause */
/* The built-in TCP key-value store (tcp_store.h). */
#include "tcp_store.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/sock.h"
#include "base/wait.h"

#define STORE_MAGIC 0x4d4c5331u /* "MLS1" */
#define STORE_KEY_MAX 1024u
#define STORE_VALUE_MAX (1u << 20)
/* One slow or silent client may hold the server at most this long per request. */
#define STORE_IO_TIMEOUT_S 10.0

enum { OP_HELLO = 1, OP_SET, OP_GET };

#define STORE_STATUS_LIST(X)                                                        \
    X(ST_OK, "ok")                                                                  \
    X(ST_MISSING, "key not set yet")                                                \
    X(ST_BAD_TOKEN, "the job token differs from the unique id's")                   \
    X(ST_BAD_NRANKS, "the rank count differs from the first rank's")                \
    X(ST_BAD_REQUEST, "malformed request (not an mlcomm bootstrap client, or another version)") \
    X(ST_NO_MEMORY, "the server is out of memory")
enum {
#define MLC_X_ENUM(name, text) name,
    STORE_STATUS_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    ST_COUNT
};
static const char *const status_text[] = {
#define MLC_X_TEXT(name, text) text,
    STORE_STATUS_LIST(MLC_X_TEXT)
#undef MLC_X_TEXT
};

/* ---- server ---------------------------------------------------------------- */

typedef struct kv {
    struct kv *next;
    char *key;
    void *value;
    uint32_t len;
} kv_t;

typedef struct client {
    int fd;
    bool joined; /* presented the token */
} client_t;

typedef struct server {
    int lfd;
    char token[MLC_TCP_STORE_TOKEN_HEX + 1];
    kv_t *keys;
    client_t *clients;
    int nclients, cap;
    uint32_t nranks; /* from the first HELLO */
    bool ever_joined;
} server_t;

static bool tokens_equal(const char *a, const char *b, size_t len)
{
    /* Constant time in the content: the comparison leaks nothing of the token. */
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

static kv_t *find(server_t *s, const char *key)
{
    for (kv_t *k = s->keys; k; k = k->next)
        if (strcmp(k->key, key) == 0) return k;
    return NULL;
}

static int reply(int fd, uint32_t status, const void *value, uint32_t len)
{
    double deadline = mlc_sock_deadline(STORE_IO_TIMEOUT_S);
    uint32_t head[2] = {htonl(status), htonl(len)};
    int err = mlc_sock_write_all(fd, head, sizeof head, deadline);
    if (!err && len) err = mlc_sock_write_all(fd, value, len, deadline);
    return err;
}

/* One request of client c; false: drop the client. */
static bool serve_one(server_t *s, client_t *c)
{
    double deadline = mlc_sock_deadline(STORE_IO_TIMEOUT_S);
    uint32_t head[4];
    if (mlc_sock_read_all(c->fd, head, sizeof head, deadline)) return false;
    uint32_t magic = ntohl(head[0]), op = ntohl(head[1]), klen = ntohl(head[2]), vlen = ntohl(head[3]);
    if (magic != STORE_MAGIC || klen == 0 || klen > STORE_KEY_MAX || vlen > STORE_VALUE_MAX) {
        reply(c->fd, ST_BAD_REQUEST, NULL, 0);
        return false;
    }
    char *key = malloc(klen + 1);
    void *value = vlen ? malloc(vlen) : NULL;
    bool keep = key && (value || !vlen);
    if (keep && mlc_sock_read_all(c->fd, key, klen, deadline)) keep = false;
    if (keep && vlen && mlc_sock_read_all(c->fd, value, vlen, deadline)) keep = false;
    if (!keep) {
        if (!key || (vlen && !value)) reply(c->fd, ST_NO_MEMORY, NULL, 0);
        free(key);
        free(value);
        return false;
    }
    key[klen] = '\0';
    if (op == OP_HELLO) {
        uint32_t n = 0;
        if (vlen == sizeof n) memcpy(&n, value, sizeof n);
        n = ntohl(n);
        uint32_t st = klen != MLC_TCP_STORE_TOKEN_HEX || !tokens_equal(key, s->token, klen) ? ST_BAD_TOKEN
                      : n == 0 || (s->nranks && n != s->nranks)                              ? ST_BAD_NRANKS
                                                                                             : ST_OK;
        uint32_t first = htonl(s->nranks);
        if (st == ST_OK) {
            s->nranks = n;
            c->joined = s->ever_joined = true;
        }
        keep = reply(c->fd, st, &first, sizeof first) == 0 && st == ST_OK;
    } else if (!c->joined) {
        reply(c->fd, ST_BAD_REQUEST, NULL, 0);
        keep = false;
    } else if (op == OP_SET) {
        kv_t *k = find(s, key);
        if (!k && (k = calloc(1, sizeof *k)) != NULL) {
            k->key = key;
            key = NULL;
            k->next = s->keys;
            s->keys = k;
        }
        if (k) {
            free(k->value);
            k->value = value;
            k->len = vlen;
            value = NULL;
        }
        keep = reply(c->fd, k ? ST_OK : ST_NO_MEMORY, NULL, 0) == 0;
    } else if (op == OP_GET) {
        kv_t *k = find(s, key);
        keep = (k ? reply(c->fd, ST_OK, k->value, k->len) : reply(c->fd, ST_MISSING, NULL, 0)) == 0;
    } else {
        reply(c->fd, ST_BAD_REQUEST, NULL, 0);
        keep = false;
    }
    free(key);
    free(value);
    return keep;
}

static void server_free(server_t *s)
{
    for (int i = 0; i < s->nclients; i++) close(s->clients[i].fd);
    while (s->keys) {
        kv_t *k = s->keys;
        s->keys = k->next;
        free(k->key);
        free(k->value);
        free(k);
    }
    close(s->lfd);
    free(s->clients);
    free(s);
}

/* Serve until a rank has joined and every client has left again. */
static void *server_main(void *arg)
{
    server_t *s = arg;
    struct pollfd *pf = NULL;
    while (!(s->ever_joined && s->nclients == 0)) {
        struct pollfd *grown = realloc(pf, sizeof *pf * (size_t)(s->nclients + 1));
        if (!grown) break;
        pf = grown;
        pf[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int i = 0; i < s->nclients; i++) pf[i + 1] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
        int n = s->nclients;
        if (poll(pf, (nfds_t)n + 1, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = n - 1; i >= 0; i--) {
            if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (serve_one(s, &s->clients[i])) continue;
            close(s->clients[i].fd);
            s->clients[i] = s->clients[--s->nclients];
        }
        if (pf[0].revents & POLLIN) {
            int fd = mlc_sock_accept(s->lfd);
            if (fd < 0) continue;
            if (s->nclients == s->cap) {
                int cap = s->cap ? 2 * s->cap : 16;
                client_t *more = realloc(s->clients, sizeof *more * (size_t)cap);
                if (!more) {
                    close(fd);
                    continue;
                }
                s->clients = more;
                s->cap = cap;
            }
            s->clients[s->nclients++] = (client_t){.fd = fd};
        }
    }
    free(pf);
    MLC_DEBUG("bootstrap store for %d ranks: every rank has left; the listener closes", (int)s->nranks);
    server_free(s);
    return NULL;
}

/* Bridges of containers and VMs on this host: other hosts cannot reach them
 * (NCCL skips them by default too). */
static bool local_bridge(const char *name)
{
    static const char *const prefixes[] = {"docker", "virbr", "veth", "br-"};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
        if (strncmp(name, prefixes[k], strlen(prefixes[k])) == 0) return true;
    return false;
}

/* This host's first IPv4 address that is up, neither loopback nor a local
 * bridge; else 127.0.0.1. */
static void default_address(char *out, size_t len)
{
    snprintf(out, len, "127.0.0.1");
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) return;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK) || local_bridge(i->ifa_name))
            continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
        break;
    }
    freeifaddrs(all);
}

/* MLC_BOOTSTRAP_ADDR: "host", "host:port", "[v6]" or "[v6]:port". */
static mlc_status_t bind_spec(char *host, size_t host_len, char *port, size_t port_len)
{
    const char *v = mlc_env_text(MLC_ENV_BOOTSTRAP_ADDR);
    snprintf(port, port_len, "0");
    if (!v) {
        default_address(host, host_len);
        return MLC_SUCCESS;
    }
    const char *colon = NULL, *end = v + strlen(v);
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || (close[1] && close[1] != ':'))
            return mlc_error(MLC_ERR_CONFIG, "MLC_BOOTSTRAP_ADDR='%s': expected [IPv6] or [IPv6]:port", v);
        colon = close[1] ? close + 1 : NULL;
        snprintf(host, host_len, "%.*s", (int)(close - v - 1), v + 1);
    } else {
        colon = strchr(v, ':');
        if (colon && strchr(colon + 1, ':')) colon = NULL; /* a bare IPv6 address */
        snprintf(host, host_len, "%.*s", (int)((colon ? colon : end) - v), v);
    }
    long long p = 0;
    if (colon && !mlc_parse_int(colon + 1, 0, 65535, &p))
        return mlc_error(MLC_ERR_CONFIG, "MLC_BOOTSTRAP_ADDR='%s': the port is not a number 0..65535", v);
    snprintf(port, port_len, "%lld", p);
    if (!host[0]) return mlc_error(MLC_ERR_CONFIG, "MLC_BOOTSTRAP_ADDR='%s': no host", v);
    return MLC_SUCCESS;
}

mlc_status_t mlc_tcp_store_start(const char *token, char *host, size_t host_len, int *port)
{
    char name[256], portstr[16];
    mlc_status_t st = bind_spec(name, sizeof name, portstr, sizeof portstr);
    if (st != MLC_SUCCESS) return st;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(name, portstr, &hints, &res);
    if (gai != 0)
        return mlc_error(MLC_ERR_CONFIG, "mlc_get_unique_id: cannot resolve the bootstrap address '%s' "
                         "(MLC_BOOTSTRAP_ADDR): %s", name, gai_strerror(gai));
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0 && (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 512) != 0)) err = errno;
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (!err && getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) err = errno;
    if (err) {
        if (fd >= 0) close(fd);
        return mlc_error(MLC_ERR_SYSTEM, "mlc_get_unique_id: cannot listen on %s port %s (MLC_BOOTSTRAP_ADDR "
                         "chooses the address): %s", name, portstr, strerror(err));
    }
    const void *ip = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                                              : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    inet_ntop(ss.ss_family, ip, host, (socklen_t)host_len);
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    server_t *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return mlc_error(MLC_ERR_NO_MEMORY, "mlc_get_unique_id: out of memory");
    }
    s->lfd = fd;
    snprintf(s->token, sizeof s->token, "%s", token);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    err = pthread_create(&th, &attr, server_main, s);
    pthread_attr_destroy(&attr);
    if (err) {
        server_free(s);
        return mlc_error(MLC_ERR_SYSTEM, "mlc_get_unique_id: cannot start the bootstrap listener's thread: %s",
                         strerror(err));
    }
    MLC_DEBUG("bootstrap store listening on %s port %d", host, *port);
    return MLC_SUCCESS;
}

/* ---- client ---------------------------------------------------------------- */

struct mlc_tcp_store {
    mlc_store_t api; /* first: the callbacks get this struct as ctx */
    int fd;
    char where[300]; /* host:port for messages */
    double timeout_s;
    char why[512];
};

/* One request and its reply; 0, else an errno (why[] says what failed). */
static int rpc(mlc_tcp_store_t *c, uint32_t op, const char *key, const void *value, uint32_t vlen,
               uint32_t *status, void *buf, size_t cap, size_t *len)
{
    double deadline = mlc_sock_deadline(STORE_IO_TIMEOUT_S);
    uint32_t klen = (uint32_t)strlen(key);
    uint32_t head[4] = {htonl(STORE_MAGIC), htonl(op), htonl(klen), htonl(vlen)};
    int err = mlc_sock_write_all(c->fd, head, sizeof head, deadline);
    if (!err) err = mlc_sock_write_all(c->fd, key, klen, deadline);
    if (!err && vlen) err = mlc_sock_write_all(c->fd, value, vlen, deadline);
    uint32_t rep[2];
    if (!err) err = mlc_sock_read_all(c->fd, rep, sizeof rep, deadline);
    if (err) {
        snprintf(c->why, sizeof c->why, "the bootstrap listener at %s (in the process that called "
                 "mlc_get_unique_id) %s", c->where, err == ECONNRESET ? "closed the connection" : strerror(err));
        return err;
    }
    *status = ntohl(rep[0]);
    uint32_t n = ntohl(rep[1]);
    if (n > STORE_VALUE_MAX) {
        snprintf(c->why, sizeof c->why, "the bootstrap listener at %s sent a malformed reply", c->where);
        return EPROTO;
    }
    if (len) *len = n;
    char sink[256];
    for (uint32_t got = 0; got < n && !err;) {
        uint32_t chunk = n - got;
        char *to = sink;
        if (got < cap) {
            to = (char *)buf + got;
            if (chunk > cap - got) chunk = (uint32_t)(cap - got);
        } else if (chunk > sizeof sink) {
            chunk = sizeof sink;
        }
        err = mlc_sock_read_all(c->fd, to, chunk, deadline);
        got += chunk;
    }
    if (err) snprintf(c->why, sizeof c->why, "the bootstrap listener at %s: %s", c->where, strerror(err));
    return err;
}

static int client_set(void *ctx, const char *key, const void *value, size_t len)
{
    mlc_tcp_store_t *c = ctx;
    uint32_t st = 0;
    if (len > STORE_VALUE_MAX || strlen(key) > STORE_KEY_MAX) {
        snprintf(c->why, sizeof c->why, "key '%.64s' or its %zu-byte value is too long for the built-in store", key,
                 len);
        return -1;
    }
    if (rpc(c, OP_SET, key, value, (uint32_t)len, &st, NULL, 0, NULL)) return -1;
    if (st != ST_OK) {
        snprintf(c->why, sizeof c->why, "the bootstrap listener at %s refused set('%s'): %s", c->where, key,
                 st < ST_COUNT ? status_text[st] : "unknown status");
        return -1;
    }
    return MLC_STORE_OK;
}

typedef struct get_wait {
    mlc_tcp_store_t *c;
    const char *key;
    void *buf;
    size_t cap, *len;
    bool found, failed;
} get_wait_t;

static int get_step(void *p)
{
    get_wait_t *g = p;
    uint32_t st = 0;
    if (rpc(g->c, OP_GET, g->key, NULL, 0, &st, g->buf, g->cap, g->len)) {
        g->failed = true;
        return MLC_WAIT_STOP;
    }
    if (st == ST_OK) g->found = true;
    else if (st != ST_MISSING) {
        snprintf(g->c->why, sizeof g->c->why, "the bootstrap listener at %s refused get('%s'): %s", g->c->where,
                 g->key, st < ST_COUNT ? status_text[st] : "unknown status");
        g->failed = true;
        return MLC_WAIT_STOP;
    }
    return g->found ? MLC_WAIT_MOVED : MLC_WAIT_NOTHING;
}

static int get_done(void *p) { return ((get_wait_t *)p)->found; }

static int client_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len, double timeout_s)
{
    mlc_tcp_store_t *c = ctx;
    if (strlen(key) > STORE_KEY_MAX) {
        snprintf(c->why, sizeof c->why, "key '%.64s...' is too long for the built-in store", key);
        return -1;
    }
    get_wait_t g = {.c = c, .key = key, .buf = buf, .cap = cap, .len = len};
    if (timeout_s == 0) {
        get_step(&g);
        return g.failed ? -1 : g.found ? MLC_STORE_OK : MLC_STORE_TIMEOUT;
    }
    /* Ask again every few ms at first, then every 50 ms: a key appears once per rank. */
    mlc_wait_t w = {.step = get_step, .done = get_done, .ctx = &g, .timeout_s = timeout_s < 0 ? 0 : timeout_s,
                    .what = "bootstrap store get", .spin_s = -1, .yield_s = -1, .sleep_min_s = 0.002,
                    .sleep_max_s = 0.05};
    mlc_wait_status_t ws = mlc_wait_run(&w);
    if (g.failed) return -1;
    return ws == MLC_WAIT_DONE ? MLC_STORE_OK : MLC_STORE_TIMEOUT;
}

const char *mlc_tcp_store_why(const mlc_store_t *api)
{
    return api && api->set == client_set ? ((const mlc_tcp_store_t *)api->ctx)->why : NULL;
}

/* Connect and present the token; 0, an errno to retry on, or -1 with a refusal (message set). */
static int try_join(mlc_tcp_store_t *c, const char *host, const char *portstr, const char *token, int rank,
                    int nranks, double deadline, mlc_status_t *refused)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        *refused = mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_rank: the unique id's address '%s' is not a numeric "
                  "address: %s", host, gai_strerror(gai));
        return -1;
    }
    c->fd = mlc_sock_connect(res, deadline);
    int err = c->fd < 0 ? errno : 0;
    freeaddrinfo(res);
    if (err) return err;
    uint32_t n = htonl((uint32_t)nranks), st = 0, first = 0;
    size_t got = 0;
    err = rpc(c, OP_HELLO, token, &n, sizeof n, &st, &first, sizeof first, &got);
    if (!err && st == ST_OK) return 0;
    close(c->fd);
    c->fd = -1;
    if (err) return err;
    if (st == ST_BAD_TOKEN)
        *refused = mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_rank: rank %d: the bootstrap listener at %s "
                  "refused the unique id's job token: the id belongs to another job or was altered", rank, c->where);
    else if (st == ST_BAD_NRANKS)
        *refused = mlc_error(MLC_ERR_MISMATCH, "mlc_comm_init_rank: rank %d says nranks = %d, but the first rank "
                  "to join said %u (every rank must pass the same nranks)", rank, nranks, ntohl(first));
    else
        *refused = mlc_error(MLC_ERR_SYSTEM, "mlc_comm_init_rank: rank %d: the bootstrap listener at %s refused "
                  "to let it join: %s", rank, c->where, st < ST_COUNT ? status_text[st] : "unknown status");
    return -1;
}

mlc_status_t mlc_tcp_store_connect(const char *host, int port, const char *token, int rank, int nranks,
                                   double timeout_s, mlc_tcp_store_t **out)
{
    mlc_tcp_store_t *c = calloc(1, sizeof *c);
    if (!c) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_comm_init_rank: out of memory");
    c->api = (mlc_store_t){.ctx = c, .set = client_set, .get = client_get};
    c->fd = -1;
    c->timeout_s = timeout_s;
    snprintf(c->where, sizeof c->where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    double deadline = mlc_sock_deadline(timeout_s), delay = 0.01;
    for (;;) {
        mlc_status_t st = MLC_ERR_TIMEOUT;
        int err = try_join(c, host, portstr, token, rank, nranks, deadline, &st);
        if (err == 0) break;
        if (err < 0 || mlc_now() + delay >= deadline) {
            if (err > 0)
                mlc_error(st, "mlc_comm_init_rank: rank %d could not reach the bootstrap listener at %s named "
                          "by the unique id within %g s (MLC_TIMEOUT): %s; the process that called "
                          "mlc_get_unique_id must still run, this host must reach that address "
                          "(MLC_BOOTSTRAP_ADDR chooses it), and one id makes one communicator",
                          rank, c->where, timeout_s, strerror(err));
            free(c);
            return st;
        }
        struct timespec ts = {0, (long)(delay * 1e9)};
        nanosleep(&ts, NULL);
        if (delay < 0.2) delay *= 2;
    }
    *out = c;
    return MLC_SUCCESS;
}

const mlc_store_t *mlc_tcp_store_api(mlc_tcp_store_t *c) { return &c->api; }

void mlc_tcp_store_close(mlc_tcp_store_t *c)
{
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c);
}
