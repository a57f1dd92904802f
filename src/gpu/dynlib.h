/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening a vendor library at run time (dlopen) and resolving its symbols
 * into a table of function pointers, driven by one declarative list per
 * library. mlcomm never links CUDA, HIP, NCCL or RCCL: a machine without
 * them builds and runs, and the reason a library is unusable is kept as
 * text (which file, which symbol, dlerror) for errors and mlcomm-info.
 */
#ifndef MLC_GPU_DYNLIB_H
#define MLC_GPU_DYNLIB_H
#include <stdbool.h>
#include <stddef.h>
#include "config.h" /* mlc_env_id_t */
#include "mlcomm.h"

/* One symbol of a list: its name, where its address goes in the table. */
typedef struct mlc_dynsym {
    const char *name;
    size_t offset;  /* offsetof(table type, field) */
    bool required;  /* missing required symbol = library unusable */
} mlc_dynsym_t;

typedef struct mlc_dynlib {
    void *handle;
    char path[512]; /* file actually opened (from dladdr), else the name given to dlopen */
    char name[256]; /* the candidate or override that opened */
} mlc_dynlib_t;

/*
 * Open `what` (e.g. "CUDA runtime"): the path in environment variable
 * `env_var` (a config table row, MLC_ENV_COUNT = none) when set and non-empty, otherwise the first of `candidates`
 * (NULL-terminated sonames) that dlopen accepts. Resolve `syms` into `table`
 * (fields of missing optional symbols stay NULL). On failure: `lib` and
 * `table` are untouched, `why` names the file, the symbol and dlerror, and
 * MLC_ERR_UNAVAILABLE is returned (no thread error is set: callers decide).
 */
mlc_status_t mlc_dynlib_open(const char *what, mlc_env_id_t env_var, const char *const *candidates,
                             const mlc_dynsym_t *syms, size_t nsyms, void *table, size_t table_size,
                             mlc_dynlib_t *lib, char *why, size_t why_len);

/* dlclose (tests and error unwinding; loaded runtimes stay open for the process). */
void mlc_dynlib_close(mlc_dynlib_t *lib);

/* Every X(symbol, ...) of a list becomes one mlc_dynsym_t; see gpurt.c for use. */
#define MLC_DYNSYM_REQUIRED true
#define MLC_DYNSYM_OPTIONAL false
#endif
