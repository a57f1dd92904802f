/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backend interface: one const table of function pointers per backend,
 * grouped by concern. MLC_BACKEND_LIST drives registration, `auto`
 * selection, mlcomm-info and the test matrix. Every table is validated
 * before it is used (mlc_backend_validate): entries marked optional may be
 * NULL (core then does without); an operation a backend lacks points to a
 * shared stub that says so.
 *
 * Division of labour: core validates every argument once, allocates the
 * request, assigns the sequence number, picks the algorithm name (for
 * backends running src/algos schedules), runs the wait loop (timeouts,
 * abort, peer death) and profiles. A backend moves data and reports.
 */
#ifndef MLC_CORE_BACKEND_H
#define MLC_CORE_BACKEND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "algos/sched.h"
#include "base/backend_names.h"
#include "comm.h"
#include "store.h"

/* Where a rank of a store bootstrap runs (src/core/bootstrap.c). */
typedef struct mlc_boot_peer {
    int pid;
    int host; /* index of its host: ranks with the same index share a host */
} mlc_boot_peer_t;

/* How a new world communicator should be formed (from resolved config). */
typedef struct mlc_boot {
    int rank, size;
    int local_rank, local_size;
    const char *job_id;       /* shared by all ranks of the job; fresh for each store bootstrap */
    void *be_arg;             /* backend-specific (mpi: the MPI_Comm handed to mlc_comm_from_mpi) */
    /* Store bootstraps only (mlc_comm_init_rank, mlc_comm_init_store), else NULL:
     * the store every rank shares during init (store.h), and every rank's process
     * and host as the ranks published them. */
    const mlc_bootstore_t *store;
    const mlc_boot_peer_t *peers;
    int nhosts;
    const char *hosts_text; /* "'a' (ranks 0-1), 'b' (ranks 2-3)", for messages */
} mlc_boot_t;

/* The interface's version: a table built against another layout is refused. */
#define MLC_BACKEND_ABI 4u

typedef struct mlc_backend {
    uint32_t abi;  /* MLC_BACKEND_ABI */
    uint32_t size; /* sizeof(mlc_backend_t) */
    const char *name;
    int priority; /* `auto` picks the available backend with the highest priority that accepts the job */

    /* ---- discovery -------------------------------------------------------- */
    /* 1 if usable on this machine; otherwise 0 and `why` names the reason. */
    int (*available)(char *why, size_t why_len);
    /* Optional: 1 if `auto` should pick this backend for the job described by
     * cfg (e.g. shm: every rank on this host; mpi: launched by mpirun). NULL = always. */
    int (*accepts)(const mlc_cfg_t *cfg);

    /* ---- lifetime ---------------------------------------------------------- */
    /* Create the backend state of a new communicator; comm->rank/size/cfg are set. */
    mlc_status_t (*init)(mlc_comm_t *comm, const mlc_boot_t *boot);
    /* Optional (threads only): create n ranks at once (comms[i]->rank/size/cfg set by core). */
    mlc_status_t (*init_all)(int n, mlc_comm_t **comms);
    /*
     * Create child from parent: `members` lists the parent ranks of the new
     * communicator in new-rank order (child->rank/size already set); color
     * and key are the caller's (MPI uses them directly). Collective over
     * parent (every rank of parent calls it, also those with MLC_UNDEFINED,
     * which get child == NULL).
     */
    mlc_status_t (*split)(mlc_comm_t *parent, int color, int key, const int *members, int nmembers,
                          mlc_comm_t *child);
    /* Release backend state; cancel pending requests (their buffers are no longer touched). */
    void (*destroy)(mlc_comm_t *comm);
    /* Make every rank's pending and later operations fail with ABORTED; any thread. */
    void (*abort)(mlc_comm_t *comm);
    /* Optional: core ended the started request req without the backend (its
     * communicator failed): drop it, so that nothing touches its buffers or
     * req again once this returns (the caller may free and reuse them). NULL:
     * the backend leaves such requests to its own layer (mpi: to MPI). */
    void (*forget)(mlc_request_t *req);

    /* ---- operations: every entry set (mlc_backend_unsupported_* where the backend has none)
     * Begin an operation (req->args validated, req->seq and req->algo set).
     * Complete it now or later with mlc_request_complete. A non-zero return
     * means it was not started (req is then released by core). */
    mlc_status_t (*start[MLC_COLL_COUNT])(mlc_request_t *req);
    /* Optional: the calling thread's group ends (mlc_group_end). Called once
     * per distinct hook with every communicator of the group whose table has
     * it, before core waits. A backend that defers grouped requests
     * (req->grouped) issues them here as one (nccl: one NCCL group); a
     * request it cannot issue is completed with the error, which is also
     * returned with a message. NULL: grouped requests start as any other. */
    mlc_status_t (*group_end)(mlc_comm_t *const *comms, int ncomms);
    /* Non-blocking probe. */
    mlc_status_t (*iprobe)(mlc_comm_t *comm, int source, int tag, int *flag, mlc_msg_status_t *st);

    /* ---- progress and failure ------------------------------------------------ */
    /* Advance pending work without blocking; *progressed = 1 if anything moved. */
    mlc_status_t (*progress)(mlc_comm_t *comm, int *progressed);
    /* Peer death / remote abort check: 0 if healthy, else calls mlc_comm_fail and returns it. */
    mlc_status_t (*health)(mlc_comm_t *comm);
    /* Optional: the cheap part of health, for calls that return without
     * waiting (count 0): a failure this rank or a member posted (abort,
     * mismatch, a death another member found), without probing the peers.
     * NULL: health is used. */
    mlc_status_t (*posted_failure)(mlc_comm_t *comm);
    /* Optional: sleep until something may have changed for comm, at most
     * max_s seconds (core passes <= 0.1 s). Must return promptly when a
     * request of comm completes on another thread or a peer writes to us.
     * NULL = short sleep. */
    void (*idle)(mlc_comm_t *comm, double max_s);
    /* Optional: true when a waiter whose progress call moved nothing should
     * block in idle at once rather than poll again: polling would hold a
     * core that the ranks it waits for need (e.g. more ranks than cores
     * beside another busy process). NULL: poll first. */
    bool (*polling_futile)(mlc_comm_t *comm);
    /* Optional: block in the backend's own wait (MPI with no deadline, MLC_TIMEOUT=0). */
    mlc_status_t (*wait_native)(mlc_request_t *req);
    /* Optional: ranks `req` still waits on, e.g. "2, 3" (for timeout messages). */
    void (*pending_peers)(const mlc_request_t *req, char *buf, size_t len);
    /* Optional: tell the other members that the communicator failed here (a
     * timeout): their waits fail with st and `note`, which names the ranks it
     * is about. */
    void (*post_failure)(mlc_comm_t *comm, mlc_status_t st, const char *note);
    /* Optional: the ranks a probe of `source` (MLC_ANY_SOURCE: any) has not
     * heard from, e.g. "2" (for timeout messages). */
    void (*silent_peers)(mlc_comm_t *comm, int source, char *buf, size_t len);

    /* ---- algorithms -------------------------------------------------------- */
    /* Optional: the tag limit (default MLC_TAG_MAX_DEFAULT). */
    int (*tag_max)(mlc_comm_t *comm);
    /* Optional: algorithm names this backend can run for coll (NULL-terminated); NULL = native only. */
    const char *const *(*algos)(mlc_coll_t coll);
    /* Optional: the backend's own algorithm for req (e.g. shm's "direct"),
     * "native" (the backend's own collective, where its list starts with
     * it), or NULL to let the generic selector choose among src/algos. Must
     * give every rank the same answer. */
    const char *(*choose_algo)(const mlc_request_t *req);
    /* Optional, with choose_algo where the list starts with "native": the
     * collectives choose_algo is asked for (NULL: every one with more than
     * native in its list); the others run native without a call. */
    bool (*chooses)(mlc_coll_t coll);
    /* Compares call signatures itself before data moves (src/core/signature.h):
     * MLC_CHECK adds nothing. Else MLC_CHECK=1 makes core exchange them first. */
    bool signs_calls;
    /* Every rank is a process of this host, meeting through shared memory
     * named after the job (shm): every rank needs the same job id, and
     * device memory can move between ranks by CUDA/HIP IPC. */
    bool host_shared;

    /* ---- decoration (src/backends/staged wraps a table with its own) ------------ */
    /* Optional: take a whole validated call before core makes a request of
     * it; the decorator passes calls on through mlc_submit_plain. NULL = core
     * submits it. */
    mlc_status_t (*submit)(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                           mlc_request_t **out);
    /* Optional: a request whose `decor` is set is released: free that state. */
    void (*release)(mlc_request_t *req);
    /* Optional: true while waiting for req must keep calling progress (the
     * decorator's own operations move only there), so no native wait. */
    bool (*keeps_polling)(const mlc_request_t *req);

    /* ---- device memory ------------------------------------------------------- */
    /* Optional: set a GPU stream. */
    mlc_status_t (*set_stream)(mlc_comm_t *comm, void *stream);
    /* A GPU backend (nccl, rccl) takes device buffers on every call:
     * device_native. A host backend's calls on a communicator of memory kind
     * cuda/rocm/auto are staged through pinned host memory by core, unless
     * every rank's device_capable said yes at init (e.g. a CUDA-aware MPI)
     * and device_direct says this call may take device pointers as they are
     * (the same answer on every rank). Both optional. */
    bool device_native;
    bool (*device_capable)(mlc_comm_t *comm);
    bool (*device_direct)(const mlc_request_t *req);
} mlc_backend_t;

/*
 * A decorator wraps a new communicator's table with its own (as the staged
 * backend does for device buffers on a host backend): after the backend's
 * init and the settings agreement, core offers every communicator to every
 * decorator in MLC_DECORATOR_LIST; `wrap` decides (collectively) whether
 * it applies and swaps comm->be. A wrapper's split wraps the child.
 */
typedef struct mlc_decorator {
    const char *name;
    mlc_status_t (*wrap)(mlc_comm_t *comm);
    /* mlc_comm_init_all: n ranks of this process at once (no collective). */
    mlc_status_t (*wrap_local)(int n, mlc_comm_t **comms);
} mlc_decorator_t;

#define MLC_DECORATOR_LIST(X) X(staged)
#define MLC_X_DECL(id) extern const mlc_decorator_t mlc_decorator_##id;
MLC_DECORATOR_LIST(MLC_X_DECL)
#undef MLC_X_DECL

/* Offer comm (or the n ranks of mlc_comm_init_all) to every decorator. */
mlc_status_t mlc_decorate(mlc_comm_t *comm);
mlc_status_t mlc_decorate_local(int n, mlc_comm_t **comms);

/* core's submit: request, sequence number, algorithm, the backend's start;
 * out == NULL: block until done. For decorators passing calls on. */
mlc_status_t mlc_submit_plain(mlc_comm_t *comm, mlc_coll_t coll, const mlc_args_t *args, size_t bytes,
                              mlc_request_t **out);

/* The first fields of every backend table. */
#define MLC_BACKEND_HEADER .abi = MLC_BACKEND_ABI, .size = sizeof(mlc_backend_t)

/* Shared stubs for operations a backend does not have: UNSUPPORTED with a
 * message naming the backend and the operation. */
mlc_status_t mlc_backend_unsupported_start(mlc_request_t *req);
mlc_status_t mlc_backend_unsupported_iprobe(mlc_comm_t *comm, int source, int tag, int *flag,
                                            mlc_msg_status_t *st);
/* A table is usable: its version and size are this library's, and every
 * entry that is not optional is set. Else CONFIG, naming the first flaw. */
mlc_status_t mlc_backend_validate(const mlc_backend_t *be);

#define MLC_TAG_MAX_DEFAULT ((1 << 30) - 1)


#define MLC_X_DECL(id) extern const mlc_backend_t mlc_backend_##id;
MLC_BACKEND_LIST(MLC_X_DECL)
#undef MLC_X_DECL

/* The registry: every backend in list order, NULL-terminated. */
extern const mlc_backend_t *const mlc_backends[];
const mlc_backend_t *mlc_backend_find(const char *name);
/* The algorithm every rank runs for req: forced, else the selector's (NULL: native). */
const char *mlc_request_algo(const mlc_request_t *req);
/* The selector's choice for req, ignoring a forced algorithm: a backend runs
 * it when the forced one cannot take this call (as NCCL_ALGO falls back). */
const char *mlc_request_default_algo(const mlc_request_t *req);
/* The collective description of a request (for schedule building). */
void mlc_request_desc(const mlc_request_t *req, mlc_coll_desc_t *d);

/*
 * Create a communicator served by `be`, with rank and size from boot rather
 * than from the environment (mlc_comm_from_mpi uses it): cfg is resolved as
 * in mlc_comm_init (its backend field is ignored: comm->cfg.backend becomes
 * be->name), boot->job_id may be NULL (core makes one), be->init(comm, boot)
 * receives boot->be_arg, then the cross-rank agreement check runs.
 */
mlc_status_t mlc_comm_create_with(const mlc_backend_t *be, const mlc_config_t *cfg,
                                  const mlc_boot_t *boot, mlc_comm_t **out);

/* Create a communicator from a resolved cfg and boot (be NULL: chosen from cfg). */
mlc_status_t mlc_comm_create_boot(const mlc_cfg_t *cfg, const mlc_boot_t *boot, const mlc_backend_t *be,
                                  mlc_comm_t **out);
/* 2 * nbytes random hex digits and a NUL into out (nbytes <= 32). */
void mlc_random_hex(char *out, size_t nbytes);

/* Choose the backend for cfg (explicit name or auto). Sets a message on failure. */
mlc_status_t mlc_backend_select(const mlc_cfg_t *cfg, const mlc_backend_t **out);
#endif
