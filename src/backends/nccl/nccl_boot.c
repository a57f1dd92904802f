/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sharing the NCCL unique id. Rank 0 makes it with ncclGetUniqueId; the
 * other ranks get its 128 bytes through whatever the launcher provides:
 *   - mlc_comm_init_rank / mlc_comm_init_store: the bootstrap store (key
 *     mlc/nccl/id), on one host or several;
 *   - mlcomm-run: a temporary shm communicator;
 *   - mpirun / srun with MPI: a temporary mpi communicator;
 *   - torchrun (or any job with MASTER_ADDR/MASTER_PORT): a TCP rendezvous
 *     with rank 0 on MASTER_ADDR, port MASTER_PORT + 1 (torchrun's own
 *     store already listens on MASTER_PORT), the job id as secret.
 * Each temporary communicator is freed right after the broadcast.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "nccl_impl.h"
#include "base/config.h"
#include "base/error.h"
#include "tcp_boot.h"
#include "base/log.h"

static bool has(const char *s, const char *word) { return s && strcasestr(s, word) != NULL; }

const char *mlc_nccl_boot_method(const mlc_cfg_t *cfg, const mlc_boot_t *boot)
{
    if (boot->size <= 1) return "none";
    if (boot->store) return "store";
    const char *src = cfg->rank_source;
    if (has(src, "mlcomm")) return "shm";
    if (has(src, "torch")) return "tcp";
    if (has(src, "mpi") || has(src, "pmi") || has(src, "hydra")) return "mpi";
    if (mlc_env_text(MLC_ENV_MASTER_ADDR) && mlc_env_text(MLC_ENV_MASTER_PORT)) return "tcp";
    if (boot->local_size == boot->size) return "shm";
    return "mpi";
}

static mlc_status_t share_by_comm(const char *backend, const mlc_comm_t *comm, const mlc_boot_t *boot,
                                  mlc_ncclUniqueId *id)
{
    mlc_config_t hc = MLC_CONFIG_INIT;
    hc.backend = backend;
    hc.rank = boot->rank;
    hc.world_size = boot->size;
    hc.local_rank = boot->local_rank;
    hc.local_size = boot->local_size;
    hc.job_id = boot->job_id;
    hc.timeout_s = comm->cfg.timeout_s;
    hc.log_level = comm->cfg.log_level;
    hc.memory = MLC_MEMORY_HOST;
    mlc_comm_t *host = NULL;
    mlc_status_t st = mlc_comm_init(&hc, &host);
    if (st != MLC_SUCCESS) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mlc_last_error());
        return mlc_error(st, "%s: sharing the NCCL unique id needs a temporary %s communicator: %s",
                         comm->be->name, backend, msg);
    }
    st = mlc_broadcast(id, id, sizeof *id, MLC_UINT8, 0, host, NULL);
    char msg[512];
    if (st != MLC_SUCCESS) snprintf(msg, sizeof msg, "%s", mlc_last_error());
    mlc_comm_free(host);
    if (st != MLC_SUCCESS)
        return mlc_error(st, "%s: broadcasting the NCCL unique id over %s: %s", comm->be->name, backend, msg);
    return MLC_SUCCESS;
}

/* Rank 0 sets the id in the bootstrap store; the others wait for it there. */
static mlc_status_t share_by_store(const mlc_boot_t *boot, mlc_ncclUniqueId *id)
{
    if (boot->rank == 0) return mlc_store_put(boot->store, "mlc/nccl/id", id, sizeof *id);
    return mlc_store_take(boot->store, "mlc/nccl/id", id, sizeof *id, "rank 0 (its NCCL unique id)");
}

static mlc_status_t share_by_tcp(const mlc_comm_t *comm, const mlc_boot_t *boot, mlc_ncclUniqueId *id)
{
    const char *addr = mlc_env_text(MLC_ENV_MASTER_ADDR), *port_s = mlc_env_text(MLC_ENV_MASTER_PORT);
    if (!addr || !port_s)
        return mlc_error(MLC_ERR_CONFIG,
                         "%s: %d ranks launched by %s: sharing the NCCL unique id over TCP needs "
                         "MASTER_ADDR and MASTER_PORT",
                         comm->be->name, boot->size, comm->cfg.rank_source ? comm->cfg.rank_source : "?");
    long long port;
    if (!mlc_parse_int(port_s, 1, 65534, &port))
        return mlc_error(MLC_ERR_CONFIG, "MASTER_PORT='%s' is not a port number below 65535", port_s);
    mlc_tcp_boot_t b = {.host = addr, .port = (int)port + 1, .rank = boot->rank, .size = boot->size,
                        .secret = boot->job_id ? boot->job_id : "", .timeout_s = comm->cfg.timeout_s};
    MLC_DEBUG("%s: rank %d shares the NCCL unique id over TCP %s:%d", comm->be->name, boot->rank, addr,
              b.port);
    return mlc_tcp_boot_share(&b, id, sizeof *id);
}

mlc_status_t mlc_nccl_share_id(const mlc_nccl_api_t *api, const mlc_comm_t *comm,
                               const mlc_boot_t *boot, mlc_ncclUniqueId *id)
{
    if (boot->rank == 0) {
        mlc_ncclResult_t r = api->ncclGetUniqueId(id);
        if (r != mlc_ncclSuccess) {
            const char *last = api->ncclGetLastError ? api->ncclGetLastError(NULL) : NULL;
            return mlc_error(MLC_ERR_BACKEND, "%s: ncclGetUniqueId: %s%s%s", comm->be->name,
                             api->ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
        }
    }
    const char *method = mlc_nccl_boot_method(&comm->cfg, boot);
    if (strcmp(method, "none") == 0) return MLC_SUCCESS;
    if (strcmp(method, "store") == 0) return share_by_store(boot, id);
    if (strcmp(method, "tcp") == 0) return share_by_tcp(comm, boot, id);
    return share_by_comm(method, comm, boot, id);
}
