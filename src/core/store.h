/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How core and the backends use the bootstrap key-value store
 * (mlc_store_t, include/mlcomm.h): every wait lasts at most the
 * communicator's timeout, and every failure says which key, which rank it
 * waited for and what the store's callback returned.
 */
#ifndef MLC_CORE_STORE_H
#define MLC_CORE_STORE_H
#include <stddef.h>
#include "mlcomm.h"

/* Longest key the library writes, with its NUL. */
#define MLC_STORE_KEY_MAX 128

typedef struct mlc_bootstore {
    const mlc_store_t *store;
    double timeout_s;   /* every get waits at most this long; <= 0: no limit */
    const char *caller; /* "mlc_comm_init_rank", "mlc_comm_init_store": starts each message */
    int rank;           /* this rank, for messages */
    /* Optional: why the store's last callback failed (the built-in store says), else NULL. */
    const char *(*why)(const mlc_store_t *store);
} mlc_bootstore_t;

/* Store len bytes under key. */
mlc_status_t mlc_store_put(const mlc_bootstore_t *bs, const char *key, const void *value, size_t len);
/*
 * Wait for key and read exactly len bytes of it (a value of another length
 * is a MISMATCH). `waiting_for` names who should have set it ("rank 3"),
 * for the timeout message.
 */
mlc_status_t mlc_store_take(const mlc_bootstore_t *bs, const char *key, void *value, size_t len,
                            const char *waiting_for);
/* Does key exist now (no wait)? 1 yes, 0 no, negative: the store failed (message set). */
int mlc_store_exists(const mlc_bootstore_t *bs, const char *key);
#endif
