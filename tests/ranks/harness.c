/* SPDX-License-Identifier: BSD-3-Clause */
#include "harness.h"
#include <pthread.h>
#include <time.h>
#include "core/backend.h"
#include "core/comm.h"
#include "algos/sched.h"

#define GUARD_BYTES 64
#define GUARD_FILL 0xA5
#define FRESH_FILL 0xCD

typedef struct thread_arg {
    mlc_comm_t *comm;
    mlc_test_body_t body;
    int result;
} thread_arg_t;

/* Run the body; on failure abort the communicator so peers stop waiting. */
static int run_body(mlc_comm_t *comm, mlc_test_body_t body)
{
    int rc = body(comm);
    if (rc != 0 && rc != MLC_TEST_SKIP) {
        fprintf(stderr, "[rank %d] FAILED; aborting its communicator\n", mlc_comm_rank(comm));
        mlc_comm_abort(comm);
    }
    return rc;
}

static void *run_rank(void *p)
{
    thread_arg_t *a = p;
    a->result = run_body(a->comm, a->body);
    return NULL;
}

int mlc_test_any_failed(mlc_comm_t *comm, int failed)
{
    int32_t mine = failed ? 1 : 0, any = 1;
    if (mlc_comm_status(comm) != MLC_SUCCESS) return 1;
    if (mlc_allreduce(&mine, &any, 1, MLC_INT32, MLC_MAX, comm, NULL) != MLC_SUCCESS) return 1;
    return any != 0;
}

static int run_threads(int n, mlc_test_body_t body)
{
    mlc_comm_t **comms = calloc((size_t)n, sizeof *comms);
    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    thread_arg_t *args = calloc((size_t)n, sizeof *args);
    int rc = 0;
    if (!comms || !tids || !args) return 2;
    mlc_status_t st = mlc_comm_init_all(n, NULL, comms);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init_all(%d): %s: %s\n", n, mlc_status_name(st), mlc_last_error());
        return 2;
    }
    for (int i = 0; i < n; i++) {
        args[i] = (thread_arg_t){comms[i], body, 0};
        if (pthread_create(&tids[i], NULL, run_rank, &args[i]) != 0) {
            fprintf(stderr, "pthread_create failed for rank %d\n", i);
            return 2;
        }
    }
    for (int i = 0; i < n; i++) {
        pthread_join(tids[i], NULL);
        if (args[i].result == MLC_TEST_SKIP && rc == 0) rc = MLC_TEST_SKIP;
        else if (args[i].result != 0 && args[i].result != MLC_TEST_SKIP) rc = 1;
    }
    for (int i = 0; i < n; i++) mlc_comm_free(comms[i]);
    free(comms);
    free(tids);
    free(args);
    return rc;
}

int mlc_test_main(int argc, char **argv, mlc_test_body_t body)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            int n = atoi(argv[i + 1]);
            if (n < 1) {
                fprintf(stderr, "--threads needs a positive count\n");
                return 2;
            }
            return run_threads(n, body);
        }
    }
    mlc_comm_t *comm = NULL;
    mlc_status_t st = mlc_comm_init(NULL, &comm);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "mlc_comm_init: %s: %s\n", mlc_status_name(st), mlc_last_error());
        return 2;
    }
    int rc = run_body(comm, body);
    mlc_comm_free(comm);
    return rc;
}

/* ---- data helpers ------------------------------------------------------- */

uint64_t mlc_test_hash(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The pattern is generated a 64-bit word at a time (fast for large buffers). */
static uint64_t pattern_word(uint64_t seed, size_t word)
{
    return mlc_test_mix(seed * 0x2545f4914f6cdd1dull + word);
}

unsigned char mlc_test_pattern_byte(uint64_t seed, size_t off)
{
    uint64_t w = pattern_word(seed, off / 8);
    return (unsigned char)(w >> (8 * (off % 8)));
}

void mlc_test_pattern_fill(void *buf, size_t bytes, uint64_t seed)
{
    unsigned char *p = buf;
    size_t words = bytes / 8;
    for (size_t w = 0; w < words; w++) {
        uint64_t v = pattern_word(seed, w);
        for (int b = 0; b < 8; b++) p[w * 8 + (size_t)b] = (unsigned char)(v >> (8 * b));
    }
    for (size_t off = words * 8; off < bytes; off++) p[off] = mlc_test_pattern_byte(seed, off);
}

size_t mlc_test_pattern_check(const void *buf, size_t bytes, uint64_t seed)
{
    const unsigned char *p = buf;
    size_t words = bytes / 8;
    for (size_t w = 0; w < words; w++) {
        uint64_t v = pattern_word(seed, w);
        for (int b = 0; b < 8; b++)
            if (p[w * 8 + (size_t)b] != (unsigned char)(v >> (8 * b))) return w * 8 + (size_t)b;
    }
    for (size_t off = words * 8; off < bytes; off++)
        if (p[off] != mlc_test_pattern_byte(seed, off)) return off;
    return SIZE_MAX;
}

static void hex_of(const unsigned char *p, size_t n, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used + 3 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%02x", p[i]);
}

int mlc_test_memdiff(const void *got, const void *want, size_t bytes, size_t esize, char *where,
                     size_t where_len)
{
    const unsigned char *g = got, *w = want;
    if (esize == 0) esize = 1;
    if (bytes == 0 || memcmp(got, want, bytes) == 0) return 0;
    size_t first = SIZE_MAX, ndiff = 0;
    for (size_t e = 0; e < bytes / esize; e++) {
        if (memcmp(g + e * esize, w + e * esize, esize) != 0) {
            if (first == SIZE_MAX) first = e;
            ndiff++;
        }
    }
    if (first == SIZE_MAX) { /* a trailing partial element differs */
        first = bytes / esize;
        ndiff = 1;
    }
    size_t n = esize;
    if (first * esize + n > bytes) n = bytes - first * esize;
    if (n > 16) n = 16;
    char gh[40], wh[40];
    hex_of(g + first * esize, n, gh, sizeof gh);
    hex_of(w + first * esize, n, wh, sizeof wh);
    snprintf(where, where_len, "element %zu (byte %zu) is 0x%s, expected 0x%s (%zu of %zu elements differ)",
             first, first * esize, gh, wh, ndiff, bytes / esize);
    return 1;
}

int mlc_test_same_on_all_ranks(mlc_comm_t *comm, const void *buf, size_t bytes, const char *what)
{
    int p = mlc_comm_size(comm), me = mlc_comm_rank(comm);
    uint64_t mine = mlc_test_hash(buf, bytes);
    uint64_t *all = calloc((size_t)p, sizeof *all);
    if (!all) return 1;
    mlc_status_t st = mlc_allgather(&mine, all, 1, MLC_UINT64, comm, NULL);
    if (st != MLC_SUCCESS) {
        fprintf(stderr, "[rank %d] %s: allgather of result hashes -> %s: %s\n", me, what,
                mlc_status_name(st), mlc_last_error());
        free(all);
        return 1;
    }
    int bad = 0;
    for (int r = 0; r < p; r++) {
        if (all[r] != all[0]) {
            if (me == 0)
                fprintf(stderr, "[rank 0] %s: rank %d's result differs from rank 0's "
                        "(hash %016llx vs %016llx)\n", what, r, (unsigned long long)all[r],
                        (unsigned long long)all[0]);
            bad = 1;
        }
    }
    free(all);
    return bad;
}

void *mlc_test_alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + GUARD_BYTES);
    if (!p) {
        fprintf(stderr, "mlc_test_alloc(%zu): out of memory\n", bytes);
        abort();
    }
    memset(p, FRESH_FILL, bytes);
    memset(p + bytes, GUARD_FILL, GUARD_BYTES);
    return p;
}

int mlc_test_guard_ok(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (p[bytes + i] != GUARD_FILL) return 0;
    return 1;
}

void mlc_test_free(void *buf) { free(buf); }

size_t mlc_test_algos(mlc_comm_t *comm, mlc_coll_t coll, const char **names, size_t max)
{
    if (!comm || !comm->be || !comm->be->algos) return 0;
    const char *const *list = comm->be->algos(coll);
    size_t n = 0;
    for (; list && list[n] && n < max; n++) names[n] = list[n];
    return n;
}

int mlc_test_algo_order_preserving(mlc_coll_t coll, const char *name)
{
    const mlc_algo_t *a = mlc_algo_find(coll, name);
    return a != NULL && a->order_preserving;
}

double mlc_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mlc_test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

bool mlc_test_process_ended(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the state follows the command name */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}
