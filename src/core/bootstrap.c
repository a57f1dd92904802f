/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Store bootstraps (docs/DESIGN.md "Bootstrap"): unique ids, and
 * mlc_comm_init_rank / mlc_comm_init_store, which share one path. Rank 0
 * names the job ("mlc/job": a fresh random id, so shared-memory names never
 * depend on what a process did before); every rank publishes a record
 * ("mlc/rank/<r>": rank count, process, host identity, backend asked for)
 * and reads everyone's. From the records each rank learns its host's ranks,
 * whether all ranks are threads of one process, and which hosts the job
 * spans; then the backend is chosen and initialised with the store at hand
 * for what it must exchange itself.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "base/config.h"
#include "base/error.h"
#include "base/host.h"
#include "base/log.h"
#include "store.h"
#include "tcp_store.h"

#define UID_MAGIC "mlcuid2:"
#define JOB_HEX 16 /* bytes of randomness in a job id */
#define REC_MAGIC "mlcrec1"

/* ---- unique ids: "mlcuid2:<token>@<address>:<port>#<checksum>" ---------------- */

static uint32_t fnv1a(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

mlc_status_t mlc_get_unique_id(mlc_unique_id_t *id)
{
    mlc_error_clear();
    if (!id) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_get_unique_id: id is NULL");
    char token[MLC_TCP_STORE_TOKEN_HEX + 1], host[64];
    int port = 0;
    mlc_random_hex(token, MLC_TCP_STORE_TOKEN_HEX / 2);
    mlc_status_t st = mlc_tcp_store_start(token, host, sizeof host, &port);
    if (st != MLC_SUCCESS) return st;
    memset(id, 0, sizeof *id);
    int n = snprintf(id->internal, sizeof id->internal, strchr(host, ':') ? "%s%s@[%s]:%d" : "%s%s@%s:%d",
                     UID_MAGIC, token, host, port);
    snprintf(id->internal + n, sizeof id->internal - (size_t)n, "#%08x", fnv1a(id->internal, (size_t)n));
    return MLC_SUCCESS;
}

typedef struct uid_parts {
    char token[MLC_TCP_STORE_TOKEN_HEX + 1];
    char host[64];
    int port;
} uid_parts_t;

static mlc_status_t uid_bad(const char *what)
{
    return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_rank: the unique id %s (not made by mlc_get_unique_id, "
                     "or damaged on its way: copy all %d bytes)", what, MLC_UNIQUE_ID_BYTES);
}

/* Every read stays within the id's 128 bytes. */
static mlc_status_t uid_parse(const mlc_unique_id_t *id, uid_parts_t *u)
{
    const char *s = id->internal;
    size_t len = strnlen(s, sizeof id->internal);
    if (len == sizeof id->internal) return uid_bad("is not terminated within its bytes");
    size_t ml = strlen(UID_MAGIC);
    if (len < ml || memcmp(s, UID_MAGIC, ml) != 0) return uid_bad("does not start with its tag");
    const char *hash = strrchr(s, '#');
    if (!hash || strlen(hash) != 9 || strspn(hash + 1, "0123456789abcdef") != 8) return uid_bad("has no checksum");
    char want[9];
    snprintf(want, sizeof want, "%08x", fnv1a(s, (size_t)(hash - s)));
    if (memcmp(want, hash + 1, 8) != 0) return uid_bad("fails its checksum");
    const char *tok = s + ml;
    if (strspn(tok, "0123456789abcdef") != MLC_TCP_STORE_TOKEN_HEX || tok[MLC_TCP_STORE_TOKEN_HEX] != '@')
        return uid_bad("has a malformed job token");
    memcpy(u->token, tok, MLC_TCP_STORE_TOKEN_HEX);
    u->token[MLC_TCP_STORE_TOKEN_HEX] = '\0';
    const char *addr = tok + MLC_TCP_STORE_TOKEN_HEX + 1, *port;
    size_t alen;
    if (addr[0] == '[') {
        const char *close = memchr(addr, ']', (size_t)(hash - addr));
        if (!close || close[1] != ':') return uid_bad("has a malformed address");
        addr++;
        alen = (size_t)(close - addr);
        port = close + 2;
    } else {
        const char *colon = memchr(addr, ':', (size_t)(hash - addr));
        if (!colon) return uid_bad("has no port");
        alen = (size_t)(colon - addr);
        port = colon + 1;
    }
    if (alen == 0 || alen >= sizeof u->host) return uid_bad("has a malformed address");
    memcpy(u->host, addr, alen);
    u->host[alen] = '\0';
    char ptext[8];
    size_t plen = (size_t)(hash - port);
    long long p = 0;
    if (plen == 0 || plen >= sizeof ptext) return uid_bad("has a malformed port");
    memcpy(ptext, port, plen);
    ptext[plen] = '\0';
    if (!mlc_parse_int(ptext, 1, 65535, &p)) return uid_bad("has a malformed port");
    u->port = (int)p;
    return MLC_SUCCESS;
}

/* ---- the exchange of rank records ------------------------------------------ */

typedef struct rank_rec {
    char magic[8];
    uint32_t nranks, pid; /* network byte order */
    char nonce[2 * 8 + 1];
    char backend[16];     /* asked for; "" = auto */
    char host_id[200];
    char host_name[64];
} rank_rec_t;

static void rank_key(char *key, size_t len, int r) { snprintf(key, len, "mlc/rank/%d", r); }

/* Rank k's record is missing: name every rank whose record is missing now. */
static mlc_status_t missing_ranks(const mlc_bootstore_t *bs, int from, int n)
{
    char list[256] = "";
    int count = 0;
    for (int r = from; r < n; r++) {
        char key[MLC_STORE_KEY_MAX];
        rank_key(key, sizeof key, r);
        int has = r == from ? 0 : mlc_store_exists(bs, key);
        if (has < 0) return MLC_ERR_BACKEND;
        if (has) continue;
        size_t used = strlen(list);
        if (count++ < 16) snprintf(list + used, sizeof list - used, "%s%d", count > 1 ? ", " : "", r);
    }
    if (count > 16) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, " and %d more", count - 16);
    }
    return mlc_error(MLC_ERR_TIMEOUT, "%s: rank %d waited %g s (MLC_TIMEOUT) for %d of %d ranks to join: "
                     "rank%s %s (keys mlc/rank/<r> missing in the store)", bs->caller, bs->rank, bs->timeout_s,
                     count, n, count > 1 ? "s" : "", list);
}

static mlc_status_t claimed_twice(const mlc_bootstore_t *bs, int rank)
{
    return mlc_error(MLC_ERR_INVALID_ARG, "%s: another caller also joined as rank %d (its record in the store "
                     "replaced this caller's): each rank must be given to exactly one caller", bs->caller, rank);
}

static mlc_status_t exchange(const mlc_bootstore_t *bs, int rank, int n, const char *backend, char *job,
                             rank_rec_t *all)
{
    mlc_status_t st;
    if (rank == 0) {
        int has = mlc_store_exists(bs, "mlc/job");
        if (has < 0) return MLC_ERR_BACKEND;
        if (has)
            return mlc_error(MLC_ERR_INVALID_ARG, "%s: the store already holds key 'mlc/job' of an earlier "
                             "communicator: use a fresh store (or key prefix) for each communicator", bs->caller);
        mlc_random_hex(job, JOB_HEX);
        st = mlc_store_put(bs, "mlc/job", job, 2 * JOB_HEX + 1);
        if (st != MLC_SUCCESS) return st;
    }
    rank_rec_t mine;
    memset(&mine, 0, sizeof mine);
    memcpy(mine.magic, REC_MAGIC, sizeof mine.magic);
    mine.nranks = htonl((uint32_t)n);
    mine.pid = htonl((uint32_t)getpid());
    mlc_random_hex(mine.nonce, 8);
    snprintf(mine.backend, sizeof mine.backend, "%s", strcmp(backend, "auto") == 0 ? "" : backend);
    mlc_host_identity(mine.host_id, sizeof mine.host_id, mine.host_name, sizeof mine.host_name);
    char key[MLC_STORE_KEY_MAX];
    rank_key(key, sizeof key, rank);
    /* Only this rank writes its key: if it is there, the store served an
     * earlier communicator (or a caller joined twice as this rank). Every
     * rank says so at once instead of joining a job that is over. */
    int held = mlc_store_exists(bs, key);
    if (held < 0) return MLC_ERR_BACKEND;
    if (held)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: the store already holds key '%s' of an earlier communicator (or "
                         "another caller joined as rank %d): use a fresh store (or key prefix) for each "
                         "communicator", bs->caller, key, rank);
    st = mlc_store_put(bs, key, &mine, sizeof mine);
    if (st == MLC_SUCCESS && rank != 0) st = mlc_store_take(bs, "mlc/job", job, 2 * JOB_HEX + 1, "rank 0");
    if (st != MLC_SUCCESS) return st;
    if (strnlen(job, 2 * JOB_HEX + 1) != 2 * JOB_HEX)
        return mlc_error(MLC_ERR_MISMATCH, "%s: key 'mlc/job' in the store is not a job id", bs->caller);
    for (int r = 0; r < n; r++) {
        char who[32];
        rank_key(key, sizeof key, r);
        snprintf(who, sizeof who, "rank %d", r);
        st = mlc_store_take(bs, key, &all[r], sizeof all[r], who);
        if (st == MLC_ERR_TIMEOUT) return missing_ranks(bs, r, n);
        if (st != MLC_SUCCESS) return st;
        rank_rec_t *x = &all[r];
        if (memcmp(x->magic, REC_MAGIC, sizeof x->magic) != 0)
            return mlc_error(MLC_ERR_MISMATCH, "%s: key '%s' in the store is not an mlcomm rank record", bs->caller,
                             key);
        x->nonce[sizeof x->nonce - 1] = x->backend[sizeof x->backend - 1] = '\0';
        x->host_id[sizeof x->host_id - 1] = x->host_name[sizeof x->host_name - 1] = '\0';
        if (ntohl(x->nranks) != (uint32_t)n)
            return mlc_error(MLC_ERR_MISMATCH, "%s: rank %d was called with nranks = %u, rank %d with %d (every "
                             "rank must pass the same nranks)", bs->caller, r, ntohl(x->nranks), rank, n);
        if (strcmp(x->backend, mine.backend) != 0)
            return mlc_error(MLC_ERR_MISMATCH, "MLC_BACKEND differs: rank %d '%s', rank %d '%s'; every rank must "
                             "use the same value", r, x->backend[0] ? x->backend : "auto", rank,
                             mine.backend[0] ? mine.backend : "auto");
    }
    /* Two callers given one rank may both have found its key free: the one
     * whose record the other overwrote finds out here, reading its own again
     * once every rank has joined (best-effort: see mlc_comm_init_store). */
    rank_rec_t again;
    char me[32];
    rank_key(key, sizeof key, rank);
    snprintf(me, sizeof me, "rank %d", rank);
    st = mlc_store_take(bs, key, &again, sizeof again, me);
    if (st != MLC_SUCCESS) return st;
    again.nonce[sizeof again.nonce - 1] = '\0';
    if (strcmp(all[rank].nonce, mine.nonce) != 0 || strcmp(again.nonce, mine.nonce) != 0)
        return claimed_twice(bs, rank);
    return MLC_SUCCESS;
}

/* ---- hosts ----------------------------------------------------------------- */

/* "'a' (ranks 0-1), 'b' (ranks 2-3)" into out; peers[r].host set. Returns the host count. */
static int group_hosts(const rank_rec_t *all, int n, mlc_boot_peer_t *peers, char *out, size_t len)
{
    int nhosts = 0;
    for (int r = 0; r < n; r++) {
        peers[r].pid = (int)ntohl(all[r].pid);
        peers[r].host = -1;
        for (int q = 0; q < r && peers[r].host < 0; q++)
            if (strcmp(all[q].host_id, all[r].host_id) == 0) peers[r].host = peers[q].host;
        if (peers[r].host < 0) peers[r].host = nhosts++;
    }
    out[0] = '\0';
    for (int h = 0, first = 0; h < nhosts; h++) {
        while (peers[first].host != h) first++;
        int count = 0;
        for (int r = first; r < n; r++) count += peers[r].host == h;
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s'%s' (rank%s", h ? ", " : "", all[first].host_name, count > 1 ? "s" : "");
        int run_start = -1, prev = -2, shown = 0;
        for (int r = first; r <= n; r++) {
            bool in = r < n && peers[r].host == h;
            if (in && r == prev + 1) {
                prev = r;
                continue;
            }
            if (run_start >= 0) {
                used = strlen(out);
                if (run_start == prev) snprintf(out + used, len - used, "%s %d", shown ? "," : "", run_start);
                else snprintf(out + used, len - used, "%s %d-%d", shown ? "," : "", run_start, prev);
                shown++;
            }
            run_start = in ? r : -1;
            prev = in ? r : -2;
        }
        used = strlen(out);
        snprintf(out + used, len - used, ")");
    }
    return nhosts;
}

/* ---- the shared path --------------------------------------------------------- */

static mlc_status_t store_boot(const mlc_bootstore_t *bs, int nranks, int rank, mlc_cfg_t *cfg, mlc_comm_t **out)
{
    rank_rec_t *all = calloc((size_t)nranks, sizeof *all);
    mlc_boot_peer_t *peers = calloc((size_t)nranks, sizeof *peers);
    char *hosts = malloc(1024);
    char job[2 * JOB_HEX + 1] = "";
    mlc_status_t st = MLC_SUCCESS;
    if (!all || !peers || !hosts) {
        st = mlc_error(MLC_ERR_NO_MEMORY, "%s: out of memory for %d ranks", bs->caller, nranks);
        goto out;
    }
    const char *asked = cfg->backend[0] ? cfg->backend : "auto";
    st = exchange(bs, rank, nranks, asked, job, all);
    if (st != MLC_SUCCESS) goto out;
    int nhosts = group_hosts(all, nranks, peers, hosts, 1024);
    int local_rank = 0, local_size = 0;
    bool one_process = nhosts == 1;
    for (int r = 0; r < nranks; r++) {
        if (peers[r].host == peers[rank].host) {
            if (r < rank) local_rank++;
            local_size++;
        }
        if (peers[r].pid != peers[0].pid) one_process = false;
    }
    cfg->rank = rank;
    cfg->world_size = nranks;
    cfg->local_rank = local_rank;
    cfg->local_size = local_size;
    snprintf(cfg->job_id, sizeof cfg->job_id, "%s", job);
    /* Unset: threads when every rank is a thread of this process, else what `auto` picks. */
    if (strcmp(asked, "auto") == 0 && one_process) snprintf(cfg->backend, sizeof cfg->backend, "threads");
    const mlc_backend_t *be = NULL;
    st = mlc_backend_select(cfg, &be);
    if (st != MLC_SUCCESS && nhosts > 1 && strcmp(asked, "auto") == 0)
        st = mlc_error(MLC_ERR_UNSUPPORTED, "%s: the %d ranks are on %d hosts, %s, and no backend that spans hosts "
                       "accepts the job: set MLC_BACKEND (nccl for device buffers, or mpi)", bs->caller, nranks,
                       nhosts, hosts);
    if (st == MLC_SUCCESS && be->host_shared && nhosts > 1)
        st = mlc_error(MLC_ERR_UNSUPPORTED, "%s: backend '%s' needs every rank on one host (shared memory cannot "
                       "span hosts), but the %d ranks are on %d hosts: %s; use a backend that spans hosts (nccl, "
                       "mpi), or check MLC_HOST_ID", bs->caller, be->name, nranks, nhosts, hosts);
    if (st != MLC_SUCCESS) goto out;
    MLC_DEBUG("%s: rank %d of %d, job %s, %d host%s: %s; backend '%s'", bs->caller, rank, nranks, job, nhosts,
              nhosts > 1 ? "s" : "", hosts, be->name);
    mlc_boot_t boot = {.rank = rank, .size = nranks, .local_rank = local_rank, .local_size = local_size,
                       .job_id = cfg->job_id, .store = bs, .peers = peers, .nhosts = nhosts, .hosts_text = hosts};
    st = mlc_comm_create_boot(cfg, &boot, be, out);
out:
    free(all);
    free(peers);
    free(hosts);
    return st;
}

/* Resolve cfg for a store bootstrap of `caller`. */
static mlc_status_t resolve(const char *caller, const mlc_config_t *cfg_in, int nranks, int rank, mlc_cfg_t *cfg)
{
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: rank %d of %d is out of range", caller, rank, nranks);
    mlc_status_t st = mlc_config_resolve_given_ranks(cfg_in, cfg);
    if (st != MLC_SUCCESS) return mlc_error_in(caller, st);
    mlc_log_configure(cfg->log_level, cfg->log_file);
    cfg->rank_source = caller;
    snprintf(cfg->rank_origin, sizeof cfg->rank_origin, "rank and size from %s's arguments", caller);
    return MLC_SUCCESS;
}

mlc_status_t mlc_comm_init_rank(const mlc_unique_id_t *id, int nranks, int rank, const mlc_config_t *cfg_in,
                                mlc_comm_t **out)
{
    mlc_error_clear();
    if (!id || !out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_rank: %s is NULL", id ? "comm" : "id");
    uid_parts_t u;
    mlc_status_t st = uid_parse(id, &u);
    if (st != MLC_SUCCESS) return st;
    mlc_cfg_t cfg;
    st = resolve("mlc_comm_init_rank", cfg_in, nranks, rank, &cfg);
    if (st != MLC_SUCCESS) return st;
    mlc_tcp_store_t *client = NULL;
    st = mlc_tcp_store_connect(u.host, u.port, u.token, rank, nranks, cfg.timeout_s, &client);
    if (st != MLC_SUCCESS) return st;
    mlc_bootstore_t bs = {.store = mlc_tcp_store_api(client), .timeout_s = cfg.timeout_s,
                          .caller = "mlc_comm_init_rank", .rank = rank, .why = mlc_tcp_store_why};
    st = store_boot(&bs, nranks, rank, &cfg, out);
    mlc_tcp_store_close(client);
    return st;
}

mlc_status_t mlc_comm_init_store(const mlc_store_t *store, int nranks, int rank, const mlc_config_t *cfg_in,
                                 mlc_comm_t **out)
{
    mlc_error_clear();
    if (!store || !out)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_store: %s is NULL", store ? "comm" : "store");
    if (!store->set || !store->get)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_init_store: the store's %s callback is NULL",
                         store->set ? "get" : "set");
    mlc_cfg_t cfg;
    mlc_status_t st = resolve("mlc_comm_init_store", cfg_in, nranks, rank, &cfg);
    if (st != MLC_SUCCESS) return st;
    mlc_bootstore_t bs = {.store = store, .timeout_s = cfg.timeout_s, .caller = "mlc_comm_init_store",
                          .rank = rank};
    return store_boot(&bs, nranks, rank, &cfg, out);
}
