/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that loads libmlcomm with dlopen (as Python's ctypes and Mono's
 * P/Invoke do), uses the mpi backend and closes the library again must still
 * exit cleanly: the MPI module, never unloaded, finalizes MPI at exit through
 * the core that loaded it, so that core must still be mapped then.
 * Run under mpirun with MLCOMM_LIBRARY = the shared library; exit 0 = pass.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "mlcomm.h"

int main(void)
{
    const char *path = getenv("MLCOMM_LIBRARY");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        fprintf(stderr, "cannot load MLCOMM_LIBRARY=%s: %s\n", path ? path : "(unset)", dlerror());
        return 1;
    }
    mlc_status_t (*init)(const mlc_config_t *, mlc_comm_t **);
    mlc_status_t (*barrier)(mlc_comm_t *, mlc_request_t **);
    mlc_status_t (*free_comm)(mlc_comm_t *);
    const char *(*last_error)(void);
    *(void **)&init = dlsym(lib, "mlc_comm_init");
    *(void **)&barrier = dlsym(lib, "mlc_barrier");
    *(void **)&free_comm = dlsym(lib, "mlc_comm_free");
    *(void **)&last_error = dlsym(lib, "mlc_last_error");
    if (!init || !barrier || !free_comm || !last_error) {
        fprintf(stderr, "missing symbols in %s\n", path);
        return 1;
    }
    mlc_comm_t *comm = NULL;
    if (init(NULL, &comm) != MLC_SUCCESS || barrier(comm, NULL) != MLC_SUCCESS) {
        fprintf(stderr, "mpi communicator: %s\n", last_error());
        return 1;
    }
    free_comm(comm);
    dlclose(lib);
    return 0; /* the module's exit handler runs after this */
}
