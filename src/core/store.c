/* SPDX-License-Identifier: BSD-3-Clause */
/* Using the bootstrap store with timeouts and messages (store.h). */
#include "store.h"
#include <stdio.h>
#include "base/error.h"

/* "returned -1" and, from a store that can say, why. */
static const char *result_text(const mlc_bootstore_t *bs, int r, char *buf, size_t len)
{
    const char *why = bs->why ? bs->why(bs->store) : NULL;
    snprintf(buf, len, "returned %d%s%s", r, why && why[0] ? ": " : "", why ? why : "");
    return buf;
}

mlc_status_t mlc_store_put(const mlc_bootstore_t *bs, const char *key, const void *value, size_t len)
{
    int r = bs->store->set(bs->store->ctx, key, value, len);
    if (r == MLC_STORE_OK) return MLC_SUCCESS;
    char why[600];
    return mlc_error(MLC_ERR_BACKEND, "%s: rank %d: the store's set('%s', %zu bytes) failed: it %s", bs->caller,
                     bs->rank, key, len, result_text(bs, r, why, sizeof why));
}

mlc_status_t mlc_store_take(const mlc_bootstore_t *bs, const char *key, void *value, size_t len,
                            const char *waiting_for)
{
    size_t got = 0;
    double t = bs->timeout_s > 0 ? bs->timeout_s : -1.0;
    int r = bs->store->get(bs->store->ctx, key, value, len, &got, t);
    if (r == MLC_STORE_TIMEOUT)
        return mlc_error(MLC_ERR_TIMEOUT, "%s: rank %d waited %g s (MLC_TIMEOUT) for key '%s' in the store: "
                         "%s has not joined or did not get this far", bs->caller, bs->rank, bs->timeout_s, key,
                         waiting_for);
    char why[600];
    if (r != MLC_STORE_OK)
        return mlc_error(MLC_ERR_BACKEND, "%s: rank %d: the store's get('%s') failed: it %s", bs->caller, bs->rank,
                         key, result_text(bs, r, why, sizeof why));
    if (got != len)
        return mlc_error(MLC_ERR_MISMATCH, "%s: rank %d: key '%s' in the store holds %zu bytes, expected %zu (set "
                         "by another program, another version of mlcomm, or a store reused for a second "
                         "communicator)", bs->caller, bs->rank, key, got, len);
    return MLC_SUCCESS;
}

int mlc_store_exists(const mlc_bootstore_t *bs, const char *key)
{
    char byte;
    size_t got = 0;
    int r = bs->store->get(bs->store->ctx, key, &byte, 0, &got, 0.0);
    if (r == MLC_STORE_OK) return 1;
    if (r == MLC_STORE_TIMEOUT) return 0;
    char why[600];
    mlc_error(MLC_ERR_BACKEND, "%s: rank %d: the store's get('%s', no wait) failed: it %s", bs->caller, bs->rank,
              key, result_text(bs, r, why, sizeof why));
    return -1;
}
