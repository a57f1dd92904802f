/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two processes join one unique id on the shm backend, the id handed over
 * through a file. One of them created and freed a communicator before, the
 * other did not: how many communicators a process made before must not
 * matter to the rendezvous (each joins by what the id says, nothing else).
 */
#include <stdint.h>
#include "boot_procs.h"
#include "check.h"

static char id_path[256];

static int rank_main(int rank, void *arg)
{
    (void)arg;
    mlc_config_t cfg = MLC_CONFIG_INIT;
    cfg.backend = "shm";
    cfg.timeout_s = 10;
    if (rank == 0) {
        /* A communicator made and freed before: this process's count moves on. */
        mlc_unique_id_t before;
        mlc_comm_t *one = NULL;
        CHECK_OK(mlc_get_unique_id(&before));
        CHECK_OK(mlc_comm_init_rank(&before, 1, 0, &cfg, &one));
        if (one) mlc_comm_free(one);
    }
    mlc_unique_id_t id;
    CHECK(boot_read_id(id_path, &id, 30) == 0, "rank %d could not read the id from %s", rank, id_path);
    mlc_comm_t *comm = NULL;
    CHECK_OK(mlc_comm_init_rank(&id, 2, rank, &cfg, &comm));
    if (comm) {
        int32_t v = rank + 1, sum = 0;
        CHECK_OK(mlc_allreduce(&v, &sum, 1, MLC_INT32, MLC_SUM, comm, NULL));
        CHECK(sum == 3, "rank %d: allreduce gave %d, expected 3", rank, sum);
        mlc_comm_free(comm);
    }
    return check_failures ? 1 : 0;
}

int main(void)
{
    char dir[] = "/tmp/mlc-uid-counter-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(id_path, sizeof id_path, "%s/id", dir);
    /* The children wait for the file; this process makes the id after forking them. */
    pid_t maker = fork();
    if (maker == 0) _exit(boot_run_children(2, rank_main, NULL, 60) != 0);
    mlc_unique_id_t id;
    CHECK_OK(mlc_get_unique_id(&id));
    CHECK(boot_write_id(id_path, &id) == 0, "writing %s", id_path);
    int status = 0;
    waitpid(maker, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a rank failed (see above)");
    unlink(id_path);
    rmdir(dir);
    return check_result("bootstrap.uid_counter");
}
