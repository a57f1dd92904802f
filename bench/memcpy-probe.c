/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memcpy-probe: the memcpy bound of bench/vs-mpi.sh. P processes, each bound
 * like a rank of the benchmarks (--bind core: process r on cpu r mod ncpu),
 * each copy SIZE bytes between two buffers of their own, all at the same
 * time: a collective whose every rank must write SIZE bytes of result from
 * at least SIZE bytes of input cannot beat this. Per size: ITERS copies
 * (at least; more for small sizes with -B: enough copies to move BYTES)
 * after a shared start barrier, buffers freshly written with --seed's data,
 * the slowest process's average.
 *
 * --pass times instead the work one rank of a two-rank float32 sum allreduce
 * of SIZE bytes does on its own, with no peer and no waiting: the ceiling of
 * each design on this machine (docs/PERFORMANCE.md, "The memcpy bound"):
 *   copy    memcpy (the default; the bound itself)
 *   staged  the staged allreduce of two ranks: every 64 KiB chunk of the send
 *           buffer is copied into a 256 KiB ring (its stage), then two chunks
 *           of the ring (its own and, here, a stand-in for the peer's) are
 *           summed into the receive buffer
 *   halves  reduce-scatter and allgather through the stages: a copy of half
 *           the send buffer into the ring; the other half summed with a ring
 *           chunk into the receive buffer and the ring; a copy of a ring chunk
 *           into the receive buffer's other half
 *   mapped  reading peers' buffers in place (shared blocks): half the result
 *           summed from two buffers, the other half copied
 * Every pass reads and writes only cache-sized rings beside the two buffers,
 * so what it costs beyond `copy` is work no data movement between
 * processes can remove.
 *
 * Output, one line per size ('#' lines are comments):
 *   PASS SIZE ITERS TIME_US GBPS        (GBPS = SIZE / TIME_US)
 *
 * Usage: memcpy-probe [-p P] [-n ITERS] [-B BYTES] [-S SEED] [--bind core|none]
 *                     [--pass copy|staged|halves|mapped] SIZE...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 64
#define CHUNK ((size_t)64 << 10) /* the engine's stage chunk (ENG_STAGE_CHUNK) */
#define RING_CHUNKS 4            /* and its depth */

enum { PASS_COPY, PASS_STAGED, PASS_HALVES, PASS_MAPPED };
static const char *const pass_names[] = {"copy", "staged", "halves", "mapped"};

typedef struct shared {
    pthread_barrier_t start, done;
    double time_s[]; /* per process, of the current size */
} shared_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill(unsigned char *buf, size_t n, unsigned long long seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        x ^= x >> 29;
        memcpy(buf + 8 * i, &x, 8);
    }
    memset(buf + 8 * words, (int)(x & 0xff), n - 8 * words);
}

/* The sums are written in 8-float vectors so that -O2 vectorizes them, as
 * the library's reduction kernels are (AVX2 where the cpu has it). */
typedef float v8f __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FASTEST __attribute__((target_clones("avx2", "default")))
#else
#define FASTEST
#endif

/* *x = a[i..i+7] + b[i..i+7] (through a pointer: returning a 32-byte vector
 * changes the ABI in the non-AVX clone) */
static inline void add8(const float *a, const float *b, size_t i, v8f *x)
{
    v8f y;
    memcpy(x, a + i, sizeof *x);
    memcpy(&y, b + i, sizeof y);
    *x += y;
}

/* n: a multiple of 8 (a chunk's floats) */
FASTEST static void sum(const float *a, const float *b, float *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        v8f x;
        add8(a, b, i, &x);
        memcpy(out + i, &x, sizeof x);
    }
}

/* The same, stored twice (to the receive buffer and to the stage). */
FASTEST static void sum2(const float *a, const float *b, float *out, float *out2, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        v8f x;
        add8(a, b, i, &x);
        memcpy(out + i, &x, sizeof x);
        memcpy(out2 + i, &x, sizeof x);
    }
}

static float *ring_at(float *ring, size_t c) { return ring + (c % RING_CHUNKS) * (CHUNK / sizeof(float)); }

/* One pass of `pass` over n bytes (whole chunks; a tail is copied). */
static void run_pass(int pass, unsigned char *dst, const unsigned char *src, float *ring, size_t n)
{
    size_t chunks = n / CHUNK, half = chunks / 2, tail = n - chunks * CHUNK, cf = CHUNK / sizeof(float);
    switch (pass) {
    case PASS_COPY: memcpy(dst, src, n); return;
    case PASS_STAGED:
        for (size_t c = 0; c < chunks; c++) {
            memcpy(ring_at(ring, c), src + c * CHUNK, CHUNK);
            sum(ring_at(ring, c), ring_at(ring, c + 1), (float *)(dst + c * CHUNK), cf);
        }
        break;
    case PASS_HALVES:
        for (size_t c = 0; c < half; c++) {
            memcpy(ring_at(ring, c), src + c * CHUNK, CHUNK);
            sum2((const float *)(src + (half + c) * CHUNK), ring_at(ring, c + 1),
                 (float *)(dst + (half + c) * CHUNK), ring_at(ring, c + 2), cf);
            memcpy(dst + c * CHUNK, ring_at(ring, c + 3), CHUNK);
        }
        break;
    case PASS_MAPPED:
        for (size_t c = 0; c < half; c++) {
            sum((const float *)(src + c * CHUNK), (const float *)(src + (half + c) * CHUNK),
                (float *)(dst + c * CHUNK), cf);
            memcpy(dst + (half + c) * CHUNK, src + c * CHUNK, CHUNK);
        }
        break;
    }
    size_t done = pass == PASS_STAGED ? chunks * CHUNK : 2 * half * CHUNK;
    memcpy(dst + done, src + done, tail + (chunks * CHUNK - done));
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end != '\0' || v == 0 || v > (1ull << 34) >> shift) return -1;
    *out = (size_t)v << shift;
    return 0;
}

/* One process: copy each size ITERS times between the shared barriers. A
 * process that cannot set up still keeps step with the barriers (its time
 * is -1) so that nobody waits forever. */
static int copier(shared_t *sh, int me, const size_t *sizes, int nsizes, const long *iters,
                  unsigned long long seed, int bind, int pass)
{
    int ok = 1;
    if (bind) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(me % (ncpu > 0 ? ncpu : 1), &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            fprintf(stderr, "memcpy-probe: process %d: sched_setaffinity: %s\n", me, strerror(errno));
            ok = 0;
        }
    }
    size_t max = 0;
    for (int k = 0; k < nsizes; k++) max = sizes[k] > max ? sizes[k] : max;
    unsigned char *src = malloc(max), *dst = malloc(max);
    float *ring = aligned_alloc(64, RING_CHUNKS * CHUNK);
    if (!src || !dst || !ring) {
        fprintf(stderr, "memcpy-probe: process %d: cannot allocate 2 x %zu bytes\n", me, max);
        ok = 0;
    }
    if (ok) fill(dst, max, seed + 7919u * (unsigned)me + 1);
    if (ok) fill((unsigned char *)ring, RING_CHUNKS * CHUNK, seed + 3u);
    for (int k = 0; k < nsizes; k++) {
        if (ok) {
            fill(src, sizes[k], seed + 7919u * (unsigned)me + (unsigned)k);
            run_pass(pass, dst, src, ring, sizes[k]); /* warm-up */
        }
        pthread_barrier_wait(&sh->start);
        double t0 = now();
        for (long it = 0; ok && it < iters[k]; it++) {
            run_pass(pass, dst, src, ring, sizes[k]);
            /* keep the copies from being optimised away or merged */
            __asm__ volatile("" : : "r"(dst) : "memory");
        }
        sh->time_s[me] = ok ? (now() - t0) / (double)iters[k] : -1;
        pthread_barrier_wait(&sh->done);
        pthread_barrier_wait(&sh->start); /* the parent has read the times */
    }
    free(src);
    free(dst);
    free(ring);
    return !ok;
}

static void usage(void)
{
    fprintf(stderr, "usage: memcpy-probe [-p P] [-n ITERS] [-B BYTES] [-S SEED] [--bind core|none]\n"
                    "                    [--pass copy|staged|halves|mapped] SIZE...\n");
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES];
    int nsizes = 0, p = 2, bind = 1, pass = PASS_COPY;
    long iters = 10;
    size_t min_bytes = 0;
    long per_size[MAX_SIZES];
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) {
            p = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            iters = atol(argv[++i]);
        } else if (strcmp(argv[i], "-B") == 0 && i + 1 < argc) {
            if (parse_size(argv[++i], &min_bytes) != 0) {
                usage();
                return 2;
            }
        } else if (strcmp(argv[i], "-S") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--bind") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "core") != 0 && strcmp(v, "none") != 0) {
                usage();
                return 2;
            }
            bind = strcmp(v, "core") == 0;
        } else if (strcmp(argv[i], "--pass") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            for (pass = 0; pass <= PASS_MAPPED && strcmp(v, pass_names[pass]) != 0; pass++) continue;
            if (pass > PASS_MAPPED) {
                usage();
                return 2;
            }
        } else if (nsizes < MAX_SIZES && parse_size(argv[i], &sizes[nsizes]) == 0) {
            nsizes++;
        } else {
            fprintf(stderr, "memcpy-probe: bad argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (nsizes == 0 || p < 1 || p > 1024 || iters < 1) {
        usage();
        return 2;
    }
    for (int k = 0; k < nsizes; k++) {
        size_t want = min_bytes / sizes[k];
        per_size[k] = want > (size_t)iters ? (long)(want < 100000 ? want : 100000) : iters;
    }
    size_t shbytes = sizeof(shared_t) + (size_t)p * sizeof(double);
    shared_t *sh = mmap(NULL, shbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("memcpy-probe: mmap");
        return 1;
    }
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    /* the parent joins both barriers so it can read each size's times */
    pthread_barrier_init(&sh->start, &attr, (unsigned)p + 1);
    pthread_barrier_init(&sh->done, &attr, (unsigned)p + 1);
    printf("# memcpy-probe: %d processes at once, pass %s, bind %s, at least %ld iterations, seed %llu\n", p,
           pass_names[pass], bind ? "core" : "none", iters, seed);
    fflush(stdout);
    pid_t *pids = calloc((size_t)p, sizeof *pids);
    for (int r = 0; r < p; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(copier(sh, r, sizes, nsizes, per_size, seed, bind, pass));
        if (pids[r] < 0) {
            perror("memcpy-probe: fork");
            /* the started ones wait at a barrier that never fills: end them */
            for (int k = 0; k < r; k++) kill(pids[k], SIGKILL);
            return 1;
        }
    }
    for (int k = 0; k < nsizes; k++) {
        pthread_barrier_wait(&sh->start);
        pthread_barrier_wait(&sh->done);
        double worst = 0;
        int failed = 0;
        for (int r = 0; r < p; r++) {
            failed |= sh->time_s[r] < 0;
            worst = sh->time_s[r] > worst ? sh->time_s[r] : worst;
        }
        if (failed) {
            pthread_barrier_wait(&sh->start);
            continue;
        }
        printf("%s %zu %ld %.3f %.4f\n", pass == PASS_COPY ? "memcpy" : pass_names[pass], sizes[k], per_size[k],
               worst * 1e6, worst > 0 ? (double)sizes[k] / worst / 1e9 : 0);
        fflush(stdout);
        pthread_barrier_wait(&sh->start);
    }
    int bad = 0;
    for (int r = 0; r < p; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    free(pids);
    return bad;
}
