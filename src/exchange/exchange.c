/* SPDX-License-Identifier: BSD-3-Clause */
/* The public exchange object: views, plan cache, split-phase runs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/config.h"
#include "base/error.h"
#include "core/comm.h"
#include "exchange_impl.h"
#include "hash.h"

#define MLC_ALL_FLAGS (0u MLC_EXCHANGE_FLAG_LIST(MLC_X_FLAG_BIT))
#define MLC_X_FLAG_BIT(name, bit, text) | (bit)

/* The canonical copy of a box: coordinates past ndim zeroed (hashing, comparing). */
static mlc_box_t canonical(const mlc_box_t *b)
{
    mlc_box_t c = {0};
    c.ndim = b->ndim;
    for (int d = 0; d < b->ndim && d < MLC_EXCHANGE_MAX_DIMS; d++) {
        c.start[d] = b->start[d];
        c.shape[d] = b->shape[d];
    }
    return c;
}

static mlc_status_t check_config(const mlc_exchange_config_t *cfg)
{
    if (cfg->size != sizeof(mlc_exchange_config_t) || cfg->magic != MLC_EXCHANGE_CONFIG_MAGIC ||
        cfg->version != MLC_EXCHANGE_CONFIG_VERSION)
        return mlc_error(MLC_ERR_INVALID_ARG,
                         "mlc_exchange_create: cfg was not started from MLC_EXCHANGE_CONFIG_INIT "
                         "(size %zu, magic 0x%x, version %u; expected %zu, 0x%x, %u)",
                         cfg->size, cfg->magic, cfg->version, sizeof(mlc_exchange_config_t),
                         MLC_EXCHANGE_CONFIG_MAGIC, MLC_EXCHANGE_CONFIG_VERSION);
    if (cfg->ndim < 1 || cfg->ndim > MLC_EXCHANGE_MAX_DIMS)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_create: cfg.ndim = %d not in 1..%d",
                         cfg->ndim, MLC_EXCHANGE_MAX_DIMS);
    if (mlc_dtype_size(cfg->dtype) == 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_create: cfg.dtype = %d is not a dtype",
                         (int)cfg->dtype);
    if (cfg->flags & ~MLC_ALL_FLAGS)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_create: unknown cfg.flags bits 0x%x",
                         cfg->flags & ~MLC_ALL_FLAGS);
    bool any_periodic = false;
    for (int d = 0; d < cfg->ndim; d++) any_periodic |= cfg->periodic[d] != 0;
    if (cfg->domain.ndim == 0) {
        if (any_periodic)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "mlc_exchange_create: a periodic axis needs cfg.domain");
        return MLC_SUCCESS;
    }
    mlc_status_t st = mlc_box_check(&cfg->domain, cfg->ndim, "mlc_exchange_create: cfg.domain");
    if (st) return st;
    for (int d = 0; d < cfg->ndim; d++)
        if (cfg->domain.shape[d] == 0)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "mlc_exchange_create: cfg.domain.shape[%d] = 0 (empty domain)", d);
    return MLC_SUCCESS;
}

static uint64_t config_hash(const mlc_exchange_config_t *cfg)
{
    uint64_t h = MLC_FNV_INIT;
    h = mlc_fnv1a_u64(h, (uint64_t)cfg->ndim);
    h = mlc_fnv1a_u64(h, (uint64_t)(uint32_t)cfg->dtype);
    h = mlc_fnv1a_u64(h, cfg->flags);
    h = mlc_fnv1a_box(h, &cfg->domain);
    for (int d = 0; d < cfg->ndim; d++) h = mlc_fnv1a_u64(h, cfg->periodic[d] != 0);
    return h;
}

uint64_t mlc_xlayout_hash(const mlc_exchange_t *ex)
{
    uint64_t h = ex->cfg_hash;
    const mlc_xviews_t *lists[2] = {&ex->provs, &ex->needs};
    for (int k = 0; k < 2; k++) {
        h = mlc_fnv1a_u64(h, (uint64_t)lists[k]->n);
        for (int i = 0; i < lists[k]->n; i++) {
            h = mlc_fnv1a_box(h, &lists[k]->v[i].parent);
            h = mlc_fnv1a_box(h, &lists[k]->v[i].region);
        }
    }
    return h;
}

mlc_status_t mlc_exchange_create(mlc_comm_t *comm, const mlc_exchange_config_t *cfg,
                                 mlc_exchange_t **out)
{
    mlc_error_clear();
    if (!comm || !cfg || !out)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_create: NULL %s",
                         !comm ? "comm" : !cfg ? "cfg" : "ex");
    mlc_status_t st = check_config(cfg);
    if (st) return st;
    mlc_exchange_t *ex = calloc(1, sizeof *ex);
    if (!ex) return mlc_error(MLC_ERR_NO_MEMORY, "mlc_exchange_create: %zu bytes", sizeof *ex);
    ex->cfg = *cfg;
    ex->cfg.domain = canonical(&cfg->domain);
    for (int d = cfg->ndim; d < MLC_EXCHANGE_MAX_DIMS; d++) ex->cfg.periodic[d] = 0;
    ex->geom.ndim = cfg->ndim;
    ex->geom.esize = mlc_dtype_size(cfg->dtype);
    ex->geom.has_domain = cfg->domain.ndim != 0;
    ex->geom.domain = ex->cfg.domain;
    for (int d = 0; d < cfg->ndim; d++) ex->geom.periodic[d] = cfg->periodic[d] != 0;
    ex->cfg_hash = config_hash(&ex->cfg);
    /* The private communicator below has the caller's backend and memory kind. */
    ex->rt = mlc_xdev_runtime(comm);
    st = mlc_xexec_select(comm, mlc_env_text(MLC_ENV_EXCHANGE_EXEC), ex->rt != NULL,
                          "mlc_exchange_create: MLC_EXCHANGE_EXEC", &ex->exec);
    if (st) {
        free(ex);
        return st;
    }
    /* A private context: the exchange's messages never meet the caller's. */
    st = mlc_comm_split(comm, 0, mlc_comm_rank(comm), &ex->priv);
    if (st) {
        free(ex);
        return st;
    }
    int tag_max = mlc_comm_tag_max(ex->priv);
    if (tag_max < 1) {
        mlc_comm_free(ex->priv);
        free(ex);
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "mlc_exchange_create: backend %s allows tags up to %d; the exchange "
                         "needs at least 0..1",
                         mlc_comm_backend(comm), tag_max);
    }
    ex->run_tags = tag_max;
    *out = ex;
    return MLC_SUCCESS;
}

/* Is `data` device memory, and can the exchange's executor move it? */
static mlc_status_t classify(const mlc_exchange_t *ex, const void *data, bool *dev, const char *fn,
                             const char *what)
{
    mlc_status_t st = mlc_xdev_classify(ex->rt, data, dev, fn, what);
    if (st) return st;
    if (*dev && !ex->exec->device)
        return mlc_error(MLC_ERR_UNSUPPORTED,
                         "%s: %s %p is %s device memory, which executor '%s' cannot move (it "
                         "copies on the host); use executor 'p2p' or 'auto'",
                         fn, what, data, ex->rt->name, ex->exec->name);
    return MLC_SUCCESS;
}

static mlc_status_t add_view(mlc_exchange_t *ex, mlc_xviews_t *list, const mlc_view_t *view,
                             int *id, const char *fn)
{
    char b1[MLC_BOX_STR_LEN], b2[MLC_BOX_STR_LEN], what[64];
    mlc_error_clear();
    if (!ex || !view)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: NULL %s", fn, !ex ? "ex" : "view");
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY, "%s: an exchange is in flight (call mlc_exchange_finish)",
                         fn);
    const int nd = ex->geom.ndim;
    snprintf(what, sizeof what, "%s: view.parent", fn);
    mlc_status_t st = mlc_box_check(&view->parent, nd, what);
    if (st) return st;
    snprintf(what, sizeof what, "%s: view.region", fn);
    if ((st = mlc_box_check(&view->region, nd, what))) return st;
    if (!mlc_box_contains(&view->parent, &view->region))
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: region %s is not inside parent %s", fn,
                         mlc_box_str(&view->region, b1, sizeof b1),
                         mlc_box_str(&view->parent, b2, sizeof b2));
    uint64_t vol = mlc_box_volume(&view->parent);
    if (vol > (uint64_t)INT64_MAX / ex->geom.esize)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: parent %s holds more than 2^63 bytes", fn,
                         mlc_box_str(&view->parent, b1, sizeof b1));
    bool dev;
    if ((st = classify(ex, view->data, &dev, fn, "view.data"))) return st;
    if (list->n == INT32_MAX)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: more than %d views", fn, INT32_MAX);
    if (list->n == list->cap) {
        int cap = list->cap ? (list->cap > INT32_MAX / 2 ? INT32_MAX : 2 * list->cap) : 8;
        mlc_view_t *v = realloc(list->v, (size_t)cap * sizeof *v);
        if (!v) return mlc_error(MLC_ERR_NO_MEMORY, "%s: %d views", fn, cap);
        list->v = v;
        bool *d = realloc(list->dev, (size_t)cap * sizeof *d);
        if (!d) return mlc_error(MLC_ERR_NO_MEMORY, "%s: %d views", fn, cap);
        list->dev = d;
        list->cap = cap;
    }
    list->dev[list->n] = dev;
    mlc_view_t *v = &list->v[list->n];
    v->data = view->data;
    v->parent = canonical(&view->parent);
    v->region = canonical(&view->region);
    if (id) *id = list->n;
    list->n++;
    ex->views_changed = true;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_provide(mlc_exchange_t *ex, const mlc_view_t *view, int *id)
{
    return add_view(ex, ex ? &ex->provs : NULL, view, id, "mlc_exchange_provide");
}

mlc_status_t mlc_exchange_need(mlc_exchange_t *ex, const mlc_view_t *view, int *id)
{
    return add_view(ex, ex ? &ex->needs : NULL, view, id, "mlc_exchange_need");
}

mlc_status_t mlc_exchange_set_data(mlc_exchange_t *ex, mlc_exchange_side_t side, int id, void *data)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_set_data: NULL ex");
    if (side != MLC_EXCHANGE_PROVIDE && side != MLC_EXCHANGE_NEED)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_set_data: side %d is neither "
                         "MLC_EXCHANGE_PROVIDE nor MLC_EXCHANGE_NEED", (int)side);
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY, "mlc_exchange_set_data: an exchange is in flight");
    mlc_xviews_t *list = side == MLC_EXCHANGE_PROVIDE ? &ex->provs : &ex->needs;
    if (id < 0 || id >= list->n)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_set_data: %s id %d not in 0..%d",
                         side == MLC_EXCHANGE_PROVIDE ? "provide" : "need", id, list->n - 1);
    char what[48];
    snprintf(what, sizeof what, "%s %d data", side == MLC_EXCHANGE_PROVIDE ? "provide" : "need", id);
    bool dev;
    mlc_status_t st = classify(ex, data, &dev, "mlc_exchange_set_data", what);
    if (st) return st;
    list->dev[id] = dev;
    list->v[id].data = data;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_clear(mlc_exchange_t *ex)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_clear: NULL ex");
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY, "mlc_exchange_clear: an exchange is in flight");
    ex->provs.n = 0;
    ex->needs.n = 0;
    ex->views_changed = true;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_set_topology_version(mlc_exchange_t *ex, uint64_t version)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_set_topology_version: NULL ex");
    ex->has_version = true;
    ex->version = version;
    return MLC_SUCCESS;
}

/* Can the cached plan serve the current views? Collective in hash mode. */
static mlc_status_t cache_usable(mlc_exchange_t *ex, uint64_t hash, bool *usable)
{
    if (!ex->built) {
        *usable = false;
        return MLC_SUCCESS;
    }
    if (ex->has_version && ex->plan_has_version) {
        if (ex->version != ex->plan_version) {
            *usable = false;
            return MLC_SUCCESS;
        }
        if (hash != ex->plan_hash)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "mlc_exchange_build: this rank's boxes changed but the topology "
                             "version is still %" PRIu64 " (bump it on every rank)",
                             ex->version);
        *usable = true;
        return MLC_SUCCESS;
    }
    /* No version: a rank whose boxes are unchanged may still see its
     * neighbours change, so the ranks agree on whether anyone changed. */
    int32_t changed = hash != ex->plan_hash, any = 1;
    mlc_status_t st = mlc_allreduce(&changed, &any, 1, MLC_INT32, MLC_MAX, ex->priv, NULL);
    if (st) return st;
    *usable = any == 0;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_build(mlc_exchange_t *ex)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_build: NULL ex");
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY, "mlc_exchange_build: an exchange is in flight");
    mlc_status_t refused = mlc_group_refuse("mlc_exchange_build");
    if (refused) return refused;
    uint64_t hash = mlc_xlayout_hash(ex);
    bool usable = false;
    mlc_status_t st = cache_usable(ex, hash, &usable);
    if (st) return mlc_error_in("mlc_exchange_build", st);
    if (usable) {
        ex->cache_hits++;
        ex->views_changed = false;
        return MLC_SUCCESS;
    }
    mlc_xplan_t plan;
    void *state = NULL;
    st = mlc_xbuild(ex, &plan, &state);
    if (st) return mlc_error_in("mlc_exchange_build", st);
    if (ex->built) {
        ex->exec->release(ex->exec_state);
        mlc_xplan_free(&ex->plan);
    }
    ex->plan = plan;
    ex->exec_state = state;
    ex->built = true;
    ex->plan_hash = hash;
    ex->plan_has_version = ex->has_version;
    ex->plan_version = ex->version;
    ex->views_changed = false;
    ex->builds++;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_set_executor(mlc_exchange_t *ex, const char *name)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_set_executor: NULL ex");
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY, "mlc_exchange_set_executor: an exchange is in flight");
    const mlc_xexec_t *x;
    mlc_status_t st = mlc_xexec_select(ex->priv, name, ex->rt != NULL, "mlc_exchange_set_executor", &x);
    if (st) return st;
    if (x == ex->exec) return MLC_SUCCESS;
    const mlc_xviews_t *lists[2] = {&ex->provs, &ex->needs};
    for (int k = 0; k < 2 && !x->device; k++)
        for (int i = 0; i < lists[k]->n; i++)
            if (lists[k]->dev[i])
                return mlc_error(MLC_ERR_UNSUPPORTED,
                                 "mlc_exchange_set_executor: %s %d is %s device memory, which "
                                 "executor '%s' cannot move (it copies on the host)",
                                 k ? "need" : "provide", i, ex->rt->name, x->name);
    if (ex->built) {
        /* The plan stays; only its executor state is made again. */
        void *state = NULL;
        st = x->prepare(&ex->plan, ex->priv, &state);
        if (st) return st;
        ex->exec->release(ex->exec_state);
        ex->exec_state = state;
    }
    ex->exec = x;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_start(mlc_exchange_t *ex)
{
    char b1[MLC_BOX_STR_LEN];
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_start: NULL ex");
    mlc_status_t refused = mlc_group_refuse("mlc_exchange_start");
    if (refused) return refused;
    if (ex->in_flight)
        return mlc_error(MLC_ERR_BUSY,
                         "mlc_exchange_start: this exchange is already in flight (run %" PRIu64
                         " was started and not finished)", ex->runs - 1);
    if (!ex->built)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_start: no plan (call mlc_exchange_build)");
    if (ex->views_changed)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_start: views were added or cleared "
                         "since the last mlc_exchange_build (build again)");
    const mlc_xviews_t *lists[2] = {&ex->provs, &ex->needs};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < lists[k]->n; i++)
            if (!lists[k]->v[i].data && !mlc_box_empty(&lists[k]->v[i].region))
                return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_start: %s %d %s has no data",
                                 k ? "need" : "provide", i,
                                 mlc_box_str(&lists[k]->v[i].region, b1, sizeof b1));
    mlc_xbind_t b = {ex->provs.v, ex->needs.v, ex->provs.dev, ex->needs.dev};
    int tag = (int)(ex->runs % (uint64_t)ex->run_tags);
    mlc_status_t st = ex->exec->start(ex->exec_state, &ex->plan, &b, tag);
    if (st) return st;
    ex->runs++;
    ex->in_flight = true;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_finish(mlc_exchange_t *ex)
{
    mlc_error_clear();
    if (!ex) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_finish: NULL ex");
    mlc_status_t refused = mlc_group_refuse("mlc_exchange_finish");
    if (refused) return refused;
    if (!ex->in_flight)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_finish: no exchange in flight");
    mlc_xbind_t b = {ex->provs.v, ex->needs.v, ex->provs.dev, ex->needs.dev};
    mlc_status_t st = ex->exec->finish(ex->exec_state, &ex->plan, &b);
    ex->in_flight = false;
    return st;
}

mlc_status_t mlc_exchange_run(mlc_exchange_t *ex)
{
    mlc_status_t st = mlc_exchange_start(ex);
    if (st) return mlc_error_in("mlc_exchange_run", st);
    return mlc_error_in("mlc_exchange_run", mlc_exchange_finish(ex));
}

mlc_status_t mlc_exchange_info(const mlc_exchange_t *ex, mlc_exchange_info_t *info)
{
    mlc_error_clear();
    if (!ex || !info)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_info: NULL %s", !ex ? "ex" : "info");
    if (!ex->built)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_exchange_info: no plan (call mlc_exchange_build)");
    mlc_exchange_info_t i = {0};
    i.send_peers = ex->plan.nsend;
    i.recv_peers = ex->plan.nrecv;
    i.send_bytes = ex->plan.send_bytes;
    i.recv_bytes = ex->plan.recv_bytes;
    i.send_segments = ex->plan.nsend_segs;
    i.recv_segments = ex->plan.nrecv_segs;
    i.local_copies = ex->plan.nlocals;
    i.local_bytes = ex->plan.local_bytes;
    i.unprovided_cells = ex->plan.unprovided_cells;
    i.builds = ex->builds;
    i.cache_hits = ex->cache_hits;
    i.runs = ex->runs;
    i.layout_hash = ex->plan_hash;
    i.executor = ex->exec->name;
    *info = i;
    return MLC_SUCCESS;
}

mlc_status_t mlc_exchange_free(mlc_exchange_t *ex)
{
    if (!ex) return MLC_SUCCESS;
    /* Freeing the private communicator cancels a run in flight before its
     * buffers go. */
    mlc_comm_free(ex->priv);
    if (ex->built) {
        ex->exec->release(ex->exec_state);
        mlc_xplan_free(&ex->plan);
    }
    free(ex->provs.v);
    free(ex->needs.v);
    free(ex->provs.dev);
    free(ex->needs.dev);
    free(ex);
    return MLC_SUCCESS;
}
