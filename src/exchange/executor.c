/* SPDX-License-Identifier: BSD-3-Clause */
/* Executor registry: the first executor in MLC_XEXEC_LIST that is present and applies serves a plan. */
#include <string.h>
#include <strings.h>
#include "base/error.h"
#include "executor.h"

typedef const mlc_xexec_t *(*mlc_xexec_lookup_fn)(void);

static const struct {
    const char *name;
    mlc_xexec_lookup_fn lookup;
} executors[] = {
#define MLC_X_ENTRY(id) {#id, mlc_xexec_lookup_##id},
    MLC_XEXEC_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
};
#define MLC_NEXEC (sizeof executors / sizeof executors[0])

const mlc_xexec_t *mlc_xexec_lookup_p2p(void) { return &mlc_xexec_p2p; }

mlc_status_t mlc_xexec_select(mlc_comm_t *comm, const char *name, bool device, const char *what,
                              const mlc_xexec_t **out)
{
    bool any = !name || !name[0] || strcasecmp(name, "auto") == 0;
    char names[128] = "auto";
    for (size_t i = 0; i < MLC_NEXEC; i++) {
        strncat(names, ", ", sizeof names - strlen(names) - 1);
        strncat(names, executors[i].name, sizeof names - strlen(names) - 1);
        if (!any && strcasecmp(name, executors[i].name) != 0) continue;
        const mlc_xexec_t *x = executors[i].lookup();
        if (any && device && x && !x->device) continue;
        if (x && x->applies(comm)) {
            *out = x;
            return MLC_SUCCESS;
        }
        if (!any)
            return mlc_error(MLC_ERR_UNSUPPORTED,
                             "%s: executor '%s' cannot serve backend '%s'%s", what, name,
                             mlc_comm_backend(comm),
                             x ? "" : " (it lives in the MPI module, which is not loaded)");
    }
    if (any) {
        *out = &mlc_xexec_p2p;
        return MLC_SUCCESS;
    }
    /* An unknown name went through the whole list: `names` is complete. */
    return mlc_error(MLC_ERR_INVALID_ARG, "%s: unknown executor '%s' (known: %s)", what, name,
                     names);
}
