/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device meshes: the world's ranks laid out as a row-major grid, with one
 * communicator per axis made by mlc_comm_split. An operation on an axis
 * communicator involves only the ranks of that group (the ranks whose
 * coordinates differ only along the axis): it is a communicator of its own,
 * not a filter in front of the world communicator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/comm.h"
#include "base/error.h"
#include "mlcomm_tensor.h"

struct mlc_mesh {
    mlc_comm_t *world;
    int ndims;
    int dims[MLC_MESH_MAX_DIMS];
    int coords[MLC_MESH_MAX_DIMS];
    char names[MLC_MESH_MAX_DIMS][MLC_MESH_NAME_MAX];
    mlc_comm_t *comms[MLC_MESH_MAX_DIMS];
};

/* What every rank must agree on: exchanged before any split. */
typedef struct mesh_record {
    int32_t status; /* this rank's local check */
    int32_t ndims;
    int32_t dims[MLC_MESH_MAX_DIMS];
    char names[MLC_MESH_MAX_DIMS][MLC_MESH_NAME_MAX];
} mesh_record_t;

/* Linear index of coords over the axes where use[a] is set (row-major in axis order). */
static int linear_over(const int *dims, const int *coords, int ndims, const bool *use)
{
    int idx = 0;
    for (int a = 0; a < ndims; a++) {
        if (use[a]) idx = idx * dims[a] + coords[a];
    }
    return idx;
}

static void format_dims(char *buf, size_t len, const int32_t *dims, int ndims)
{
    size_t used = (size_t)snprintf(buf, len, "{");
    for (int a = 0; a < ndims && used < len; a++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", a ? ", " : "", (int)dims[a]);
    if (used < len) snprintf(buf + used, len - used, "}");
}

/* "{1 \"tp\", 0 \"dp\"}" from a record {naxes, axes...}. */
static void describe_axes(const mlc_mesh_t *mesh, const int32_t *rec, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "{");
    for (int i = 0; i < rec[0] && i < MLC_MESH_MAX_DIMS && used < len; i++) {
        int a = rec[1 + i];
        used += (size_t)snprintf(buf + used, len - used, "%s%d \"%s\"", i ? ", " : "", a,
                                 a >= 0 && a < mesh->ndims ? mesh->names[a] : "?");
    }
    if (used < len) snprintf(buf + used, len - used, "}");
}

/* Check the caller's arguments and fill the record (dims resolved, names filled in). */
static mlc_status_t mesh_local(int world_size, const int *dims, int ndims, const char *const *names,
                               mesh_record_t *rec)
{
    const char *fn = "mlc_mesh_create";
    if (ndims < 1 || ndims > MLC_MESH_MAX_DIMS)
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: ndims %d is outside 1..%d", fn, ndims,
                         MLC_MESH_MAX_DIMS);
    if (!dims) return mlc_error(MLC_ERR_INVALID_ARG, "%s: dims is NULL", fn);
    rec->ndims = ndims;
    int infer = -1;
    long long product = 1;
    for (int a = 0; a < ndims; a++) {
        if (dims[a] == -1 && infer < 0) {
            infer = a;
            continue;
        }
        if (dims[a] < 1)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "%s: dims[%d] = %d; sizes must be >= 1 (one of them may be -1)", fn, a,
                             dims[a]);
        product *= dims[a];
        if (product > world_size) break;
        rec->dims[a] = dims[a];
    }
    if (infer >= 0) {
        if (product > world_size || world_size % product != 0)
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "%s: the world size %d is not a multiple of %lld, the product of the "
                             "other axes",
                             fn, world_size, product);
        rec->dims[infer] = (int32_t)(world_size / product);
        product = world_size;
    }
    if (product != world_size) {
        char buf[128];
        int32_t shown[MLC_MESH_MAX_DIMS];
        for (int a = 0; a < ndims; a++) shown[a] = dims[a];
        format_dims(buf, sizeof buf, shown, ndims);
        return mlc_error(MLC_ERR_INVALID_ARG, "%s: dims %s hold %lld ranks but the world has %d", fn,
                         buf, product, world_size);
    }
    for (int a = 0; a < ndims; a++) {
        const char *name = names ? names[a] : NULL;
        if (names && (!name || !name[0] || strlen(name) >= MLC_MESH_NAME_MAX))
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "%s: names[%d] must be a non-empty string shorter than %d bytes", fn, a,
                             MLC_MESH_NAME_MAX);
        if (name) snprintf(rec->names[a], MLC_MESH_NAME_MAX, "%s", name);
        else snprintf(rec->names[a], MLC_MESH_NAME_MAX, "dim%d", a);
        for (int b = 0; b < a; b++) {
            if (strcmp(rec->names[a], rec->names[b]) == 0)
                return mlc_error(MLC_ERR_INVALID_ARG, "%s: axes %d and %d are both named \"%s\"", fn,
                                 b, a, rec->names[a]);
        }
    }
    return MLC_SUCCESS;
}

/* Every rank passed the same mesh (or the verdict names who did not). */
static mlc_status_t mesh_agree(mlc_comm_t *world, mesh_record_t *mine, mlc_status_t local)
{
    const char *fn = "mlc_mesh_create";
    char local_msg[384] = "";
    if (local != MLC_SUCCESS) snprintf(local_msg, sizeof local_msg, "%s", mlc_last_error());
    mine->status = local;
    int p = mlc_comm_size(world);
    mesh_record_t *all = calloc((size_t)p, sizeof *all);
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d records", fn, p);
    int outer = mlc_comm_own_begin(world, MLC_COMM_CALL_MESH_CREATE); /* named in a mismatch or timeout */
    mlc_status_t st = mlc_allgather(mine, all, sizeof *mine, MLC_UINT8, world, NULL);
    mlc_comm_own_end(world, outer);
    if (st == MLC_SUCCESS && local != MLC_SUCCESS) st = mlc_error(local, "%s", local_msg);
    for (int r = 0; st == MLC_SUCCESS && r < p; r++) {
        if (all[r].status != MLC_SUCCESS)
            st = mlc_error(MLC_ERR_MISMATCH, "%s: rank %d's arguments failed its own check (%s)",
                           fn, r, mlc_status_name((mlc_status_t)all[r].status));
    }
    for (int r = 1; st == MLC_SUCCESS && r < p; r++) {
        bool same = all[r].ndims == all[0].ndims;
        int a = 0; /* the first axis that differs (named in the message) */
        for (; same && a < all[0].ndims; a++)
            same = all[r].dims[a] == all[0].dims[a] && strcmp(all[r].names[a], all[0].names[a]) == 0;
        if (!same) {
            char da[128], db[128];
            format_dims(da, sizeof da, all[0].dims, all[0].ndims);
            format_dims(db, sizeof db, all[r].dims, all[r].ndims);
            if (all[r].ndims == all[0].ndims)
                st = mlc_error(MLC_ERR_MISMATCH,
                               "%s: rank 0 asks for dims %s (axis %d \"%s\"), rank %d for dims %s "
                               "(axis %d \"%s\")",
                               fn, da, a - 1, all[0].names[a - 1], r, db, a - 1, all[r].names[a - 1]);
            else
                st = mlc_error(MLC_ERR_MISMATCH, "%s: rank 0 asks for dims %s, rank %d for dims %s", fn, da,
                               r, db);
        }
    }
    free(all);
    return st;
}

MLC_API mlc_status_t mlc_mesh_free(mlc_mesh_t *mesh)
{
    mlc_error_clear();
    if (!mesh) return MLC_SUCCESS;
    mlc_status_t first = MLC_SUCCESS;
    for (int a = 0; a < mesh->ndims; a++) {
        mlc_status_t st = mlc_comm_free(mesh->comms[a]);
        if (st != MLC_SUCCESS && first == MLC_SUCCESS) first = st;
    }
    free(mesh);
    return first;
}

MLC_API mlc_status_t mlc_mesh_create(mlc_comm_t *world, const int *dims, int ndims,
                                     const char *const *names, mlc_mesh_t **mesh)
{
    mlc_error_clear();
    if (!world) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_create: world is NULL");
    mlc_status_t st = mlc_comm_check(world);
    if (st != MLC_SUCCESS) return st;
    mesh_record_t rec;
    memset(&rec, 0, sizeof rec);
    mlc_status_t local = mesh_local(mlc_comm_size(world), dims, ndims, names, &rec);
    if (local == MLC_SUCCESS && !mesh)
        local = mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_create: mesh is NULL");
    mlc_mesh_t *m = calloc(1, sizeof *m);
    if (local == MLC_SUCCESS && !m)
        local = mlc_error(MLC_ERR_NO_MEMORY, "mlc_mesh_create: no memory for the mesh");
    st = mesh_agree(world, &rec, local);
    if (st != MLC_SUCCESS) {
        free(m);
        return st;
    }
    m->world = world;
    m->ndims = rec.ndims;
    int rest = mlc_comm_rank(world);
    for (int a = m->ndims - 1; a >= 0; a--) {
        m->dims[a] = rec.dims[a];
        memcpy(m->names[a], rec.names[a], MLC_MESH_NAME_MAX);
        m->coords[a] = rest % m->dims[a];
        rest /= m->dims[a];
    }
    for (int a = 0; a < m->ndims; a++) {
        bool others[MLC_MESH_MAX_DIMS];
        for (int b = 0; b < m->ndims; b++) others[b] = b != a;
        int color = linear_over(m->dims, m->coords, m->ndims, others);
        st = mlc_comm_split(world, color, m->coords[a], &m->comms[a]);
        if (st != MLC_SUCCESS) {
            char msg[384];
            snprintf(msg, sizeof msg, "%s", mlc_last_error());
            mlc_mesh_free(m);
            mlc_error_set_text(msg);
            return st;
        }
    }
    *mesh = m;
    return MLC_SUCCESS;
}

MLC_API int mlc_mesh_ndims(const mlc_mesh_t *mesh) { return mesh ? mesh->ndims : -1; }

static bool axis_ok(const mlc_mesh_t *mesh, int axis)
{
    return mesh && axis >= 0 && axis < mesh->ndims;
}

MLC_API int mlc_mesh_size(const mlc_mesh_t *mesh, int axis)
{
    return axis_ok(mesh, axis) ? mesh->dims[axis] : -1;
}

MLC_API int mlc_mesh_coord(const mlc_mesh_t *mesh, int axis)
{
    return axis_ok(mesh, axis) ? mesh->coords[axis] : -1;
}

MLC_API const char *mlc_mesh_name(const mlc_mesh_t *mesh, int axis)
{
    return axis_ok(mesh, axis) ? mesh->names[axis] : NULL;
}

MLC_API mlc_comm_t *mlc_mesh_comm(const mlc_mesh_t *mesh, int axis)
{
    return axis_ok(mesh, axis) ? mesh->comms[axis] : NULL;
}

MLC_API mlc_status_t mlc_mesh_axis(const mlc_mesh_t *mesh, const char *name, int *axis)
{
    mlc_error_clear();
    if (!mesh || !name || !axis)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_axis: %s is NULL",
                         !mesh ? "mesh" : !name ? "name" : "axis");
    for (int a = 0; a < mesh->ndims; a++) {
        if (strcmp(mesh->names[a], name) == 0) {
            *axis = a;
            return MLC_SUCCESS;
        }
    }
    char known[MLC_MESH_MAX_DIMS * (MLC_MESH_NAME_MAX + 2)];
    size_t used = 0;
    known[0] = '\0';
    for (int a = 0; a < mesh->ndims; a++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", a ? ", " : "",
                                 mesh->names[a]);
    return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_axis: no axis named \"%s\" (axes: %s)", name,
                     known);
}

MLC_API mlc_status_t mlc_mesh_rank_of(const mlc_mesh_t *mesh, const int *coords, int *rank)
{
    mlc_error_clear();
    if (!mesh || !coords || !rank)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_rank_of: %s is NULL",
                         !mesh ? "mesh" : !coords ? "coords" : "rank");
    for (int a = 0; a < mesh->ndims; a++) {
        if (coords[a] < 0 || coords[a] >= mesh->dims[a])
            return mlc_error(MLC_ERR_INVALID_ARG,
                             "mlc_mesh_rank_of: coords[%d] = %d is outside 0..%d (axis \"%s\")", a,
                             coords[a], mesh->dims[a] - 1, mesh->names[a]);
    }
    bool all[MLC_MESH_MAX_DIMS];
    for (int a = 0; a < mesh->ndims; a++) all[a] = true;
    *rank = linear_over(mesh->dims, coords, mesh->ndims, all);
    return MLC_SUCCESS;
}

MLC_API mlc_status_t mlc_mesh_coords(const mlc_mesh_t *mesh, int *coords)
{
    mlc_error_clear();
    if (!mesh || !coords)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_coords: %s is NULL",
                         !mesh ? "mesh" : "coords");
    for (int a = 0; a < mesh->ndims; a++) coords[a] = mesh->coords[a];
    return MLC_SUCCESS;
}

/* Every rank asks for the same axes, in the same order: the split's colors
 * would otherwise make groups that match no axis, with success everywhere. */
static mlc_status_t group_agree(const mlc_mesh_t *mesh, const int *axes, int naxes)
{
    const char *fn = "mlc_mesh_group";
    int p = mlc_comm_size(mesh->world);
    int32_t mine[MLC_MESH_MAX_DIMS + 1] = {naxes}, *all = calloc((size_t)p, sizeof mine);
    if (!all) return mlc_error(MLC_ERR_NO_MEMORY, "%s: no memory for %d records", fn, p);
    for (int i = 0; i < naxes; i++) mine[1 + i] = axes[i];
    int outer = mlc_comm_own_begin(mesh->world, MLC_COMM_CALL_MESH_GROUP); /* named in a mismatch or timeout */
    mlc_status_t st = mlc_allgather(mine, all, MLC_MESH_MAX_DIMS + 1, MLC_INT32, mesh->world, NULL);
    mlc_comm_own_end(mesh->world, outer);
    for (int r = 0; st == MLC_SUCCESS && r < p; r++) {
        const int32_t *theirs = all + (size_t)r * (MLC_MESH_MAX_DIMS + 1);
        if (memcmp(theirs, mine, sizeof mine) == 0) continue;
        char a[160], b[160];
        describe_axes(mesh, mine, a, sizeof a);
        describe_axes(mesh, theirs, b, sizeof b);
        st = mlc_error(MLC_ERR_MISMATCH, "%s: rank %d asks for the group of axes %s, rank %d for axes %s", fn,
                       mlc_comm_rank(mesh->world), a, r, b);
    }
    free(all);
    return st;
}

MLC_API mlc_status_t mlc_mesh_group(const mlc_mesh_t *mesh, const int *axes, int naxes,
                                    mlc_comm_t **out)
{
    mlc_error_clear();
    if (!mesh || !axes || !out)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_group: %s is NULL",
                         !mesh ? "mesh" : !axes ? "axes" : "out");
    if (naxes < 1 || naxes > mesh->ndims)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_group: naxes %d is outside 1..%d", naxes,
                         mesh->ndims);
    bool chosen[MLC_MESH_MAX_DIMS] = {false}, others[MLC_MESH_MAX_DIMS];
    int sub_dims[MLC_MESH_MAX_DIMS], sub_coords[MLC_MESH_MAX_DIMS];
    for (int i = 0; i < naxes; i++) {
        int a = axes[i];
        if (a < 0 || a >= mesh->ndims)
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_group: axes[%d] = %d is outside 0..%d",
                             i, a, mesh->ndims - 1);
        if (chosen[a])
            return mlc_error(MLC_ERR_INVALID_ARG, "mlc_mesh_group: axis %d (\"%s\") is listed twice",
                             a, mesh->names[a]);
        chosen[a] = true;
        sub_dims[i] = mesh->dims[a];
        sub_coords[i] = mesh->coords[a];
    }
    bool all[MLC_MESH_MAX_DIMS];
    for (int a = 0; a < mesh->ndims; a++) {
        others[a] = !chosen[a];
        all[a] = true;
    }
    int color = linear_over(mesh->dims, mesh->coords, mesh->ndims, others);
    /* key: row-major over the chosen axes in the caller's order */
    int key = linear_over(sub_dims, sub_coords, naxes, all);
    mlc_status_t st = group_agree(mesh, axes, naxes);
    return st ? st : mlc_comm_split(mesh->world, color, key, out);
}
