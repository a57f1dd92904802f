/* SPDX-License-Identifier: BSD-3-Clause */
/* Backend availability as public API (mlcomm.h, "Host memory pool, GPU-direct
 * capabilities, backend availability"), for language bindings. */
#include "backend.h"
#include "base/error.h"

MLC_API mlc_status_t mlc_backend_check(const char *name)
{
    mlc_error_clear();
    if (!name) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_backend_check: name is NULL");
    const mlc_backend_t *be = mlc_backend_find(name);
    if (!be) return mlc_error(MLC_ERR_CONFIG, "mlc_backend_check: unknown backend \"%s\"", name);
    char why[256] = "";
    if (!be->available(why, sizeof why))
        return mlc_error(MLC_ERR_UNAVAILABLE, "backend '%s' is not available: %s", name, why);
    return MLC_SUCCESS;
}
