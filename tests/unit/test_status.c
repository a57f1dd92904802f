/* SPDX-License-Identifier: BSD-3-Clause */
/* Status names and strings, the thread-local last error, the version. */
#include <pthread.h>

#include "base/error.h"
#include "unit.h"

static void test_status_list(void)
{
    int n = 0;
#define X_CHECK(name, value, text)                                   \
    CHECK((int)name == value, "%s has value %d", #name, (int)name);  \
    CHECK_STR(mlc_status_name(name), #name);                         \
    CHECK_STR(mlc_status_string(name), text);                        \
    n++;
    MLC_STATUS_LIST(X_CHECK)
#undef X_CHECK
    CHECK(n == 16, "%d status codes", n);
    CHECK_STR(mlc_status_name((mlc_status_t)42), "MLC_ERR_UNKNOWN");
    CHECK_STR(mlc_status_string((mlc_status_t)42), "unknown status");
    CHECK_STR(mlc_status_name((mlc_status_t)-1000), "MLC_ERR_UNKNOWN");
}

static void *other_thread(void *arg)
{
    (void)arg;
    const char *first = mlc_last_error();
    int empty = first[0] == '\0';
    mlc_error(MLC_ERR_TIMEOUT, "from the other thread");
    return (void *)(intptr_t)empty;
}

static void test_last_error(void)
{
    CHECK_STR(mlc_last_error(), "");
    CHECK(mlc_error(MLC_ERR_INVALID_ARG, "bad count %zu on rank %d", (size_t)7, 3) ==
              MLC_ERR_INVALID_ARG,
          "mlc_error returns its status");
    CHECK_STR(mlc_last_error(), "bad count 7 on rank 3");

    /* The message is per thread. */
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, other_thread, NULL);
    pthread_join(t, &ret);
    CHECK(ret == (void *)1, "a new thread starts with an empty message");
    CHECK_STR(mlc_last_error(), "bad count 7 on rank 3");

    /* Wrapping the current message in a new one. */
    mlc_error(MLC_ERR_CONFIG, "init failed: %s", mlc_last_error());
    CHECK_STR(mlc_last_error(), "init failed: bad count 7 on rank 3");

    mlc_error_set_text("verbatim %s text");
    CHECK_STR(mlc_last_error(), "verbatim %s text");
    mlc_error_set_text(mlc_last_error());
    CHECK_STR(mlc_last_error(), "verbatim %s text");
    mlc_error_clear();
    CHECK_STR(mlc_last_error(), "");

    /* Long messages are cut to the 1 KiB buffer, never overflow it. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mlc_error(MLC_ERR_INTERNAL, "%s", big);
    CHECK(strlen(mlc_last_error()) == 1023, "length %zu", strlen(mlc_last_error()));
    mlc_error_set_text(big);
    CHECK(strlen(mlc_last_error()) == 1023, "length %zu", strlen(mlc_last_error()));
}

static void test_version(void)
{
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", MLC_VERSION_MAJOR, MLC_VERSION_MINOR,
             MLC_VERSION_PATCH);
    CHECK_STR(mlc_version(), expect);
}

int main(void)
{
    test_status_list();
    test_last_error();
    test_version();
    return unit_result("unit_status");
}
