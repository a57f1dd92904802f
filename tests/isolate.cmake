# SPDX-License-Identifier: BSD-3-Clause
# Included by ctest (TEST_INCLUDE_FILES, tests/CMakeLists.txt) before any test
# runs: every test job must make its own job identity. mlcomm-run gives each
# job a random MLC_JOB_ID; a process started any other way makes a random one
# when it inherits none. A suite started inside a Slurm job, under torchrun or
# mpirun, or with MLC_JOB_ID exported would otherwise hand every test the same
# rank, size and job id (and two suites the same shared-memory names), so ctest
# drops those variables here. The tests that need them set their own.
foreach(var
    MLC_JOB_ID MLC_JOB_FD MLC_RANK MLC_WORLD_SIZE MLC_LOCAL_RANK MLC_LOCAL_SIZE
    RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE TORCHELASTIC_RUN_ID MASTER_ADDR MASTER_PORT
    OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE
    OMPI_MCA_ess_base_jobid PMIX_NAMESPACE PMI_RANK PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS
    SLURM_JOB_ID SLURM_STEP_ID SLURM_STEPID SLURM_PROCID SLURM_NTASKS SLURM_LOCALID
    SLURM_NTASKS_PER_NODE SLURM_TASKS_PER_NODE)
  unset(ENV{${var}})
endforeach()
