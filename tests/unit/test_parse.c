/* SPDX-License-Identifier: BSD-3-Clause */
/* Strict number parsers and the monotonic clock. */
#include <stdint.h>

#include "base/clock.h"
#include "config.h"
#include "unit.h"

static void test_int(void)
{
    long long v = 99;
    CHECK(mlc_parse_int("42", 0, 100, &v) && v == 42, "42");
    CHECK(mlc_parse_int("-7", -10, 10, &v) && v == -7, "-7");
    CHECK(mlc_parse_int("+7", 0, 10, &v) && v == 7, "+7");
    CHECK(mlc_parse_int("0", 0, 0, &v) && v == 0, "0");
    CHECK(mlc_parse_int("9223372036854775807", 0, INT64_MAX, &v) && v == INT64_MAX, "max");
    v = 99;
    const char *bad[] = {"", " 1", "1 ", "1x", "x", "0x10", "1.5", "-", "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!mlc_parse_int(bad[i], INT64_MIN, INT64_MAX, &v), "'%s'", bad[i]);
    CHECK(!mlc_parse_int(NULL, 0, 1, &v), "NULL");
    CHECK(!mlc_parse_int("11", 0, 10, &v), "above range");
    CHECK(!mlc_parse_int("-1", 0, 10, &v), "below range");
    CHECK(v == 99, "output untouched on failure");
}

static void test_double(void)
{
    double v = 99;
    CHECK(mlc_parse_double("1.5", 0, 10, &v) && v == 1.5, "1.5");
    CHECK(mlc_parse_double("0", 0, 10, &v) && v == 0, "0");
    CHECK(mlc_parse_double("1e3", 0, 1e9, &v) && v == 1000, "1e3");
    CHECK(mlc_parse_double(".5", 0, 1, &v) && v == 0.5, ".5");
    CHECK(mlc_parse_double("-2", -5, 5, &v) && v == -2, "-2");
    v = 99;
    const char *bad[] = {"", "abc", "inf", "nan", "-inf", " 1", "1 ", "1s", "1e999", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!mlc_parse_double(bad[i], -1e300, 1e300, &v), "'%s'", bad[i]);
    CHECK(!mlc_parse_double("11", 0, 10, &v), "above range");
    CHECK(!mlc_parse_double(NULL, 0, 10, &v), "NULL");
    CHECK(v == 99, "output untouched on failure");
}

static void test_size(void)
{
    size_t v = 99;
    CHECK(mlc_parse_size("0", &v) && v == 0, "0");
    CHECK(mlc_parse_size("123", &v) && v == 123, "123");
    CHECK(mlc_parse_size("1K", &v) && v == 1024, "1K");
    CHECK(mlc_parse_size("2m", &v) && v == 2u << 20, "2m");
    CHECK(mlc_parse_size("3G", &v) && v == (size_t)3 << 30, "3G");
    CHECK(mlc_parse_size("1073741824", &v) && v == 1073741824u, "plain bytes");
    v = 99;
    const char *bad[] = {"", "K", "1T", "1KB", "-1", " 1", "1 K", "1.5G", "18446744073709551616",
                         "99999999999999G", "x", NULL};
    for (int i = 0; bad[i]; i++) CHECK(!mlc_parse_size(bad[i], &v), "'%s'", bad[i]);
    CHECK(!mlc_parse_size(NULL, &v), "NULL");
    CHECK(v == 99, "output untouched on failure");
}

static void test_now(void)
{
    double a = mlc_now(), b = mlc_now();
    CHECK(a > 0 && b >= a, "monotonic: %f then %f", a, b);
}

int main(void)
{
    test_int();
    test_double();
    test_size();
    test_now();
    return unit_result("unit_parse");
}
