/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether this MPI takes CUDA device pointers ("CUDA-aware"), reported to
 * core's GPU-direct report (mlcomm-info) once MPI is up. Only the library
 * can tell: Open MPI through its mpi-ext.h query, MPICH 4 through
 * MPIX_GPU_query_support.
 */
#include "mpi_impl.h"
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

/* 1: this MPI takes CUDA device pointers; 0: it does not or cannot say. */
static int cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_CUDA_AWARE_SUPPORT && MPIX_Query_cuda_support();
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes;
#else
    return 0;
#endif
}

bool mlc_mpi_device_capable(mlc_comm_t *comm)
{
    if (comm->cfg.mpi_cuda_aware >= 0) return comm->cfg.mpi_cuda_aware == 1; /* MLC_MPI_CUDA_AWARE */
    return comm->cfg.memory != MLC_MEMORY_ROCM && cuda_aware();
}

/*
 * The same answer on every rank (it depends only on what every rank passes
 * alike). Not direct: our algorithms (host reductions between steps), user
 * ops, avg, fp16/bf16 (host code runs on the data), broadcast and the
 * v-collectives (the root's or own block is copied on the host).
 */
bool mlc_mpi_device_direct(const mlc_request_t *req)
{
    if (req->algo) return false;
    const mlc_args_t *a = &req->args;
    switch (req->coll) {
    case MLC_COLL_REDUCE:
    case MLC_COLL_ALLREDUCE:
    case MLC_COLL_REDUCE_SCATTER: return mlc_mpi_reduce_is_native(a->dtype, a->op);
    case MLC_COLL_ALLGATHER:
    case MLC_COLL_ALLTOALL:
    case MLC_COLL_GATHER:
    case MLC_COLL_SCATTER:
    case MLC_COLL_BARRIER:
    case MLC_COLL_SEND:
    case MLC_COLL_RECV:
    case MLC_COLL_SENDRECV: return a->dtype != MLC_FLOAT16 && a->dtype != MLC_BFLOAT16;
    default: return false;
    }
}

void mlc_mpi_report_cuda(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    if (!MPIX_CUDA_AWARE_SUPPORT)
        mlc_core->gpudirect_set_mpi(MLC_CAP_NO, "Open MPI was built without CUDA support (MPIX_CUDA_AWARE_SUPPORT is 0)");
    else if (MPIX_Query_cuda_support())
        mlc_core->gpudirect_set_mpi(MLC_CAP_YES, "Open MPI: MPIX_Query_cuda_support() says yes");
    else
        mlc_core->gpudirect_set_mpi(MLC_CAP_NO, "Open MPI has CUDA support built in, but MPIX_Query_cuda_support() "
                              "says it is off at run time");
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS)
        mlc_core->gpudirect_set_mpi(yes ? MLC_CAP_YES : MLC_CAP_NO, yes ? "MPICH: MPIX_GPU_query_support(CUDA) says yes"
                                                                  : "MPICH: MPIX_GPU_query_support(CUDA) says no");
    else
        mlc_core->gpudirect_set_mpi(MLC_CAP_UNKNOWN, "MPICH: MPIX_GPU_query_support(CUDA) failed");
#else
    mlc_core->gpudirect_set_mpi(MLC_CAP_UNKNOWN, "this MPI library offers no CUDA-awareness query");
#endif
}
