/* SPDX-License-Identifier: BSD-3-Clause */
/* dtype sizes, names, parsing, records. */
#include "base/dtype.h"
#include "unit.h"

static void test_builtin(void)
{
    int n = 0;
#define X_CHECK(id, str, size)                                                   \
    CHECK(mlc_dtype_size(id) == size, "%s size %zu", str, mlc_dtype_size(id));   \
    CHECK_STR(mlc_dtype_name(id), str);                                          \
    CHECK(!mlc_dtype_is_record(id), "%s is not a record", str);                  \
    {                                                                            \
        mlc_dtype_t d = -1;                                                      \
        CHECK_OK(mlc_dtype_from_name(str, &d));                                  \
        CHECK(d == id, "%s parses to %d", str, (int)d);                          \
    }                                                                            \
    n++;
    MLC_DTYPE_LIST(X_CHECK)
#undef X_CHECK
    CHECK(n == MLC_DTYPE_COUNT, "%d dtypes", n);
}

static void test_aliases(void)
{
    static const struct {
        const char *name;
        mlc_dtype_t d;
    } cases[] = {
        {"float32", MLC_FLOAT32}, {"f32", MLC_FLOAT32},     {"fp32", MLC_FLOAT32},
        {"float", MLC_FLOAT32},   {"FLOAT", MLC_FLOAT32},   {"float16", MLC_FLOAT16},
        {"fp16", MLC_FLOAT16},    {"half", MLC_FLOAT16},    {"bfloat16", MLC_BFLOAT16},
        {"bf16", MLC_BFLOAT16},   {"BF16", MLC_BFLOAT16},   {"int8", MLC_INT8},
        {"uint8", MLC_UINT8},     {"int32", MLC_INT32},     {"int", MLC_INT32},
        {"uint32", MLC_UINT32},   {"int64", MLC_INT64},     {"uint64", MLC_UINT64},
        {"float64", MLC_FLOAT64}, {"f64", MLC_FLOAT64},     {"double", MLC_FLOAT64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mlc_dtype_t d = -1;
        CHECK_OK(mlc_dtype_from_name(cases[i].name, &d));
        CHECK(d == cases[i].d, "'%s' parsed as %d, expected %d", cases[i].name, (int)d,
              (int)cases[i].d);
    }
    mlc_dtype_t d = 12345;
    CHECK_ERR_MSG(mlc_dtype_from_name("float8", &d), MLC_ERR_INVALID_ARG, "'float8'");
    CHECK(d == 12345, "output untouched on failure");
    CHECK_ERR_MSG(mlc_dtype_from_name("", &d), MLC_ERR_INVALID_ARG, "''");
    CHECK_ERR_MSG(mlc_dtype_from_name("int32 ", &d), MLC_ERR_INVALID_ARG, "'int32 '");
    CHECK_ERR_MSG(mlc_dtype_from_name(NULL, &d), MLC_ERR_INVALID_ARG, "NULL");
    CHECK_ERR_MSG(mlc_dtype_from_name("int8", NULL), MLC_ERR_INVALID_ARG, "NULL");
    CHECK_OK(mlc_dtype_from_name("int8", &d));
    CHECK_STR(mlc_last_error(), ""); /* success clears the message */
}

static void test_records(void)
{
    CHECK(mlc_dtype_is_record(MLC_RECORD(12)), "record flag");
    CHECK(mlc_dtype_size(MLC_RECORD(1)) == 1, "record 1");
    CHECK(mlc_dtype_size(MLC_RECORD(12)) == 12, "record 12");
    CHECK(mlc_dtype_size(MLC_RECORD(65535)) == 65535, "record 65535");
    CHECK_STR(mlc_dtype_name(MLC_RECORD(12)), "record");
    /* malformed records */
    CHECK(mlc_dtype_size(MLC_RECORD(0)) == 0, "record 0 is not a dtype");
    CHECK(mlc_dtype_name(MLC_RECORD(0)) == NULL, "record 0 has no name");
    CHECK(mlc_dtype_size(0x30001) == 0, "stray high bits");
    CHECK(mlc_dtype_name(0x30001) == NULL, "stray high bits");
}

static void test_unknown(void)
{
    const mlc_dtype_t bad[] = {-1, MLC_DTYPE_COUNT, 100, 0xFFFF, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(mlc_dtype_size(bad[i]) == 0, "size of %d", (int)bad[i]);
        CHECK(mlc_dtype_name(bad[i]) == NULL, "name of %d", (int)bad[i]);
    }
}

int main(void)
{
    test_builtin();
    test_aliases();
    test_records();
    test_unknown();
    return unit_result("unit_dtype");
}
