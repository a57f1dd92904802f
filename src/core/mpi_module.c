/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loading the MPI module (src/core/mpi_module.h), once per process; it is
 * never unloaded (MPI cannot be). Where it is looked for: next to the object
 * holding this code (libmlcomm.so, or the program when it links libmlcomm
 * statically), then in ../lib from there (a program in bin/), then the
 * loader's default path.
 */
#include "mpi_module.h"
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* mlcomm_mpi.h's values for an MPI that cannot convert a handle now. */
#define MLC_MPI_NOT_INITIALIZED INT64_MIN
#define MLC_MPI_FINALIZED (INT64_MIN + 1)

#ifndef MLC_MPI_MODULE_NAME
#define MLC_MPI_MODULE_NAME "libmlcomm-mpi.so"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const mlc_mpi_module_t *loaded; /* NULL when it could not be loaded */
static char load_why[768];

/* This core's functions, handed to the module. */
static const mlc_mpi_core_t core_table = MLC_MPI_CORE_INIT;

/* Append "path: reason" to the list of places tried. */
static void note_try(char *tried, size_t len, const char *what, const char *err)
{
    size_t used = strlen(tried);
    if (used + 1 >= len) return;
    snprintf(tried + used, len - used, "%s%.200s (%.200s)", used ? "; " : "", what, err ? err : "not loadable");
}

/* dlopen with RTLD_GLOBAL: Open MPI's own plugins resolve libmpi symbols globally. */
static void *open_at(const char *dir, const char *sub, char *tried, size_t len)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s%s/%s", dir, sub, MLC_MPI_MODULE_NAME);
    if (n < 0 || (size_t)n >= sizeof path) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *err = dlerror();
        /* A missing file is not worth reporting in full; a broken one is. */
        FILE *f = fopen(path, "r");
        if (f) {
            fclose(f);
            note_try(tried, len, path, err);
        }
    }
    return h;
}

static void *open_module(char *tried, size_t len)
{
    Dl_info info;
    if (dladdr((void *)&core_table, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        *strrchr(dir, '/') = '\0';
        void *h = open_at(dir, "", tried, len);
        if (!h) h = open_at(dir, "/../lib", tried, len);
        if (h) return h;
    }
    void *h = dlopen(MLC_MPI_MODULE_NAME, RTLD_NOW | RTLD_GLOBAL);
    if (!h) note_try(tried, len, MLC_MPI_MODULE_NAME " on the library path", dlerror());
    return h;
}

static void load(void)
{
    char tried[512] = "";
    void *h = open_module(tried, sizeof tried);
    if (!h) {
        snprintf(load_why, sizeof load_why,
                 "the MPI module %s could not be loaded: %s (mlcomm is built with MPI only when CMake "
                 "finds it)",
                 MLC_MPI_MODULE_NAME, tried);
        return;
    }
    mlc_mpi_entry_fn_t entry;
    *(void **)&entry = dlsym(h, MLC_MPI_ENTRY_SYMBOL);
    if (!entry) {
        snprintf(load_why, sizeof load_why, "%s lacks the symbol %s: not an mlcomm MPI module",
                 MLC_MPI_MODULE_NAME, MLC_MPI_ENTRY_SYMBOL);
        return;
    }
    char why[256] = "";
    const mlc_mpi_module_t *m = entry(&core_table, why, sizeof why);
    if (!m || m->abi != MLC_MPI_ABI || m->size != sizeof *m || !m->backend) {
        snprintf(load_why, sizeof load_why, "%s refused this libmlcomm: %s", MLC_MPI_MODULE_NAME,
                 m ? "it describes itself with another interface" : why);
        return;
    }
    /* The module is never unloaded and calls this core (its atexit handler
     * finalizes MPI), so this core must stay loaded as long: a program that
     * loaded libmlcomm with dlopen (a language runtime) may close it first. */
    Dl_info self;
    if (dladdr((void *)&core_table, &self) && self.dli_fname)
        (void)dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (mlc_backend_validate(m->backend) != MLC_SUCCESS) {
        snprintf(load_why, sizeof load_why, "%s: %s", MLC_MPI_MODULE_NAME, mlc_last_error());
        mlc_error_clear();
        return;
    }
    loaded = m;
}

const mlc_mpi_module_t *mlc_mpi_module(void)
{
    pthread_once(&load_once, load);
    if (!loaded) mlc_error(MLC_ERR_UNAVAILABLE, "backend 'mpi' is not available: %s", load_why);
    return loaded;
}

int mlc_mpi_module_available(char *why, size_t why_len)
{
    pthread_once(&load_once, load);
    if (!loaded && why && why_len) snprintf(why, why_len, "%s", load_why);
    return loaded != NULL;
}

/* ---- mlcomm_mpi.h ------------------------------------------------------------ */

MLC_API mlc_status_t mlc_comm_from_mpi_f(int64_t comm_f, const mlc_config_t *cfg, mlc_comm_t **out)
{
    mlc_error_clear();
    if (!out) return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: out is NULL");
    *out = NULL;
    if (comm_f == MLC_MPI_NOT_INITIALIZED || comm_f == MLC_MPI_FINALIZED)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: MPI is %s: the program calls MPI_Init "
                         "first (or uses mlc_comm_init with MLC_BACKEND=mpi)",
                         comm_f == MLC_MPI_FINALIZED ? "already finalized" : "not initialized");
    if (comm_f < INT32_MIN || comm_f > INT32_MAX)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_from_mpi: %lld is not a Fortran communicator handle",
                         (long long)comm_f);
    const mlc_mpi_module_t *m = mlc_mpi_module();
    return m ? m->from_mpi(comm_f, cfg, out) : MLC_ERR_UNAVAILABLE;
}

MLC_API mlc_status_t mlc_comm_get_mpi_f(const mlc_comm_t *comm, int64_t *comm_f)
{
    mlc_error_clear();
    if (!comm || !comm_f)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_mpi: %s is NULL", comm ? "out" : "comm");
    if (!comm->be || strcmp(comm->be->name, "mpi") != 0)
        return mlc_error(MLC_ERR_INVALID_ARG, "mlc_comm_get_mpi: the communicator runs on backend '%s', not 'mpi'",
                         comm->be ? comm->be->name : "(none)");
    const mlc_mpi_module_t *m = mlc_mpi_module();
    return m ? m->get_mpi(comm, comm_f) : MLC_ERR_UNAVAILABLE;
}
