/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The built-in TCP key-value store behind mlc_get_unique_id and
 * mlc_comm_init_rank (docs/DESIGN.md "Bootstrap"). The process that makes a
 * unique id runs the server: a thread with a listening socket that keeps
 * the keys in memory and ends once a rank has joined and every rank that
 * joined has left again (or when the process exits). Each rank connects as a client,
 * presents the id's job token and the rank count, and then sets and gets
 * keys; a get of a key not yet set is asked again through the one wait loop
 * until the key appears or the timeout passes.
 *
 * Wire format (network byte order): request = magic "MLS1", op, key length,
 * value length, key, value; reply = status, value length, value.
 */
#ifndef MLC_CORE_TCP_STORE_H
#define MLC_CORE_TCP_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include "mlcomm.h"

#define MLC_TCP_STORE_TOKEN_HEX 32 /* the job token: 16 random bytes as hex */

/* Start a server for `token` on MLC_BOOTSTRAP_ADDR (else the default
 * address) and a free port; the address it can be reached at is written to
 * host (numeric) and *port. */
mlc_status_t mlc_tcp_store_start(const char *token, char *host, size_t host_len, int *port);

typedef struct mlc_tcp_store mlc_tcp_store_t;
/* Connect to the server at host:port (retrying until it listens or
 * timeout_s passes; <= 0: no limit) and join as rank of nranks. */
mlc_status_t mlc_tcp_store_connect(const char *host, int port, const char *token, int rank, int nranks,
                                   double timeout_s, mlc_tcp_store_t **out);
/* The client as an mlc_store_t (valid until close). */
const mlc_store_t *mlc_tcp_store_api(mlc_tcp_store_t *c);
/* Why the client's last call failed (for messages). */
const char *mlc_tcp_store_why(const mlc_store_t *api);
/* Leave (the server ends once every rank that joined has left). NULL is a no-op. */
void mlc_tcp_store_close(mlc_tcp_store_t *c);
#endif
