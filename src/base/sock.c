/* SPDX-License-Identifier: BSD-3-Clause */
/* Socket I/O with deadlines (sock.h). */
#include "sock.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "clock.h"
#include "wait.h"

double mlc_sock_deadline(double timeout_s)
{
    return timeout_s > 0 ? mlc_now() + timeout_s : INFINITY;
}

/* A socket's readiness, as the shared wait loop sees it (base/wait.h). */
typedef struct fd_wait {
    int fd;
    short events;
    bool ready, failed;
} fd_wait_t;

static int fd_step(void *p)
{
    fd_wait_t *w = p;
    struct pollfd pf = {.fd = w->fd, .events = w->events};
    int r = poll(&pf, 1, 0);
    if (r > 0) w->ready = true;
    if (r < 0 && errno != EINTR) w->failed = true;
    return w->ready ? MLC_WAIT_MOVED : w->failed ? MLC_WAIT_STOP : MLC_WAIT_NOTHING;
}

static int fd_done(void *p) { return ((fd_wait_t *)p)->ready; }

/* The event hook: poll the socket for up to max_s. */
static int fd_block(void *p, double max_s)
{
    fd_wait_t *w = p;
    struct pollfd pf = {.fd = w->fd, .events = w->events};
    int r = poll(&pf, 1, (int)(max_s * 1000.0) + 1);
    if (r > 0) w->ready = true;
    return 1;
}

/* Wait until fd is ready for `events`; false on deadline (or a failed poll). */
bool mlc_sock_wait(int fd, short events, double deadline)
{
    double left = deadline - mlc_now();
    if (left <= 0) return false;
    fd_wait_t fw = {.fd = fd, .events = events};
    mlc_wait_t w = {.step = fd_step, .done = fd_done, .block = fd_block, .ctx = &fw,
                    .timeout_s = isinf(left) ? 0 : left, .what = "tcp bootstrap", .spin_s = -1, .yield_s = -1};
    return mlc_wait_run(&w) == MLC_WAIT_DONE;
}

/* 0 on success, else an errno (ETIMEDOUT at the deadline, ECONNRESET at EOF). */
int mlc_sock_write_all(int fd, const void *buf, size_t n, double deadline)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!mlc_sock_wait(fd, POLLOUT, deadline)) return ETIMEDOUT;
            continue;
        }
        return w < 0 ? errno : ECONNRESET;
    }
    return 0;
}

int mlc_sock_read_all(int fd, void *buf, size_t n, double deadline)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0) return ECONNRESET;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!mlc_sock_wait(fd, POLLIN, deadline)) return ETIMEDOUT;
            continue;
        }
        return errno;
    }
    return 0;
}

void mlc_sock_set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Small writes leave at once instead of waiting for the previous one's acknowledgement (Nagle). */
static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int mlc_sock_connect(const struct addrinfo *ai, double deadline)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int err = errno;
            close(fd);
            errno = err;
            return -1;
        }
        if (!mlc_sock_wait(fd, POLLOUT, fmin(deadline, mlc_now() + 2.0))) {
            close(fd);
            errno = ETIMEDOUT;
            return -1;
        }
        int err = 0;
        socklen_t elen = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err) {
            close(fd);
            errno = err;
            return -1;
        }
    }
    set_nodelay(fd);
    return fd;
}

int mlc_sock_accept(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) set_nodelay(fd);
    return fd;
}

