/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit test: box arithmetic (intersection, subtraction, halos, printing). */
#include "exchange/box.h"
#include "xunit.h"

static mlc_box_t box2(int64_t y, int64_t x, int64_t h, int64_t w)
{
    int64_t s[2] = {y, x}, e[2] = {h, w};
    return mlc_box_make(2, s, e);
}

static int in_box(const mlc_box_t *b, const int64_t *c)
{
    for (int d = 0; d < b->ndim; d++)
        if (c[d] < b->start[d] || c[d] >= b->start[d] + b->shape[d]) return 0;
    return 1;
}

static int test_intersect_basics(void)
{
    mlc_box_t a = box2(0, 0, 4, 4), b = box2(2, 3, 4, 4), c;
    CHECK(mlc_box_intersect(&a, &b, &c), "boxes meet");
    CHECK(c.start[0] == 2 && c.start[1] == 3 && c.shape[0] == 2 && c.shape[1] == 1, "cut");
    mlc_box_t far = box2(4, 0, 1, 4);
    CHECK(!mlc_box_intersect(&a, &far, &c), "touching boxes do not meet");
    CHECK(mlc_box_volume(&a) == 16, "volume");
    mlc_box_t empty = box2(0, 0, 0, 5);
    CHECK(mlc_box_empty(&empty) && mlc_box_volume(&empty) == 0, "empty");
    CHECK(mlc_box_contains(&a, &empty), "empty inside anything");
    CHECK(mlc_box_contains(&a, &c) && !mlc_box_contains(&a, &b), "contains");
    char buf[MLC_BOX_STR_LEN];
    CHECK(strcmp(mlc_box_str(&b, buf, sizeof buf), "[2,6)x[3,7)") == 0, "str %s", buf);
    CHECK(mlc_floor_div(-1, 4) == -1 && mlc_floor_div(-4, 4) == -1 && mlc_floor_div(3, 4) == 0 &&
              mlc_floor_div(-5, 4) == -2,
          "floor_div");
    return 0;
}

/* a \ b, checked cell by cell on random 3-D boxes: pieces disjoint, union exact. */
static int test_subtract_random(void)
{
    uint64_t seed = 12345;
    for (int iter = 0; iter < 300; iter++) {
        int64_t s[3], e[3], s2[3], e2[3];
        for (int d = 0; d < 3; d++) {
            s[d] = xrange(&seed, -3, 3);
            e[d] = xrange(&seed, 0, 5);
            s2[d] = xrange(&seed, -4, 4);
            e2[d] = xrange(&seed, 0, 6);
        }
        mlc_box_t a = mlc_box_make(3, s, e), b = mlc_box_make(3, s2, e2);
        mlc_box_t out[2 * MLC_EXCHANGE_MAX_DIMS];
        int n = mlc_box_subtract(&a, &b, out);
        CHECK(n <= 6, "at most 2*ndim pieces, got %d", n);
        int64_t c[3];
        for (c[0] = -5; c[0] < 9; c[0]++)
            for (c[1] = -5; c[1] < 9; c[1]++)
                for (c[2] = -5; c[2] < 9; c[2]++) {
                    int want = in_box(&a, c) && !in_box(&b, c);
                    int got = 0;
                    for (int i = 0; i < n; i++) got += in_box(&out[i], c);
                    CHECK(got == want, "iter %d cell (%lld,%lld,%lld): covered %d times, want %d",
                          iter, (long long)c[0], (long long)c[1], (long long)c[2], got, want);
                }
        for (int i = 0; i < n; i++) CHECK(!mlc_box_empty(&out[i]), "no empty pieces");
    }
    return 0;
}

static int test_halo(void)
{
    mlc_box_t v = box2(10, 20, 4, 5), out[2 * MLC_EXCHANGE_MAX_DIMS];
    int w[2] = {2, 1}, n = -1;
    CHECK_OK(mlc_box_halo(&v, w, out, &n));
    CHECK(n == 4, "2-D halo has 4 slabs, got %d", n);
    uint64_t vol = 0;
    for (int i = 0; i < n; i++) vol += mlc_box_volume(&out[i]);
    CHECK(vol == (uint64_t)(8 * 7 - 4 * 5), "halo volume %llu", (unsigned long long)vol);
    /* Corners belong to the axis-0 slabs. */
    int64_t corner[2] = {8, 19};
    CHECK(in_box(&out[0], corner), "corner in first slab");
    int w0[2] = {0, 0};
    CHECK_OK(mlc_box_halo(&v, w0, out, &n));
    CHECK(n == 0, "zero width: no halo");
    int wneg[2] = {1, -1};
    CHECK_ERR_MSG(mlc_box_halo(&v, wneg, out, &n), MLC_ERR_INVALID_ARG, "width[1] = -1");
    mlc_box_t bad = v;
    bad.ndim = 0;
    CHECK_ERR_MSG(mlc_box_halo(&bad, w, out, &n), MLC_ERR_INVALID_ARG, "ndim 0");
    CHECK_ERR_MSG(mlc_box_halo(NULL, w, out, &n), MLC_ERR_INVALID_ARG, "NULL valid");
    /* 4-D: 8 slabs. */
    int64_t s4[4] = {0, 0, 0, 0}, e4[4] = {2, 3, 4, 5};
    mlc_box_t v4 = mlc_box_make(4, s4, e4);
    int w4[4] = {1, 1, 1, 1};
    CHECK_OK(mlc_box_halo(&v4, w4, out, &n));
    vol = 0;
    for (int i = 0; i < n; i++) vol += mlc_box_volume(&out[i]);
    CHECK(n == 8 && vol == (uint64_t)(4 * 5 * 6 * 7 - 2 * 3 * 4 * 5), "4-D halo n=%d vol=%llu", n,
          (unsigned long long)vol);
    return 0;
}

static int test_check(void)
{
    mlc_box_t b = box2(0, 0, 3, -1);
    CHECK_ERR_MSG(mlc_box_check(&b, 2, "view"), MLC_ERR_INVALID_ARG, "view has shape[1] = -1");
    b = box2(0, 0, 3, 3);
    CHECK_ERR_MSG(mlc_box_check(&b, 3, "view"), MLC_ERR_INVALID_ARG, "ndim 2, the exchange has 3");
    b.start[0] = (int64_t)1 << 62;
    CHECK_ERR_MSG(mlc_box_check(&b, 2, "view"), MLC_ERR_INVALID_ARG, "beyond");
    return 0;
}

int main(void)
{
    int failures = 0;
    XRUN(test_intersect_basics);
    XRUN(test_subtract_random);
    XRUN(test_halo);
    XRUN(test_check);
    return failures ? 1 : 0;
}
