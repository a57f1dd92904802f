/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the raw-library peers of the benchmarks (mpi-bench.c, nccl-bench.c)
 * share: the collectives, size segments and their parsing, nccl-tests'
 * geometry, bus-bandwidth factors, fill data and buffer rotation. Each
 * peer is one C file built with its library's compiler; this header keeps
 * them measuring exactly alike.
 */
#ifndef MLC_BENCH_PEER_COMMON_H
#define MLC_BENCH_PEER_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 64

/* X(name): the collectives compared */
#define COLL_LIST(X)   \
    X(allreduce)       \
    X(allgather)       \
    X(reduce_scatter)  \
    X(broadcast)       \
    X(alltoall)

typedef enum coll {
#define X_ENUM(n) COLL_##n,
    COLL_LIST(X_ENUM)
#undef X_ENUM
    COLL_COUNT
} coll_t;

static const char *const coll_names[] = {
#define X_NAME(n) #n,
    COLL_LIST(X_NAME)
#undef X_NAME
};

typedef struct segment {
    size_t min, max, factor;
    long iters;
} segment_t;

typedef struct geom {
    size_t count;      /* the count argument */
    size_t send_elems; /* elements of the send buffer */
    size_t recv_elems;
    size_t size_bytes; /* the larger buffer */
} geom_t;

static inline geom_t geometry(coll_t c, size_t bytes, int p)
{
    size_t elems = bytes / sizeof(float), n = elems / (size_t)p;
    geom_t g;
    switch (c) {
    case COLL_allgather:
        g = (geom_t){n, n, n * (size_t)p, 0};
        break;
    case COLL_reduce_scatter:
        g = (geom_t){n, n * (size_t)p, n, 0};
        break;
    case COLL_alltoall:
        g = (geom_t){n, n * (size_t)p, n * (size_t)p, 0};
        break;
    default:
        g = (geom_t){elems, elems, elems, 0};
        break;
    }
    g.size_bytes = (g.send_elems > g.recv_elems ? g.send_elems : g.recv_elems) * sizeof(float);
    return g;
}

static inline double busbw_factor(coll_t c, int p)
{
    switch (c) {
    case COLL_allreduce: return 2.0 * (p - 1) / p;
    case COLL_allgather:
    case COLL_reduce_scatter:
    case COLL_alltoall: return (double)(p - 1) / p;
    default: return 1.0;
    }
}

/* The largest size of the segment's sweep. */
static inline size_t last_size(const segment_t *s)
{
    size_t x = s->min;
    while (s->factor > 1 && x <= s->max / s->factor) x *= s->factor;
    return x;
}

static inline int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end != '\0' && *end != ':') return -1;
    *out = (size_t)v << shift;
    return (int)(end - s);
}

static inline int parse_segment(const char *arg, segment_t *s)
{
    size_t f = 0;
    long it = 0;
    int n = parse_size(arg, &s->min);
    if (n < 0 || arg[n] != ':') return -1;
    arg += n + 1;
    n = parse_size(arg, &s->max);
    if (n < 0 || arg[n] != ':') return -1;
    arg += n + 1;
    char *end;
    f = strtoul(arg, &end, 10);
    if (end == arg || *end != ':') return -1;
    it = strtol(end + 1, &end, 10);
    if (*end != '\0' || it < 1 || f < 1 || s->min > s->max || s->max > ((size_t)1 << 34)) return -1;
    s->factor = f;
    s->iters = it;
    return 0;
}

/* Small integers (exact in float32 sums over any rank count we run), new per seed. */
static inline void peer_fill(float *buf, size_t n, unsigned long long seed, int rank)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank * 0xBF58476D1CE4E5B9ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        x ^= x >> 29;
        buf[i] = (float)((int)(x % 64) - 32);
    }
}

/* Offset (elements) of iteration it: walk through the buffers one size at a time. */
static inline size_t peer_shift(size_t buf_elems, const geom_t *g, long it)
{
    size_t elems = g->size_bytes / sizeof(float);
    if (elems == 0) return 0;
    return elems * ((size_t)it % (buf_elems / elems));
}

static inline int parse_colls(char *list, int *selected, const char *prog)
{
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int c = 0; c < COLL_COUNT; c++)
            if (strcmp(tok, coll_names[c]) == 0) selected[c] = found = 1;
        if (!found) {
            fprintf(stderr, "%s: unknown collective '%s'\n", prog, tok);
            return -1;
        }
    }
    return 0;
}

/* Per-call times (-P) sort with this; their percentiles: percentile.h. */
static inline int peer_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

#endif
