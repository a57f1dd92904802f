/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tensor layer units without ranks: the strided block copies behind
 * gather/scatter along a dimension, the even split, shape formatting,
 * descriptor helpers, and the factory's option parsing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor/options.h"
#include "tensor/tensor_internal.h"

static int failures = 0;
#define CHECK_COUNTER failures
#include "check.h"
/* Concatenating p shards along a dimension, then splitting again, against
 * a naive element-by-element model of the same layout. */
static void test_concat_split(void)
{
    unsigned seed = 12345;
    for (int trial = 0; trial < 200; trial++) {
        seed = seed * 1103515245u + 12345u;
        int p = 1 + (int)(seed >> 16) % 4;
        size_t outer = 1 + (seed >> 8) % 3, inner = 1 + (seed >> 4) % 5, esz = 1 + (seed % 3) * 3;
        size_t d[4], off[4], block[4], total = 0, bytes = 0;
        for (int q = 0; q < p; q++) {
            seed = seed * 1103515245u + 12345u;
            d[q] = (seed >> 16) % 4; /* zero-length shards too */
            off[q] = total;
            total += d[q];
            block[q] = bytes;
            bytes += outer * d[q] * inner * esz;
        }
        unsigned char *blocks = malloc(bytes + 1), *full = malloc(bytes + 1),
                      *back = malloc(bytes + 1);
        for (size_t i = 0; i < bytes; i++) blocks[i] = (unsigned char)(i * 7 + 3);
        mlc_tcopy_part_t parts[4];
        mlc_tcopy_t c;
        mlc_tcopy_plan_concat(outer, inner * esz, d, block, p, parts, &c);
        mlc_tcopy_run(&c, blocks, full);
        int bad = 0;
        for (size_t o = 0; o < outer && !bad; o++)
            for (int q = 0; q < p && !bad; q++)
                for (size_t j = 0; j < d[q] && !bad; j++)
                    for (size_t b = 0; b < inner * esz; b++) {
                        size_t src = block[q] + (o * d[q] + j) * inner * esz + b;
                        size_t dst = (o * total + off[q] + j) * inner * esz + b;
                        if (full[dst] != blocks[src]) {
                            bad = 1;
                            break;
                        }
                    }
        CHECK(!bad, "concat trial %d (p %d outer %zu inner %zu esz %zu)", trial, p, outer, inner,
              esz);
        mlc_tcopy_plan_split(outer, inner * esz, d, block, p, parts, &c);
        mlc_tcopy_run(&c, full, back);
        CHECK(memcmp(back, blocks, bytes) == 0, "split(concat(x)) != x, trial %d", trial);
        free(blocks);
        free(full);
        free(back);
    }
}

static void test_split(void)
{
    for (size_t n = 0; n < 40; n++)
        for (int size = 1; size <= 7; size++) {
            size_t next = 0, first_len = 0;
            for (int r = 0; r < size; r++) {
                size_t off = 99, len = 99;
                CHECK(mlc_tensor_split(n, size, r, &off, &len) == MLC_SUCCESS, "split");
                CHECK(off == next, "n %zu size %d rank %d: offset %zu, want %zu", n, size, r, off,
                      next);
                if (r == 0) first_len = len;
                CHECK(len == first_len || len + 1 == first_len, "uneven beyond one: %zu vs %zu",
                      len, first_len);
                next = off + len;
            }
            CHECK(next == n, "n %zu size %d: parts add up to %zu", n, size, next);
        }
    size_t off, len;
    CHECK(mlc_tensor_split(5, 2, 2, &off, &len) == MLC_ERR_INVALID_ARG, "rank out of range");
    CHECK(mlc_tensor_split(5, 2, 0, NULL, &len) == MLC_ERR_INVALID_ARG, "NULL offset");
}

static void test_descriptors(void)
{
    char buf[64];
    uint64_t shape[3] = {4, 3, 5};
    mlc_tshape_format(buf, sizeof buf, MLC_FLOAT32, 3, shape);
    CHECK(strcmp(buf, "float32[4, 3, 5]") == 0, "got %s", buf);
    mlc_tshape_format(buf, sizeof buf, MLC_INT8, 0, shape);
    CHECK(strcmp(buf, "int8[]") == 0, "got %s", buf);
    mlc_tshape_format(buf, 8, MLC_FLOAT32, 3, shape); /* truncates, terminated */
    CHECK(strlen(buf) == 7, "truncated to %zu", strlen(buf));

    mlc_tensor_t t;
    size_t s[2] = {3, 7};
    float data[21];
    CHECK(mlc_tensor_init(&t, data, MLC_FLOAT32, 2, s) == MLC_SUCCESS, "init");
    CHECK(mlc_tensor_numel(&t) == 21 && mlc_tensor_bytes(&t) == 84, "numel %zu bytes %zu",
          mlc_tensor_numel(&t), mlc_tensor_bytes(&t));
    CHECK(t.device == MLC_DEVICE_HOST, "device %d", t.device);
    CHECK(mlc_tensor_init(&t, data, MLC_FLOAT32, 0, NULL) == MLC_SUCCESS && mlc_tensor_numel(&t) == 1,
          "scalar");
    size_t huge[2] = {SIZE_MAX / 2, 3};
    CHECK(mlc_tensor_init(&t, data, MLC_FLOAT32, 2, huge) == MLC_ERR_INVALID_ARG, "overflow");
    CHECK(mlc_tensor_init(&t, data, MLC_FLOAT32, 2, NULL) == MLC_ERR_INVALID_ARG, "NULL shape");
    CHECK(mlc_tensor_numel(NULL) == 0, "NULL numel");

    int d = -9;
    CHECK(mlc_tdim_normalize(-1, 3, "t", &d) == MLC_SUCCESS && d == 2, "-1 -> %d", d);
    CHECK(mlc_tdim_normalize(3, 3, "t", &d) == MLC_ERR_INVALID_ARG, "dim 3 of 3");
    CHECK(mlc_tdim_normalize(-4, 3, "t", &d) == MLC_ERR_INVALID_ARG, "dim -4 of 3");
    CHECK(mlc_tdim_normalize(0, 0, "t", &d) == MLC_ERR_INVALID_ARG, "scalar has no dim");

    int x[8];
    CHECK(mlc_tbytes_overlap(x, 8, x + 1, 8), "overlap");
    CHECK(!mlc_tbytes_overlap(x, 4, x + 1, 4), "adjacent");
    CHECK(!mlc_tbytes_overlap(x, 0, x, 4), "empty");
}

static void test_options(void)
{
    mlc_config_t cfg = MLC_CONFIG_INIT;
    size_t algos = 99;
    mlc_option_t ok[] = {{"rank", "2"},          {"world_size", "4"},  {"timeout", "2.5"},
                         {"log_level", "debug"}, {"memory", "auto"},   {"mpi_thread_level", "funneled"},
                         {"cma", "0"},           {"job_id", "j1"},     {"algo_allreduce", "ring"},
                         {"local_rank", "0"},    {"local_size", "1"}};
    mlc_status_t st = mlc_options_apply(ok, sizeof ok / sizeof ok[0], &cfg, &algos);
    CHECK(st == MLC_SUCCESS, "apply: %s", mlc_last_error());
    CHECK(cfg.rank == 2 && cfg.world_size == 4 && cfg.local_rank == 0 && cfg.local_size == 1,
          "ranks %d %d %d %d", cfg.rank, cfg.world_size, cfg.local_rank, cfg.local_size);
    CHECK(cfg.timeout_s == 2.5, "timeout %g", cfg.timeout_s);
    CHECK(cfg.log_level == MLC_LOG_DEBUG && cfg.memory == MLC_MEMORY_AUTO, "enums");
    CHECK(cfg.mpi_thread_level == 1 && cfg.cma == 0, "thread level %d cma %d",
          cfg.mpi_thread_level, cfg.cma);
    CHECK(cfg.job_id && strcmp(cfg.job_id, "j1") == 0, "job id");
    CHECK(algos == 1, "algos %zu", algos);
    CHECK(mlc_options_algo_coll("algo_allreduce") == MLC_COLL_ALLREDUCE, "algo key");
    CHECK(mlc_options_algo_coll("algo_nonsense") == -1, "bad algo key");

    /* Each failure: CONFIG, the message names the key, cfg untouched. */
    static const struct {
        const char *key, *value;
    } bad[] = {{"no_such_key", "1"}, {"world_size", "0"},    {"world_size", "4x"},
               {"rank", "-1"},       {"timeout", "soon"},    {"log_level", "verbose"},
               {"memory", "gpu"},    {"cma", "2"},           {"algo_nonsense", "ring"},
               {"mpi_thread_level", "7"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mlc_config_t c2 = MLC_CONFIG_INIT;
        mlc_option_t o = {bad[i].key, bad[i].value};
        st = mlc_options_apply(&o, 1, &c2, &algos);
        CHECK(st == MLC_ERR_CONFIG, "%s=%s -> %s", bad[i].key, bad[i].value, mlc_status_name(st));
        CHECK(strstr(mlc_last_error(), bad[i].key) != NULL, "message \"%s\" lacks \"%s\"",
              mlc_last_error(), bad[i].key);
        CHECK(c2.rank == MLC_UNSET && c2.world_size == MLC_UNSET, "cfg written on failure");
    }
    mlc_option_t twice[] = {{"rank", "1"}, {"rank", "1"}};
    CHECK(mlc_options_apply(twice, 2, &cfg, &algos) == MLC_ERR_CONFIG, "duplicate key");
    CHECK(strstr(mlc_last_error(), "twice") != NULL, "message %s", mlc_last_error());
    mlc_option_t null_value = {"rank", NULL};
    CHECK(mlc_options_apply(&null_value, 1, &cfg, &algos) == MLC_ERR_CONFIG, "NULL value");
    CHECK(mlc_options_apply(NULL, 1, &cfg, &algos) == MLC_ERR_INVALID_ARG, "NULL options");
}

int main(void)
{
    test_concat_split();
    test_split();
    test_descriptors();
    test_options();
    if (failures) fprintf(stderr, "tensor_unit: %d failures\n", failures);
    return failures ? 1 : 0;
}
