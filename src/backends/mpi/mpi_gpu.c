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

void mlc_mpi_report_cuda(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    if (!MPIX_CUDA_AWARE_SUPPORT)
        mlc_gpudirect_set_mpi(MLC_CAP_NO, "Open MPI was built without CUDA support (MPIX_CUDA_AWARE_SUPPORT is 0)");
    else if (MPIX_Query_cuda_support())
        mlc_gpudirect_set_mpi(MLC_CAP_YES, "Open MPI: MPIX_Query_cuda_support() says yes");
    else
        mlc_gpudirect_set_mpi(MLC_CAP_NO, "Open MPI has CUDA support built in, but MPIX_Query_cuda_support() "
                              "says it is off at run time");
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS)
        mlc_gpudirect_set_mpi(yes ? MLC_CAP_YES : MLC_CAP_NO, yes ? "MPICH: MPIX_GPU_query_support(CUDA) says yes"
                                                                  : "MPICH: MPIX_GPU_query_support(CUDA) says no");
    else
        mlc_gpudirect_set_mpi(MLC_CAP_UNKNOWN, "MPICH: MPIX_GPU_query_support(CUDA) failed");
#else
    mlc_gpudirect_set_mpi(MLC_CAP_UNKNOWN, "this MPI library offers no CUDA-awareness query");
#endif
}
