/* SPDX-License-Identifier: BSD-3-Clause */
#include "tcp_boot.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
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

#define BOOT_MAGIC 0x4d4c4342u /* "MLCB" */
#define BOOT_VERSION 1u
/* One slow or silent client may hold rank 0 at most this long. */
#define BOOT_CONN_TIMEOUT_S 10.0

#define BOOT_STATUS_LIST(X)                                   \
    X(BOOT_OK, "ok")                                          \
    X(BOOT_BAD_SECRET, "job secret does not match rank 0's") \
    X(BOOT_BAD_SIZE, "world size differs from rank 0's")     \
    X(BOOT_BAD_RANK, "rank out of range")                     \
    X(BOOT_BAD_LENGTH, "payload length differs from rank 0's") \
    X(BOOT_BAD_VERSION, "protocol version differs")
enum {
#define MLC_X_ENUM(name, text) name,
    BOOT_STATUS_LIST(MLC_X_ENUM)
#undef MLC_X_ENUM
    BOOT_STATUS_COUNT
};
static const char *const boot_status_text[] = {
#define MLC_X_TEXT(name, text) text,
    BOOT_STATUS_LIST(MLC_X_TEXT)
#undef MLC_X_TEXT
};

struct mlc_tcp_listener {
    int fd;
    char where[300]; /* host:port for messages */
};

typedef struct boot_request {
    uint32_t magic, version, rank, size, len, secret_len;
} boot_request_t;

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

static bool secrets_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Constant time in the content, so the comparison leaks only the length. */
    unsigned char diff = (unsigned char)(alen != blen);
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* ---- rank 0 -------------------------------------------------------------- */
mlc_status_t mlc_tcp_boot_listen(const char *host, int port, mlc_tcp_listener_t **listener,
                                 int *bound_port)
{
    if (!host || !host[0] || port < 0 || port > 65535 || !listener)
        return mlc_error(MLC_ERR_INVALID_ARG, "tcp bootstrap: bad listen address '%s':%d",
                         host ? host : "(null)", port);
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0)
        return mlc_error(MLC_ERR_CONFIG, "tcp bootstrap: cannot resolve '%s' (MASTER_ADDR): %s",
                         host, gai_strerror(gai));
    struct sockaddr_storage addr;
    socklen_t addrlen = (socklen_t)res->ai_addrlen;
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    int family = res->ai_family;
    freeaddrinfo(res);
    if (!is_loopback((struct sockaddr *)&addr)) {
        /* Listen on every interface of that family: the name may map to any of them. */
        if (family == AF_INET) ((struct sockaddr_in *)&addr)->sin_addr.s_addr = htonl(INADDR_ANY);
        else ((struct sockaddr_in6 *)&addr)->sin6_addr = in6addr_any;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return mlc_error(MLC_ERR_SYSTEM, "tcp bootstrap: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, addrlen) != 0 || listen(fd, 128) != 0) {
        int err = errno;
        close(fd);
        return mlc_error(MLC_ERR_SYSTEM, "tcp bootstrap: rank 0 cannot listen on %s:%d: %s", host,
                         port, strerror(err));
    }
    mlc_sock_set_nonblocking(fd);
    struct sockaddr_storage got;
    socklen_t gotlen = sizeof got;
    int actual = port;
    if (getsockname(fd, (struct sockaddr *)&got, &gotlen) == 0)
        actual = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                : ((struct sockaddr_in6 *)&got)->sin6_port);
    mlc_tcp_listener_t *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return mlc_error(MLC_ERR_NO_MEMORY, "tcp bootstrap: out of memory");
    }
    l->fd = fd;
    snprintf(l->where, sizeof l->where, "%s:%d", host, actual);
    *listener = l;
    if (bound_port) *bound_port = actual;
    return MLC_SUCCESS;
}

void mlc_tcp_boot_close(mlc_tcp_listener_t *l)
{
    if (!l) return;
    close(l->fd);
    free(l);
}

/* Serve one connection. Returns the rank served, or -1 (the reason logged). */
static int serve_one(int fd, const mlc_tcp_boot_t *b, const void *payload, size_t len,
                     double deadline)
{
    double conn_deadline = fmin(deadline, mlc_now() + BOOT_CONN_TIMEOUT_S);
    boot_request_t rq;
    uint32_t wire[6];
    int err = mlc_sock_read_all(fd, wire, sizeof wire, conn_deadline);
    if (err) {
        MLC_DEBUG("tcp bootstrap: dropped a connection: %s", strerror(err));
        return -1;
    }
    rq.magic = ntohl(wire[0]);
    rq.version = ntohl(wire[1]);
    rq.rank = ntohl(wire[2]);
    rq.size = ntohl(wire[3]);
    rq.len = ntohl(wire[4]);
    rq.secret_len = ntohl(wire[5]);
    if (rq.magic != BOOT_MAGIC || rq.secret_len > MLC_TCP_BOOT_MAX_SECRET) {
        MLC_WARN("tcp bootstrap: ignored a connection that does not speak the mlcomm protocol");
        return -1;
    }
    char secret[MLC_TCP_BOOT_MAX_SECRET];
    if (mlc_sock_read_all(fd, secret, rq.secret_len, conn_deadline)) return -1;

    const char *mine = b->secret ? b->secret : "";
    uint32_t status = BOOT_OK;
    if (rq.version != BOOT_VERSION) status = BOOT_BAD_VERSION;
    else if (!secrets_equal(secret, rq.secret_len, mine, strlen(mine))) status = BOOT_BAD_SECRET;
    else if (rq.size != (uint32_t)b->size) status = BOOT_BAD_SIZE;
    else if (rq.rank == 0 || rq.rank >= (uint32_t)b->size) status = BOOT_BAD_RANK;
    else if (rq.len != len) status = BOOT_BAD_LENGTH;
    uint32_t reply[2] = {htonl(BOOT_MAGIC), htonl(status)};
    if (mlc_sock_write_all(fd, reply, sizeof reply, conn_deadline)) return -1;
    if (status != BOOT_OK) {
        MLC_WARN("tcp bootstrap: refused a peer claiming rank %u of %u: %s", rq.rank, rq.size,
                 boot_status_text[status]);
        return -1;
    }
    if (mlc_sock_write_all(fd, payload, len, conn_deadline)) return -1;
    return (int)rq.rank;
}

mlc_status_t mlc_tcp_boot_serve(mlc_tcp_listener_t *l, const mlc_tcp_boot_t *b,
                                const void *payload, size_t len)
{
    if (!l) return mlc_error(MLC_ERR_INVALID_ARG, "tcp bootstrap: listener is NULL");
    if (!b || b->size < 1 || !payload || len == 0 || len > MLC_TCP_BOOT_MAX_PAYLOAD) {
        mlc_tcp_boot_close(l);
        return mlc_error(MLC_ERR_INVALID_ARG, "tcp bootstrap: bad arguments to serve (len %zu)", len);
    }
    unsigned char *served = calloc((size_t)b->size, 1);
    if (!served) {
        mlc_tcp_boot_close(l);
        return mlc_error(MLC_ERR_NO_MEMORY, "tcp bootstrap: out of memory");
    }
    double deadline = mlc_sock_deadline(b->timeout_s);
    int remaining = b->size - 1;
    mlc_status_t st = MLC_SUCCESS;
    while (remaining > 0) {
        if (!mlc_sock_wait(l->fd, POLLIN, deadline)) {
            char missing[256] = "";
            size_t used = 0;
            for (int r = 1; r < b->size && used + 16 < sizeof missing; r++) {
                if (!served[r]) {
                    int n = snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", r);
                    if (n > 0) used += (size_t)n;
                }
            }
            st = mlc_error(MLC_ERR_TIMEOUT,
                           "tcp bootstrap: rank 0 listening on %s heard nothing from rank(s) %s "
                           "for %g s (MLC_TIMEOUT; are they started, with the same MASTER_ADDR/MASTER_PORT?)",
                           l->where, missing, b->timeout_s);
            break;
        }
        int c = mlc_sock_accept(l->fd);
        if (c < 0) continue; /* EAGAIN, or a client that went away */
        int r = serve_one(c, b, payload, len, deadline);
        close(c);
        if (r > 0 && !served[r]) {
            served[r] = 1;
            remaining--;
            deadline = mlc_sock_deadline(b->timeout_s); /* MLC_TIMEOUT: no progress for that long */
        }
    }
    free(served);
    mlc_tcp_boot_close(l);
    return st;
}

/* ---- peers --------------------------------------------------------------- */
/* Connect with a deadline; -1 with errno set when this attempt failed. */
mlc_status_t mlc_tcp_boot_fetch(const mlc_tcp_boot_t *b, void *payload, size_t len)
{
    if (!b || !b->host || !b->host[0] || b->port <= 0 || b->port > 65535 || !payload || len == 0 ||
        len > MLC_TCP_BOOT_MAX_PAYLOAD)
        return mlc_error(MLC_ERR_INVALID_ARG, "tcp bootstrap: bad arguments to fetch (%s:%d, len %zu)",
                         b && b->host ? b->host : "(null)", b ? b->port : -1, len);
    const char *secret = b->secret ? b->secret : "";
    size_t slen = strlen(secret);
    if (slen > MLC_TCP_BOOT_MAX_SECRET)
        return mlc_error(MLC_ERR_CONFIG, "tcp bootstrap: job secret longer than %d bytes",
                         MLC_TCP_BOOT_MAX_SECRET);
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", b->port);
    double deadline = mlc_sock_deadline(b->timeout_s);
    int last_err = 0;
    int gai_err = 0;
    double delay = 0.02;
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        gai_err = getaddrinfo(b->host, portstr, &hints, &res);
        int fd = -1;
        if (gai_err == 0) {
            for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
                fd = mlc_sock_connect(ai, deadline);
                if (fd < 0) last_err = errno;
            }
            freeaddrinfo(res);
        }
        if (fd >= 0) {
            uint32_t wire[6] = {htonl(BOOT_MAGIC), htonl(BOOT_VERSION), htonl((uint32_t)b->rank),
                                htonl((uint32_t)b->size), htonl((uint32_t)len), htonl((uint32_t)slen)};
            uint32_t reply[2];
            int err = mlc_sock_write_all(fd, wire, sizeof wire, deadline);
            if (!err) err = mlc_sock_write_all(fd, secret, slen, deadline);
            if (!err) err = mlc_sock_read_all(fd, reply, sizeof reply, deadline);
            if (!err && ntohl(reply[0]) != BOOT_MAGIC) err = EPROTO;
            if (!err && ntohl(reply[1]) != BOOT_OK) {
                uint32_t s = ntohl(reply[1]);
                close(fd);
                return mlc_error(s == BOOT_BAD_SECRET ? MLC_ERR_CONFIG : MLC_ERR_MISMATCH,
                                 "tcp bootstrap: rank 0 at %s:%d refused rank %d of %d: %s",
                                 b->host, b->port, b->rank, b->size,
                                 s < BOOT_STATUS_COUNT ? boot_status_text[s] : "unknown reason");
            }
            if (!err) err = mlc_sock_read_all(fd, payload, len, deadline);
            close(fd);
            if (!err) return MLC_SUCCESS;
            last_err = err;
        }
        if (mlc_now() + delay >= deadline) break;
        struct timespec ts = {0, (long)(delay * 1e9)};
        nanosleep(&ts, NULL);
        if (delay < 0.5) delay *= 2;
    }
    if (gai_err)
        return mlc_error(MLC_ERR_TIMEOUT, "tcp bootstrap: cannot resolve rank 0's address '%s': %s",
                         b->host, gai_strerror(gai_err));
    return mlc_error(MLC_ERR_TIMEOUT,
                     "tcp bootstrap: rank %d could not fetch the id from rank 0 at %s:%d within "
                     "%g s: %s",
                     b->rank, b->host, b->port, b->timeout_s, strerror(last_err ? last_err : ETIMEDOUT));
}

mlc_status_t mlc_tcp_boot_share(const mlc_tcp_boot_t *b, void *payload, size_t len)
{
    if (!b) return mlc_error(MLC_ERR_INVALID_ARG, "tcp bootstrap: NULL arguments");
    if (b->size <= 1) return MLC_SUCCESS;
    if (b->rank != 0) return mlc_tcp_boot_fetch(b, payload, len);
    mlc_tcp_listener_t *l;
    mlc_status_t st = mlc_tcp_boot_listen(b->host, b->port, &l, NULL);
    if (st != MLC_SUCCESS) return st;
    return mlc_tcp_boot_serve(l, b, payload, len);
}
