/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A small TCP rendezvous that hands a few bytes (the NCCL unique id) from
 * rank 0 to every other rank when no host communicator can carry them
 * (torchrun across hosts). Rank 0 listens; each peer connects, presents the
 * job secret, its rank and the world size, and receives the bytes. Every
 * socket operation has a deadline, so nothing waits forever: rank 0 names
 * the ranks it never heard from, a peer names the address it could not
 * reach.
 *
 * Wire format (network byte order): request = magic "MLCB", version, rank,
 * size, payload length, secret length, secret bytes; reply = magic, status
 * (0 ok, else the reason), then the payload when ok.
 */
#ifndef MLC_NCCL_TCP_BOOT_H
#define MLC_NCCL_TCP_BOOT_H
#include <stddef.h>
#include "mlcomm.h"

#define MLC_TCP_BOOT_MAX_PAYLOAD 4096
#define MLC_TCP_BOOT_MAX_SECRET 256

typedef struct mlc_tcp_boot {
    const char *host;   /* rank 0's address (MASTER_ADDR): name or numeric */
    int port;           /* rank 0's port */
    int rank, size;
    const char *secret; /* shared by the job's ranks (may be ""), at most 256 bytes */
    double timeout_s;   /* no progress (no rank served) for this long fails; 0 = no limit */
} mlc_tcp_boot_t;

typedef struct mlc_tcp_listener mlc_tcp_listener_t;

/*
 * Rank 0: listen on `host`:`port` (port 0 = any free port; the port bound is
 * returned in *bound_port). A loopback host binds loopback only; any other
 * binds every interface of that address family.
 */
mlc_status_t mlc_tcp_boot_listen(const char *host, int port, mlc_tcp_listener_t **listener,
                                 int *bound_port);
/* Rank 0: serve `payload` to the b->size - 1 peers, then close the listener (always). */
mlc_status_t mlc_tcp_boot_serve(mlc_tcp_listener_t *listener, const mlc_tcp_boot_t *b,
                                const void *payload, size_t len);
/* Close a listener that will not serve (error unwinding). NULL is a no-op. */
void mlc_tcp_boot_close(mlc_tcp_listener_t *listener);
/* Peers: fetch the payload (exactly len bytes) from rank 0, retrying until it listens. */
mlc_status_t mlc_tcp_boot_fetch(const mlc_tcp_boot_t *b, void *payload, size_t len);

/* Both sides in one call: rank 0 listens on b->port and serves, others fetch. */
mlc_status_t mlc_tcp_boot_share(const mlc_tcp_boot_t *b, void *payload, size_t len);
#endif
