/*
 * Rank-test harness: one test body runs on every rank of a communicator.
 *   test --threads N     threads backend: mlc_comm_init_all + N threads
 *   test                 one rank of a job launched by mlcomm-run / mpirun
 *                        (mlc_comm_init from the environment)
 * Exit 0 = pass, 77 = skip, anything else = fail.
 */
#ifndef MLC_TEST_HARNESS_H
#define MLC_TEST_HARNESS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlcomm.h"

#define MLC_TEST_SKIP 77

/* Report a failed check with rank, place and a message, then fail the body. */
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", mlc_comm_rank(comm),   \
                    __FILE__, __LINE__, #cond);                                           \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)
/* A call that must succeed. */
#define CHECK_OK(call)                                                                    \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == MLC_SUCCESS, "%s -> %s: %s", #call, mlc_status_name(st_),            \
              mlc_last_error());                                                          \
    } while (0)
/* A call that must fail with `code` and leave a non-empty message. */
#define CHECK_ERR(call, code)                                                             \
    do {                                                                                  \
        mlc_status_t st_ = (call);                                                        \
        CHECK(st_ == (code), "%s -> %s, expected %s (%s)", #call, mlc_status_name(st_),   \
              mlc_status_name(code), mlc_last_error());                                   \
        CHECK(mlc_last_error()[0] != '\0', "%s failed without a message", #call);         \
    } while (0)

typedef int (*mlc_test_body_t)(mlc_comm_t *comm);

/* Parse argv, create the communicator(s), run body on every rank, free,
 * and return the process exit code (0 only if every rank passed). */
int mlc_test_main(int argc, char **argv, mlc_test_body_t body);

/* Agree on a pass/fail across ranks: returns non-zero if any rank failed. */
int mlc_test_any_failed(mlc_comm_t *comm, int failed);
#endif
