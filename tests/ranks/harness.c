#include "harness.h"
#include <pthread.h>

typedef struct thread_arg {
    mlc_comm_t *comm;
    mlc_test_body_t body;
    int result;
} thread_arg_t;

static void *run_rank(void *p)
{
    thread_arg_t *a = p;
    a->result = a->body(a->comm);
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
        pthread_create(&tids[i], NULL, run_rank, &args[i]);
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
    int rc = body(comm);
    mlc_comm_free(comm);
    return rc;
}
