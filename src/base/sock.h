/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Blocking-with-a-deadline socket I/O over nonblocking sockets, shared by
 * the TCP bootstraps (core's TCP store, nccl's launcher bootstrap). Every
 * wait goes through the one wait loop (base/wait.h); a deadline of INFINITY
 * never expires.
 */
#ifndef MLC_BASE_SOCK_H
#define MLC_BASE_SOCK_H
#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>

/* now + timeout_s, or INFINITY when timeout_s <= 0. */
double mlc_sock_deadline(double timeout_s);
/* Wait until fd is ready for `events` (POLLIN / POLLOUT); false at the deadline or on a poll error. */
bool mlc_sock_wait(int fd, short events, double deadline);
/* Send / receive exactly n bytes. 0, else an errno (ETIMEDOUT at the deadline, ECONNRESET at EOF). */
int mlc_sock_write_all(int fd, const void *buf, size_t n, double deadline);
int mlc_sock_read_all(int fd, void *buf, size_t n, double deadline);
void mlc_sock_set_nonblocking(int fd);
/* A nonblocking TCP_NODELAY socket connected to ai within min(deadline, 2 s from now); -1 and errno if not. */
int mlc_sock_connect(const struct addrinfo *ai, double deadline);
/* accept4 on listening socket lfd: a nonblocking, close-on-exec TCP_NODELAY socket, or -1 and errno.
 * Both ends need TCP_NODELAY: a reply written in two parts (header, value) would otherwise wait for
 * the peer's delayed acknowledgement (40 ms on Linux) between them. */
int mlc_sock_accept(int lfd);
#endif
