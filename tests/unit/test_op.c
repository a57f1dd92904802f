/* SPDX-License-Identifier: BSD-3-Clause */
/* Op names and parsing, (dtype, op) checks, the user-op table. */
#include "base/dtype.h"
#include "unit.h"

#define USER_TABLE_CAPACITY 1024 /* MLC_OP_USER_MAX in src/base/reduce_impl.h */

static void noop_fn(const void *in, void *inout, size_t count, mlc_dtype_t dtype, void *ctx)
{
    (void)in, (void)inout, (void)count, (void)dtype, (void)ctx;
}

static void test_builtin_names(void)
{
    int n = 0;
#define X_CHECK(id, str)                                  \
    CHECK_STR(mlc_op_name(id), str);                      \
    {                                                     \
        mlc_op_t op = -1;                                 \
        CHECK_OK(mlc_op_from_name(str, &op));             \
        CHECK(op == id, "%s parses to %d", str, (int)op); \
    }                                                     \
    CHECK(mlc_op_valid(id), "%s valid", str);             \
    CHECK(mlc_op_commutative(id), "%s commutative", str); \
    n++;
    MLC_OP_LIST(X_CHECK)
#undef X_CHECK
    CHECK(n == MLC_OP_BUILTIN_COUNT, "%d ops", n);
    mlc_op_t op = 77;
    CHECK_OK(mlc_op_from_name("MAX", &op));
    CHECK(op == MLC_MAX, "case-insensitive");
    op = 77;
    CHECK_ERR_MSG(mlc_op_from_name("mean", &op), MLC_ERR_INVALID_ARG, "'mean'");
    CHECK(op == 77, "output untouched on failure");
    CHECK_ERR_MSG(mlc_op_from_name(NULL, &op), MLC_ERR_INVALID_ARG, "NULL");
    CHECK(mlc_op_name(-1) == NULL, "no name for -1");
    CHECK(mlc_op_name(MLC_OP_BUILTIN_COUNT + 5) == NULL, "no name for a free user slot");
    CHECK(!mlc_op_valid(-1), "-1 invalid");
}

static void test_check(void)
{
    for (mlc_dtype_t d = 0; d < MLC_DTYPE_COUNT; d++)
        for (mlc_op_t op = 0; op < MLC_OP_BUILTIN_COUNT; op++) CHECK_OK(mlc_op_check(d, op));
    CHECK_ERR_MSG(mlc_op_check(MLC_RECORD(24), MLC_SUM), MLC_ERR_INVALID_ARG, "'sum'");
    CHECK(strstr(mlc_last_error(), "record") != NULL, "names the dtype: %s", mlc_last_error());
    CHECK(strstr(mlc_last_error(), "24") != NULL, "names the record size: %s", mlc_last_error());
    CHECK_ERR_MSG(mlc_op_check(MLC_RECORD(8), MLC_MAX), MLC_ERR_INVALID_ARG, "'max'");
    CHECK_ERR_MSG(mlc_op_check(42, MLC_SUM), MLC_ERR_INVALID_ARG, "42");
    CHECK_ERR_MSG(mlc_op_check(MLC_FLOAT32, 99), MLC_ERR_INVALID_ARG, "99");
    CHECK_ERR_MSG(mlc_op_check(MLC_FLOAT32, -3), MLC_ERR_INVALID_ARG, "-3");

    mlc_op_t user;
    CHECK_OK(mlc_op_create(noop_fn, 1, NULL, &user));
    CHECK_OK(mlc_op_check(MLC_RECORD(24), user)); /* user ops take every dtype */
    for (mlc_dtype_t d = 0; d < MLC_DTYPE_COUNT; d++) CHECK_OK(mlc_op_check(d, user));
    CHECK_OK(mlc_op_free(user));
    CHECK_ERR_MSG(mlc_op_check(MLC_FLOAT32, user), MLC_ERR_INVALID_ARG, "unknown op");
}

static void test_user_table(void)
{
    int ctx_value = 5;
    mlc_op_t a = -1, b = -1;
    CHECK_OK(mlc_op_create(noop_fn, 1, &ctx_value, &a));
    CHECK_OK(mlc_op_create(noop_fn, 0, NULL, &b));
    CHECK(a >= MLC_OP_BUILTIN_COUNT && b >= MLC_OP_BUILTIN_COUNT, "ids %d %d", (int)a, (int)b);
    CHECK(a != b, "distinct ids");
    CHECK_STR(mlc_op_name(a), "user");
    CHECK(mlc_op_valid(a) && mlc_op_valid(b), "live");
    CHECK(mlc_op_commutative(a), "a commutative");
    CHECK(!mlc_op_commutative(b), "b not commutative");

    /* A freed slot is reused: the lowest free id is taken. */
    CHECK_OK(mlc_op_free(a));
    CHECK(!mlc_op_valid(a), "freed");
    CHECK(mlc_op_name(a) == NULL, "freed op has no name");
    CHECK_ERR_MSG(mlc_op_free(a), MLC_ERR_INVALID_ARG, "not a live user op");
    mlc_op_t c = -1;
    CHECK_OK(mlc_op_create(noop_fn, 1, NULL, &c));
    CHECK(c == a, "slot reused: %d vs %d", (int)c, (int)a);

    CHECK_ERR_MSG(mlc_op_free(MLC_SUM), MLC_ERR_INVALID_ARG, "built-in");
    CHECK_ERR_MSG(mlc_op_free(-7), MLC_ERR_INVALID_ARG, "-7");
    CHECK_ERR_MSG(mlc_op_create(NULL, 1, NULL, &c), MLC_ERR_INVALID_ARG, "fn is NULL");
    CHECK_ERR_MSG(mlc_op_create(noop_fn, 1, NULL, NULL), MLC_ERR_INVALID_ARG, "NULL");

    /* Fill the table: the next create is NO_MEMORY; freeing one makes room. */
    static mlc_op_t ops[USER_TABLE_CAPACITY];
    int made = 0;
    mlc_status_t st = MLC_SUCCESS;
    while (made < USER_TABLE_CAPACITY && (st = mlc_op_create(noop_fn, 1, NULL, &ops[made])) == 0)
        made++;
    CHECK(made == USER_TABLE_CAPACITY - 2, "made %d more ops (2 were live)", made);
    CHECK(st == MLC_ERR_NO_MEMORY, "full table -> %s", mlc_status_name(st));
    CHECK(strstr(mlc_last_error(), "full") != NULL, "message: %s", mlc_last_error());
    mlc_op_t extra = 12345;
    CHECK_ERR_MSG(mlc_op_create(noop_fn, 1, NULL, &extra), MLC_ERR_NO_MEMORY, "full");
    CHECK(extra == 12345, "output untouched on failure");
    CHECK_OK(mlc_op_free(ops[100]));
    CHECK_OK(mlc_op_create(noop_fn, 1, NULL, &extra));
    CHECK(extra == ops[100], "freed slot reused when full");
    for (int i = 0; i < made; i++)
        if (i != 100) CHECK_OK(mlc_op_free(ops[i]));
    CHECK_OK(mlc_op_free(extra));
    CHECK_OK(mlc_op_free(b));
    CHECK_OK(mlc_op_free(c));
    CHECK(mlc_op_name(MLC_OP_BUILTIN_COUNT + USER_TABLE_CAPACITY) == NULL, "past the table");
}

int main(void)
{
    test_builtin_names();
    test_check();
    test_user_table();
    return unit_result("unit_op");
}
