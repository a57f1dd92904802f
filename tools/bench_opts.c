/* SPDX-License-Identifier: BSD-3-Clause */
/* mlcomm-bench's command line (nccl-tests' flags, plus -a and -t). */
#include "bench_opts.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/config.h"

#define PROG "mlcomm-bench"

/* X(short, long, value name, help) in --help order. */
#define MLC_BENCH_OPTION_LIST(X)                                                             \
    X('b', "minbytes", "SIZE", "smallest size, K/M/G suffixes (default 32M)")                \
    X('e', "maxbytes", "SIZE", "largest size (default 32M)")                                 \
    X('f', "stepfactor", "N", "multiply the size by N each step (default 1: use -i)")        \
    X('i', "stepbytes", "SIZE", "add SIZE each step when -f is 1 (default 1M)")              \
    X('n', "iters", "N", "timed iterations per size (default 20)")                           \
    X('w', "warmup_iters", "N", "warm-up iterations at the largest and smallest size (default 5)") \
    X('c', "check", "0|1", "verify every result (default 1)")                                \
    X('P', "percentiles", "0|1", "also time each call alone: p50 and p99 columns (default 0)") \
    X('d', "datatype", "TYPE", "int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64 (default float32)") \
    X('o', "op", "OP", "sum prod max min avg (default sum)")                                 \
    X('r', "root", "N", "root of broadcast, reduce, gather and scatter (default 0)")                          \
    X('a', "algo", "NAME", "force an algorithm (mlc_comm_set_algo); 'all': every algorithm, one row each") \
    X('t', "threads", "N", "run N ranks as threads of this process (threads backend)")      \
    X('M', "memory", "KIND", "host, shared or device: where the buffers live (default host; see below)") \
    X('h', "help", "", "this text")

static void usage(FILE *out)
{
    fprintf(out, "usage: " PROG " [options] COLLECTIVE\n"
                 "       " PROG " --model [--alpha US] [--beta GB/S] [--gamma GB/S] [--measure] [COLL...]\n"
                 "       " PROG " --version\n\nCollectives:");
    for (int i = 0; mlc_bench_colls[i]; i++) fprintf(out, " %s", mlc_bench_colls[i]->name);
    fprintf(out, "\n\nOptions:\n");
#define MLC_X_HELP(s, l, v, h) fprintf(out, "  -%c, --%-13s %-5s %s\n", s, l, v, h);
    MLC_BENCH_OPTION_LIST(MLC_X_HELP)
#undef MLC_X_HELP
    fprintf(out,
            "\n"
            "The cost model (no collective is run; " PROG " --model --help for more):\n"
            "  --model             print the selector's cost model: predicted time of every\n"
            "                      algorithm and the switch points for 2..16384 ranks\n"
            "  --alpha US          latency per message in microseconds\n"
            "  --beta GB/S         bandwidth between ranks\n"
            "  --gamma GB/S        local reduction bandwidth (float32 sum)\n"
            "  --measure           measure alpha, beta and gamma on this job (2+ ranks:\n"
            "                      mlcomm-run -n 2 " PROG " --model --measure)\n"
            "  --version           the version and the backends compiled in\n"
            "\n"
            "Without -t, each process is one rank of the job its environment describes\n"
            "(mlcomm-run -n N " PROG " ..., mpirun, torchrun, or a one-rank job).\n"
            "\n"
            "Conventions are nccl-tests': for a size of S bytes of E-byte elements, c = S/E;\n"
            "  allreduce, broadcast, reduce, sendrecv: count c on every rank;\n"
            "  allgather: c/p per rank, the receive buffer holds (c/p)*p;\n"
            "  reduce_scatter: the send buffer holds (c/p)*p, each rank receives c/p;\n"
            "  alltoall, alltoallv: c/p per pair, both buffers hold (c/p)*p (alltoallv:\n"
            "    the same counts, through the v-interface);\n"
            "  gather: c/p per rank, the root's receive buffer holds (c/p)*p;\n"
            "  scatter: the root's send buffer holds (c/p)*p, each rank receives c/p;\n"
            "  barrier: no data (sizes are ignored: use -b 0 -e 0).\n"
            "'size' is the larger buffer in bytes, 'count' the count argument. Time is the\n"
            "slowest rank's average per iteration; algbw = bytes/time (allgather,\n"
            "reduce_scatter, alltoall(v), gather, scatter: the full (c/p)*p buffer);\n"
            "busbw = algbw x 2(p-1)/p (allreduce), (p-1)/p (allgather, reduce_scatter,\n"
            "alltoall(v), gather, scatter), 1 (broadcast, reduce, sendrecv: each rank\n"
            "sends to rank+1 and receives from rank-1).\n"
            "Each iteration uses a different offset in buffers sized for the largest size\n"
            "so caches do not flatter small sizes; checks use fresh, exactly representable\n"
            "data per size. In place uses NCCL's in-place forms (sendrecv has none; nor\n"
            "are gather, scatter, alltoallv and barrier measured in place: N/A);\n"
            "'unsupp' marks a size the forced algorithm cannot run.\n"
            "\n"
            "-M shared: both buffers are blocks of mlc_mem_alloc, which other processes\n"
            "on this host map and read in place (the shm backend's large collectives).\n"
            "-M device: both buffers are device memory of the GPU runtime mlcomm loads\n"
            "(MLC_CUDART_LIB / MLC_HIPRT_LIB override it), one device per rank (local\n"
            "rank mod device count, set before mlc_comm_init); inputs are copied in and\n"
            "results copied out for the checks, outside the timed loop. MLC_MEMORY must\n"
            "be cuda, rocm or auto (unset: set to cuda for this process) so that the host\n"
            "backends take device pointers; with MLC_BACKEND=nccl they go to NCCL as they\n"
            "are. No runtime or no device: exit 3 with the reason.\n"
            "Exit status: 0 all correct, 1 a result was wrong, 2 usage, 3 a call failed.\n");
}

static bool parse_int_arg(const char *name, const char *v, long long lo, long long hi, int *out)
{
    long long x;
    if (!mlc_parse_int(v, lo, hi, &x)) {
        fprintf(stderr, PROG ": --%s: '%s' is not an integer in %lld..%lld\n", name, v, lo, hi);
        return false;
    }
    *out = (int)x;
    return true;
}

static bool parse_size_arg(const char *name, const char *v, size_t *out)
{
    if (!mlc_parse_size(v, out) || *out > ((size_t)1 << 40)) {
        fprintf(stderr, PROG ": --%s: '%s' is not a size (bytes, K/M/G suffix, at most 1T)\n",
                name, v);
        return false;
    }
    return true;
}

/* Apply option `s` with value v. */
static bool apply(mlc_bench_opts_t *o, char s, const char *longname, const char *v)
{
    int n;
    switch (s) {
    case 'b': return parse_size_arg(longname, v, &o->min_bytes);
    case 'e': return parse_size_arg(longname, v, &o->max_bytes);
    case 'i': return parse_size_arg(longname, v, &o->step_bytes);
    case 'f':
        if (!parse_int_arg(longname, v, 1, 1 << 20, &n)) return false;
        o->step_factor = (size_t)n;
        return true;
    case 'n': return parse_int_arg(longname, v, 1, INT32_MAX, &o->iters);
    case 'w': return parse_int_arg(longname, v, 0, INT32_MAX, &o->warmup);
    case 'c': return parse_int_arg(longname, v, 0, 1, &o->check);
    case 'P': return parse_int_arg(longname, v, 0, 1, &o->percentiles);
    case 'r': return parse_int_arg(longname, v, 0, INT32_MAX, &o->root);
    case 't': return parse_int_arg(longname, v, 1, 4096, &o->threads);
    case 'M':
        if (!mlc_bench_memory_from_name(v, &o->memory)) {
            fprintf(stderr, PROG ": --memory: '%s' is not one of %s\n", v, mlc_bench_memory_names());
            return false;
        }
        return true;
    case 'a':
        o->algo = strcmp(v, "auto") == 0 ? NULL : v;
        return true;
    case 'd':
        if (mlc_dtype_from_name(v, &o->dtype) != MLC_SUCCESS || mlc_bench_dtype_size(o->dtype) == 0) {
            fprintf(stderr, PROG ": --datatype: unknown type '%s'\n", v);
            return false;
        }
        return true;
    case 'o':
        if (mlc_op_from_name(v, &o->op) != MLC_SUCCESS) {
            fprintf(stderr, PROG ": --op: unknown op '%s' (sum prod max min avg)\n", v);
            return false;
        }
        return true;
    default:
        return false;
    }
}

/* Find an option by "-x" or "--long"; sets *inline_value for "-xV" / "--long=V". */
static bool lookup(const char *arg, char *s, const char **longname, const char **inline_value)
{
    static const struct {
        char s;
        const char *l;
    } table[] = {
#define MLC_X_ENTRY(s, l, v, h) {s, l},
        MLC_BENCH_OPTION_LIST(MLC_X_ENTRY)
#undef MLC_X_ENTRY
    };
    *inline_value = NULL;
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        if (arg[1] == '-') {
            size_t len = strlen(table[k].l);
            if (strncmp(arg + 2, table[k].l, len) != 0) continue;
            if (arg[2 + len] == '=') *inline_value = arg + 3 + len;
            else if (arg[2 + len] != '\0') continue;
        } else {
            if (arg[1] != table[k].s) continue;
            if (arg[2] != '\0') *inline_value = arg + 2;
        }
        *s = table[k].s;
        *longname = table[k].l;
        return true;
    }
    return false;
}

int mlc_bench_parse(int argc, char **argv, mlc_bench_opts_t *o)
{
    *o = (mlc_bench_opts_t){.min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
                            .step_factor = 1, .iters = 20, .warmup = 5, .check = 1,
                            .dtype = MLC_FLOAT32, .op = MLC_SUM};
    const char *coll = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (coll) {
                fprintf(stderr, PROG ": one collective at a time ('%s' and '%s')\n", coll, a);
                return -1;
            }
            coll = a;
            continue;
        }
        char s;
        const char *longname, *v;
        if (!lookup(a, &s, &longname, &v)) {
            fprintf(stderr, PROG ": unknown option '%s' (see " PROG " --help)\n", a);
            return -1;
        }
        if (s == 'h') {
            usage(stdout);
            return 1;
        }
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, PROG ": %s needs a value\n", a);
                return -1;
            }
            v = argv[++i];
        }
        if (!apply(o, s, longname, v)) return -1;
    }
    if (!coll) {
        fprintf(stderr, PROG ": which collective? (see " PROG " --help)\n");
        return -1;
    }
    o->coll = mlc_bench_coll_find(coll);
    if (!o->coll) {
        fprintf(stderr, PROG ": unknown collective '%s'; one of:", coll);
        for (int k = 0; mlc_bench_colls[k]; k++) fprintf(stderr, " %s", mlc_bench_colls[k]->name);
        fprintf(stderr, "\n");
        return -1;
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, PROG ": --minbytes %zu is larger than --maxbytes %zu\n", o->min_bytes,
                o->max_bytes);
        return -1;
    }
    if (o->step_factor == 1 && o->step_bytes == 0 && o->min_bytes < o->max_bytes) {
        fprintf(stderr, PROG ": --stepbytes 0 with --stepfactor 1 never reaches --maxbytes\n");
        return -1;
    }
    return 0;
}

bool mlc_bench_next_size(const mlc_bench_opts_t *o, size_t *size)
{
    size_t s = *size, next;
    if (o->step_factor > 1)
        next = s == 0 ? 1 : s > o->max_bytes / o->step_factor ? o->max_bytes + 1 : s * o->step_factor;
    else
        next = o->step_bytes == 0 || s > o->max_bytes - o->step_bytes ? o->max_bytes + 1
                                                                      : s + o->step_bytes;
    if (next > o->max_bytes) return false;
    *size = next;
    return true;
}
