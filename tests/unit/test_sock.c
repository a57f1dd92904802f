/* SPDX-License-Identifier: BSD-3-Clause */
/* Socket helpers (base/sock.h): both ends of a bootstrap connection send
 * small writes at once (TCP_NODELAY), else a reply written as header then
 * value waits 40 ms for the peer's delayed acknowledgement; data crosses
 * intact; a read at the deadline says ETIMEDOUT. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/sock.h"
#include "unit.h"

static int nodelay(int fd)
{
    int on = 0;
    socklen_t len = sizeof on;
    if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) != 0) return -1;
    return on != 0;
}

int main(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CHECK(lfd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &alen) == 0,
          "a listening socket on 127.0.0.1: %s", strerror(errno));
    struct addrinfo ai = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_addr = (struct sockaddr *)&a,
                          .ai_addrlen = alen};
    int cfd = mlc_sock_connect(&ai, mlc_sock_deadline(5));
    CHECK(cfd >= 0, "mlc_sock_connect: %s", strerror(errno));
    int sfd = -1;
    double give_up = mlc_now() + 5;
    while (sfd < 0 && mlc_now() < give_up) {
        sfd = mlc_sock_accept(lfd);
        if (sfd < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
        if (sfd < 0) mlc_sock_wait(lfd, POLLIN, mlc_now() + 0.1);
    }
    CHECK(sfd >= 0, "mlc_sock_accept: %s", strerror(errno));
    CHECK(nodelay(cfd) == 1, "the connecting end has no TCP_NODELAY");
    CHECK(nodelay(sfd) == 1, "the accepted end has no TCP_NODELAY");

    char head[8] = "header!", value[100000], got[sizeof head + sizeof value];
    for (size_t i = 0; i < sizeof value; i++) value[i] = (char)(i * 7 + 1);
    CHECK(mlc_sock_write_all(sfd, head, sizeof head, mlc_sock_deadline(5)) == 0, "writing the header");
    CHECK(mlc_sock_write_all(sfd, value, sizeof value, mlc_sock_deadline(5)) == 0, "writing the value");
    CHECK(mlc_sock_read_all(cfd, got, sizeof got, mlc_sock_deadline(5)) == 0, "reading header and value");
    CHECK(memcmp(got, head, sizeof head) == 0 && memcmp(got + sizeof head, value, sizeof value) == 0,
          "the bytes read differ from those written");
    CHECK(mlc_sock_read_all(cfd, got, 1, mlc_sock_deadline(0.05)) == ETIMEDOUT,
          "a read with nothing sent did not time out");
    close(sfd);
    CHECK(mlc_sock_read_all(cfd, got, 1, mlc_sock_deadline(5)) == ECONNRESET, "a read at EOF is not ECONNRESET");
    close(cfd);
    close(lfd);
    return unit_result("sock");
}
