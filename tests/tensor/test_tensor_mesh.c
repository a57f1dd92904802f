/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device meshes: layout, coordinates, per-axis communicators that involve
 * only their members, multi-axis groups, and argument errors.
 */
#include <string.h>
#include "harness.h"
#include "mlcomm_tensor.h"

/* Sum of the world ranks of this rank's group on `group` (comm: the world). */
static int group_sum(mlc_comm_t *comm, mlc_comm_t *group, int *sum)
{
    int32_t mine = mlc_comm_rank(comm), total = -1;
    mlc_tensor_t in, out;
    mlc_tensor_init(&in, &mine, MLC_INT32, 0, NULL);
    mlc_tensor_init(&out, &total, MLC_INT32, 0, NULL);
    CHECK_OK(mlc_tensor_allreduce(&in, &out, MLC_SUM, group, NULL));
    *sum = total;
    return 0;
}

static int check_mesh(mlc_comm_t *comm, const int *dims_in, int ndims, const char *const *names,
                      const int *want_dims)
{
    int p = mlc_comm_size(comm), w = mlc_comm_rank(comm);
    mlc_mesh_t *mesh = NULL;
    CHECK_OK(mlc_mesh_create(comm, dims_in, ndims, names, &mesh));
    CHECK(mlc_mesh_ndims(mesh) == ndims, "ndims %d", mlc_mesh_ndims(mesh));
    int coords[MLC_MESH_MAX_DIMS], rest = w;
    CHECK_OK(mlc_mesh_coords(mesh, coords));
    for (int a = ndims - 1; a >= 0; a--) {
        /* row-major, last axis fastest */
        CHECK(mlc_mesh_size(mesh, a) == want_dims[a], "axis %d size %d, want %d", a,
              mlc_mesh_size(mesh, a), want_dims[a]);
        CHECK(coords[a] == rest % want_dims[a], "axis %d coord %d, want %d", a, coords[a],
              rest % want_dims[a]);
        CHECK(mlc_mesh_coord(mesh, a) == coords[a], "coord accessor");
        rest /= want_dims[a];
    }
    int back = -1;
    CHECK_OK(mlc_mesh_rank_of(mesh, coords, &back));
    CHECK(back == w, "rank_of(coords) = %d, want %d", back, w);
    for (int a = 0; a < ndims; a++) {
        mlc_comm_t *c = mlc_mesh_comm(mesh, a);
        CHECK(c != NULL, "axis %d has no communicator", a);
        CHECK(mlc_comm_size(c) == want_dims[a], "axis %d comm size %d", a, mlc_comm_size(c));
        CHECK(mlc_comm_rank(c) == coords[a], "axis %d comm rank %d, coord %d", a, mlc_comm_rank(c),
              coords[a]);
        if (names) {
            int found = -1;
            CHECK_OK(mlc_mesh_axis(mesh, names[a], &found));
            CHECK(found == a, "axis \"%s\" found at %d", names[a], found);
            CHECK(strcmp(mlc_mesh_name(mesh, a), names[a]) == 0, "name %s", mlc_mesh_name(mesh, a));
        }
        /* Only the members take part: the sum of world ranks over the line
         * through this rank's coordinates along axis a. */
        int want = 0, sum = -1;
        for (int k = 0; k < want_dims[a]; k++) {
            int cc[MLC_MESH_MAX_DIMS], r = -1;
            memcpy(cc, coords, sizeof cc);
            cc[a] = k;
            CHECK_OK(mlc_mesh_rank_of(mesh, cc, &r));
            want += r;
        }
        if (group_sum(comm, c, &sum)) return 1;
        CHECK(sum == want, "axis %d group sum of world ranks %d, want %d", a, sum, want);
    }
    /* a group over every axis, in reverse order, holds the whole world */
    if (ndims >= 2) {
        int axes[MLC_MESH_MAX_DIMS];
        for (int a = 0; a < ndims; a++) axes[a] = ndims - 1 - a;
        mlc_comm_t *all = NULL;
        CHECK_OK(mlc_mesh_group(mesh, axes, ndims, &all));
        CHECK(mlc_comm_size(all) == p, "all-axes group size %d", mlc_comm_size(all));
        int sum = -1;
        if (group_sum(comm, all, &sum)) return 1;
        CHECK(sum == p * (p - 1) / 2, "all-axes group sum %d", sum);
        mlc_comm_free(all);
    }
    CHECK(mlc_mesh_comm(mesh, ndims) == NULL && mlc_mesh_size(mesh, -1) == -1, "out-of-range axis");
    CHECK_ERR(mlc_mesh_axis(mesh, "nope", &back), MLC_ERR_INVALID_ARG);
    CHECK_OK(mlc_mesh_free(mesh));
    return 0;
}

static int body(mlc_comm_t *comm)
{
    int p = mlc_comm_size(comm), w = mlc_comm_rank(comm);
    int failed = 0;
    {
        int dims[1] = {p}, want[1] = {p};
        failed |= check_mesh(comm, dims, 1, NULL, want);
    }
    if (!failed) {
        int dims[2] = {-1, 1}, want[2] = {p, 1};
        const char *names[2] = {"dp", "tp"};
        failed |= check_mesh(comm, dims, 2, names, want);
    }
    if (!failed && p % 2 == 0) {
        int dims[2] = {p / 2, -1}, want[2] = {p / 2, 2};
        const char *names[2] = {"dp", "tp"};
        failed |= check_mesh(comm, dims, 2, names, want);
    }
    if (!failed && p == 4) {
        int dims[3] = {2, 1, 2}, want[3] = {2, 1, 2};
        const char *names[3] = {"pp", "dp", "tp"};
        failed |= check_mesh(comm, dims, 3, names, want);
        if (!failed) {
            /* a group over pp x tp: the 4 ranks with the same (only) dp coordinate */
            mlc_mesh_t *mesh = NULL;
            CHECK_OK(mlc_mesh_create(comm, dims, 3, names, &mesh));
            int axes[2] = {0, 2};
            mlc_comm_t *g = NULL;
            CHECK_OK(mlc_mesh_group(mesh, axes, 2, &g));
            CHECK(mlc_comm_size(g) == 4 && mlc_comm_rank(g) == w, "pp x tp group: size %d rank %d",
                  mlc_comm_size(g), mlc_comm_rank(g));
            mlc_comm_free(g);
            mlc_mesh_free(mesh);
        }
    }
    if (failed) return mlc_test_any_failed(comm, 1);

    /* errors: every rank gets the same verdict */
    mlc_mesh_t *mesh = NULL;
    int too_many[2] = {p + 1, 1}, zero[2] = {0, p}, two_infer[2] = {-1, -1};
    CHECK_ERR(mlc_mesh_create(comm, too_many, 2, NULL, &mesh), MLC_ERR_INVALID_ARG);
    CHECK(strstr(mlc_last_error(), "world") != NULL, "message: %s", mlc_last_error());
    CHECK_ERR(mlc_mesh_create(comm, zero, 2, NULL, &mesh), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_mesh_create(comm, two_infer, 2, NULL, &mesh), MLC_ERR_INVALID_ARG);
    const char *dup[2] = {"tp", "tp"};
    int ok_dims[2] = {p, 1};
    CHECK_ERR(mlc_mesh_create(comm, ok_dims, 2, dup, &mesh), MLC_ERR_INVALID_ARG);
    CHECK(strstr(mlc_last_error(), "\"tp\"") != NULL, "message: %s", mlc_last_error());
    CHECK_ERR(mlc_mesh_create(comm, ok_dims, 0, NULL, &mesh), MLC_ERR_INVALID_ARG);
    CHECK_ERR(mlc_mesh_create(NULL, ok_dims, 2, NULL, &mesh), MLC_ERR_INVALID_ARG);
    CHECK(mesh == NULL, "mesh written on failure");
    if (p >= 2) {
        /* ranks asking for different meshes */
        int mine[2] = {w == 0 ? p : 1, w == 0 ? 1 : p};
        CHECK_ERR(mlc_mesh_create(comm, mine, 2, NULL, &mesh), MLC_ERR_MISMATCH);
        CHECK(strstr(mlc_last_error(), "rank 0 asks for dims") != NULL, "message: %s",
              mlc_last_error());
        /* the same dims, axis 1 named differently on the last rank: that axis is named */
        int dims2[2] = {1, p};
        const char *names[2] = {"dp", w == p - 1 ? "zz" : "tp"};
        CHECK_ERR(mlc_mesh_create(comm, dims2, 2, names, &mesh), MLC_ERR_MISMATCH);
        CHECK(strstr(mlc_last_error(), "axis 1 \"tp\"") && strstr(mlc_last_error(), "axis 1 \"zz\""),
              "message: %s", mlc_last_error());
        /* groups of different axes: an error on every rank, not groups that match no axis */
        const char *dptp[2] = {"dp", "tp"};
        CHECK_OK(mlc_mesh_create(comm, dims2, 2, dptp, &mesh));
        int axis[1] = {w == 1 ? 0 : 1};
        mlc_comm_t *g = NULL;
        CHECK_ERR(mlc_mesh_group(mesh, axis, 1, &g), MLC_ERR_MISMATCH);
        CHECK(strstr(mlc_last_error(), "mlc_mesh_group") && strstr(mlc_last_error(), "\"dp\""),
              "message: %s", mlc_last_error());
        CHECK(g == NULL, "group written on a mismatch");
        int tp[1] = {1};
        CHECK_OK(mlc_mesh_group(mesh, tp, 1, &g)); /* the world goes on */
        CHECK(mlc_comm_size(g) == p, "tp group of %d ranks", mlc_comm_size(g));
        mlc_comm_free(g);
        mlc_mesh_free(mesh);
        mesh = NULL;
    }
    CHECK_OK(mlc_mesh_free(NULL));
    return mlc_test_any_failed(comm, 0);
}

int main(int argc, char **argv) { return mlc_test_main(argc, argv, body); }
