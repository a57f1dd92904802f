/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlcomm-info: what this build of mlcomm can do here.
 *
 *   mlcomm-info [--backends] [--env] [--algos] [--gpu] | --version
 *
 * Prints the version, every backend with whether it is available (and why
 * not), every environment variable with its current value, default and
 * help, and the algorithms of every collective. With section flags, only
 * those sections.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos/sched.h"
#include "core/backend.h"
#include "base/config.h"
#include "base/host.h"
#include "info_gpu.h"
#include "tool_version.h"

/* X(flag, title, printer) in printing order. */
#define MLC_INFO_SECTIONS(X)                              \
    X(backends, "Backends", print_backends)               \
    X(env, "Environment variables", print_env)            \
    X(algos, "Algorithms", print_algos)                   \
    X(gpu, "GPU", print_gpu)

static int max_int(int a, int b) { return a > b ? a : b; }

static void print_backends(void)
{
    int w = 4;
    for (int i = 0; mlc_backends[i]; i++) w = max_int(w, (int)strlen(mlc_backends[i]->name));
    printf("  %-*s  %8s  %-9s  %s\n", w, "name", "priority", "available", "why not");
    for (int i = 0; mlc_backends[i]; i++) {
        const mlc_backend_t *b = mlc_backends[i];
        char why[256] = "";
        int ok = b->available ? b->available(why, sizeof why) : 1;
        if (ok)
            printf("  %-*s  %8d  yes\n", w, b->name, b->priority);
        else
            printf("  %-*s  %8d  no         %s\n", w, b->name, b->priority,
                   why[0] ? why : "(no reason given)");
    }
    /* What MLC_BACKEND (default auto) resolves to for this process. */
    mlc_cfg_t cfg;
    const mlc_backend_t *chosen;
    if (mlc_config_resolve(NULL, &cfg) != MLC_SUCCESS)
        printf("  this environment: invalid: %s\n", mlc_last_error());
    else if (mlc_backend_select(&cfg, &chosen) != MLC_SUCCESS)
        printf("  this environment (MLC_BACKEND=%s): no backend: %s\n", cfg.backend,
               mlc_last_error());
    else
        printf("  this environment (MLC_BACKEND=%s, %d rank%s): %s\n", cfg.backend,
               cfg.world_size, cfg.world_size == 1 ? "" : "s", chosen->name);
    if (cfg.rank_origin[0]) printf("  rank and size: %s\n", cfg.rank_origin);
    /* What mlc_comm_init_rank / _store compare to tell hosts apart (docs/DESIGN.md "Bootstrap"). */
    char host_id[256], host_name[64];
    mlc_host_identity(host_id, sizeof host_id, host_name, sizeof host_name);
    printf("  host identity (store bootstraps): %s%s\n", host_id,
           mlc_env_text(MLC_ENV_HOST_ID) ? " (MLC_HOST_ID)" : "");
}

static void print_env(void)
{
    int wn = 4, wv = 5, wd = 7;
    for (const mlc_env_var_t *v = mlc_env_vars; v->name; v++) {
        const char *cur = mlc_env_text((mlc_env_id_t)(v - mlc_env_vars));
        wn = max_int(wn, (int)strlen(v->name));
        wv = max_int(wv, cur ? (int)strlen(cur) : (int)strlen("(unset)"));
        wd = max_int(wd, (int)strlen(v->default_text[0] ? v->default_text : "-"));
    }
    /* Keep the help column readable when a value is long. */
    if (wv > 24) wv = 24;
    if (wd > 12) wd = 12;
    printf("  %-*s  %-*s  %-*s  %s\n", wn, "name", wv, "value", wd, "default", "meaning");
    for (const mlc_env_var_t *v = mlc_env_vars; v->name; v++) {
        const char *cur = mlc_env_text((mlc_env_id_t)(v - mlc_env_vars));
        printf("  %-*s  %-*s  %-*s  %s", wn, v->name, wv, cur ? cur : "(unset)", wd,
               v->default_text[0] ? v->default_text : "-", v->help);
        if (v->public_field || v->agree)
            printf(" [%s%s%s%s]", v->public_field ? "mlc_config_t." : "",
                   v->public_field ? v->public_field : "", v->public_field && v->agree ? "; " : "",
                   v->agree ? "same on every rank" : "");
        printf("\n");
    }
    printf("  [mlc_config_t.<field>]: the field overrides the variable; [same on every rank]: "
           "comm init fails naming it when ranks differ\n");
}

/* Per backend that runs algorithms (threads, shm): what MLC_ALGO_<COLL> accepts. */
static void print_algos(void)
{
    int w = 4;
    for (int c = 0; c < MLC_COLL_COUNT; c++) w = max_int(w, (int)strlen(mlc_coll_name(c)));
    for (int b = 0; mlc_backends[b]; b++) {
        const mlc_backend_t *be = mlc_backends[b];
        if (!be->algos) {
            printf("  %s: the library's own collectives (native)\n", be->name);
            continue;
        }
        printf("  %s:\n", be->name);
        for (int c = 0; c < MLC_COLL_COUNT; c++) {
            const char *const *list = be->algos(c);
            printf("    %-*s ", w, mlc_coll_name(c));
            if (!list || !list[0]) {
                printf(" %s\n", c < MLC_COLL_SEND ? "native" : "- (point-to-point)");
                continue;
            }
            for (; *list; list++) {
                const mlc_algo_t *a = mlc_algo_find(c, *list);
                printf(" %s%s", *list, a && !a->order_preserving ? "*" : "");
            }
            printf("\n");
        }
    }
    printf("  (* = commutative ops only; force one with MLC_ALGO_<COLLECTIVE>=name;\n"
           "   'direct' = the shared-memory engine's own slot / single-copy algorithm;\n"
           "   'native' = MPI's own collective, which mpi runs unless one is forced, but for large\n"
           "   reduce and reduce_scatter while it has a deadline: docs/MPI.md)\n");
}

/* GPUs, runtimes, NCCL/RCCL and GPU-direct capabilities (each with its evidence). */
static void print_gpu(void) { mlc_gpu_report(stdout); }

static void usage(FILE *out)
{
    fprintf(out, "usage: mlcomm-info [--backends] [--env] [--algos] [--gpu] | --version\n"
                 "Print the version, backends, environment variables and algorithms;\n"
                 "with flags, only the sections named.\n");
}

int main(int argc, char **argv)
{
    enum {
#define MLC_X_ENUM(flag, title, fn) SECTION_##flag,
        MLC_INFO_SECTIONS(MLC_X_ENUM)
#undef MLC_X_ENUM
        SECTION_COUNT
    };
    bool want[SECTION_COUNT] = {false};
    bool any = false;
    for (int i = 1; i < argc; i++) {
        bool known = false;
#define MLC_X_FLAG(flag, title, fn)                   \
    if (strcmp(argv[i], "--" #flag) == 0) {           \
        want[SECTION_##flag] = known = any = true;    \
    }
        MLC_INFO_SECTIONS(MLC_X_FLAG)
#undef MLC_X_FLAG
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            mlc_tool_print_version("mlcomm-info");
            return 0;
        }
        if (!known) {
            fprintf(stderr, "mlcomm-info: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!any) printf("mlcomm %s\n", mlc_version());
    int printed = 0;
#define MLC_X_PRINT(flag, title, fn)              \
    if (!any || want[SECTION_##flag]) {           \
        if (printed++ > 0 || !any) printf("\n"); \
        printf("%s:\n", title);                   \
        fn();                                     \
    }
    MLC_INFO_SECTIONS(MLC_X_PRINT)
#undef MLC_X_PRINT
    return 0;
}
