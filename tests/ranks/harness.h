/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rank-test harness: one test body runs on every rank of a communicator.
 *   test --threads N     threads backend: mlc_comm_init_all + N threads
 *   test                 one rank of a job launched by mlcomm-run / mpirun
 *                        (mlc_comm_init from the environment)
 * Exit 0 = pass, 77 = skip, anything else = fail.
 *
 * When a rank's body fails, the harness aborts that rank's communicator so
 * the other ranks stop waiting for it (they fail with MLC_ERR_ABORTED instead
 * of hanging until the test's timeout).
 */
#ifndef MLC_TEST_HARNESS_H
#define MLC_TEST_HARNESS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlcomm.h"

#define MLC_TEST_SKIP 77

/*
 * Checks (tests/check.h): a failed check prints "[rank N] file:line: ..." and
 * returns 1 from the test body. A test that would rather count and go on
 * defines CHECK_COUNTER (and CHECK_WHO if it has no `comm`) before this.
 */
#if !defined(CHECK_RETURNS) && !defined(CHECK_COUNTER)
#define CHECK_RETURNS 1
#endif
#ifndef CHECK_WHO
#define CHECK_WHO() fprintf(stderr, "[rank %d] ", mlc_comm_rank(comm))
#endif
#include "check.h"

/* Compare two buffers byte for byte; on a mismatch name the first differing
 * element (of esize bytes) and show both values in hex. */
#define CHECK_MEM(got, want, nbytes, esize, ...)                                          \
    do {                                                                                  \
        char where_[256];                                                                 \
        if (mlc_test_memdiff((got), (want), (nbytes), (esize), where_, sizeof where_)) {  \
            size_t len_ = strlen(where_);                                                 \
            snprintf(where_ + len_, sizeof where_ - len_, ": ");                          \
            CHECK_FAILED(where_, __VA_ARGS__);                                            \
        }                                                                                 \
    } while (0)

typedef int (*mlc_test_body_t)(mlc_comm_t *comm);

/* Parse argv, create the communicator(s), run body on every rank, free,
 * and return the process exit code (0 only if every rank passed). */
int mlc_test_main(int argc, char **argv, mlc_test_body_t body);
#define MLC_TEST_MAIN(body)                                                               \
    int main(int argc, char **argv) { return mlc_test_main(argc, argv, (body)); }

/* Agree on a pass/fail across ranks: returns non-zero if any rank failed. */
int mlc_test_any_failed(mlc_comm_t *comm, int failed);

/* ---- data helpers ------------------------------------------------------- */

/* 64-bit FNV-1a of a buffer. */
uint64_t mlc_test_hash(const void *buf, size_t bytes);
/* splitmix64 finalizer: a well-mixed function of x. Inline: the test-data
 * generators call it per element, and they dominate the large tests. */
static inline uint64_t mlc_test_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* Fill / check a deterministic byte pattern that depends on seed and the
 * byte offset. check returns the first differing offset, or SIZE_MAX. */
void mlc_test_pattern_fill(void *buf, size_t bytes, uint64_t seed);
size_t mlc_test_pattern_check(const void *buf, size_t bytes, uint64_t seed);
/* Byte `off` of the pattern of `seed` (for reporting). */
unsigned char mlc_test_pattern_byte(uint64_t seed, size_t off);
/*
 * Non-zero when the buffers differ; `where` then names the first differing
 * element (index, offset, both values in hex) and how many elements differ.
 */
int mlc_test_memdiff(const void *got, const void *want, size_t bytes, size_t esize, char *where,
                     size_t where_len);

/*
 * Collective: allgather a hash of buf from every rank and compare. Returns 0
 * when every rank holds identical bytes; otherwise reports which ranks differ
 * and returns non-zero (also when the allgather itself fails).
 */
int mlc_test_same_on_all_ranks(mlc_comm_t *comm, const void *buf, size_t bytes,
                               const char *what);

/*
 * Buffers with a guard zone after the end: mlc_test_guard_ok checks that
 * nobody wrote past `bytes`. Free with mlc_test_free. bytes may be 0.
 */
void *mlc_test_alloc(size_t bytes);
int mlc_test_guard_ok(const void *buf, size_t bytes);
void mlc_test_free(void *buf);

/*
 * Algorithm names this communicator's backend can run for coll (from the
 * backend's own list); returns how many were written to names (at most max).
 * 0 means the backend only has its native implementation.
 */
size_t mlc_test_algos(mlc_comm_t *comm, mlc_coll_t coll, const char **names, size_t max);

/* 1 if the named algorithm of coll keeps rank order (safe for non-commutative ops). */
int mlc_test_algo_order_preserving(mlc_coll_t coll, const char *name);

/* Monotonic seconds (CLOCK_MONOTONIC is shared by every process of a host). */
double mlc_test_now(void);
/* Sleep for ms milliseconds. */
void mlc_test_sleep_ms(int ms);
/* Whether process pid has ended: gone, or a zombie its parent has not reaped. */
bool mlc_test_process_ended(int pid);
#endif
