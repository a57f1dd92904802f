/* SPDX-License-Identifier: BSD-3-Clause */
/* Backend tables are validated before use: version, size, required entries. */
#include "core/backend.h"
#include "unit.h"

static mlc_status_t ok_init(mlc_comm_t *comm, const mlc_boot_t *boot) { return MLC_SUCCESS; }
static int ok_available(char *why, size_t len) { return 1; }
static mlc_status_t ok_split(mlc_comm_t *p, int color, int key, const int *m, int n, mlc_comm_t *c)
{
    return MLC_SUCCESS;
}
static void ok_void(mlc_comm_t *comm) {}
static mlc_status_t ok_progress(mlc_comm_t *comm, int *progressed) { return MLC_SUCCESS; }
static mlc_status_t ok_health(mlc_comm_t *comm) { return MLC_SUCCESS; }

#define X_UNSUPPORTED(id, str, env) [id] = mlc_backend_unsupported_start,
static const mlc_backend_t good = {
    MLC_BACKEND_HEADER,
    .name = "test",
    .available = ok_available,
    .init = ok_init,
    .split = ok_split,
    .destroy = ok_void,
    .abort = ok_void,
    .start = {MLC_COLL_LIST(X_UNSUPPORTED)},
    .iprobe = mlc_backend_unsupported_iprobe,
    .progress = ok_progress,
    .health = ok_health,
};
#undef X_UNSUPPORTED

int main(void)
{
    CHECK_OK(mlc_backend_validate(&good));
    for (const mlc_backend_t *const *b = mlc_backends; *b; b++) CHECK_OK(mlc_backend_validate(*b));

    mlc_backend_t bad = good;
    bad.abi = MLC_BACKEND_ABI + 1;
    CHECK_ERR_MSG(mlc_backend_validate(&bad), MLC_ERR_CONFIG, "another backend interface");
    bad = good;
    bad.size = 8;
    CHECK_ERR_MSG(mlc_backend_validate(&bad), MLC_ERR_CONFIG, "another backend interface");
    bad = good;
    bad.health = NULL;
    CHECK_ERR_MSG(mlc_backend_validate(&bad), MLC_ERR_CONFIG, "has no 'health' entry");
    bad = good;
    bad.start[MLC_COLL_GATHERV] = NULL;
    CHECK_ERR_MSG(mlc_backend_validate(&bad), MLC_ERR_CONFIG, "no start entry for gatherv");
    bad = good;
    bad.idle = NULL; /* optional */
    bad.accepts = NULL;
    CHECK_OK(mlc_backend_validate(&bad));
    CHECK_ERR_MSG(mlc_backend_validate(NULL), MLC_ERR_CONFIG, "NULL");

    /* The shared stubs say which backend lacks what. */
    mlc_comm_t comm = {0};
    comm.be = &good;
    mlc_request_t req = {0};
    req.comm = &comm;
    req.coll = MLC_COLL_ALLTOALLV;
    CHECK_ERR_MSG(mlc_backend_unsupported_start(&req), MLC_ERR_UNSUPPORTED, "mlc_alltoallv is not supported by backend 'test'");
    int flag = 0;
    CHECK_ERR_MSG(mlc_backend_unsupported_iprobe(&comm, 0, 0, &flag, NULL), MLC_ERR_UNSUPPORTED,
                  "probing is not supported by backend 'test'");
    return unit_result("backend_table");
}
