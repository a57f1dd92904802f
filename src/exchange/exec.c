/* Executor registry: the first executor in MLC_XEXEC_LIST that applies serves a plan. */
#include "exec.h"

static const mlc_xexec_t *const executors[] = {
#define MLC_X_ENTRY(id) &mlc_xexec_##id,
    MLC_XEXEC_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
};

const mlc_xexec_t *mlc_xexec_select(mlc_comm_t *comm)
{
    for (size_t i = 0; i < sizeof executors / sizeof executors[0]; i++)
        if (executors[i]->applies(comm)) return executors[i];
    return &mlc_xexec_p2p;
}
