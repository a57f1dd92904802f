# SPDX-License-Identifier: BSD-3-Clause
# heat2d on the mpi backend under mpirun -np 4 (3 patches per rank) must print
# the checksum of mlcomm-run -n 1 with 12 patches, and use the executor
# MLC_EXCHANGE_EXEC names.
# -DRUN=<mlcomm-run> -DHEAT=<heat2d> -DMPIRUN=<mpirun> -DMPIFLAGS=<flags>
separate_arguments(mpiflags UNIX_COMMAND "${MPIFLAGS}")
set(common --nx 61 --ny 47 --steps 23)
execute_process(COMMAND ${CMAKE_COMMAND} -E env MLC_BACKEND=shm MLC_EXCHANGE_EXEC=auto
                        ${RUN} -n 1 ${HEAT} --patches-per-rank 12 ${common}
                OUTPUT_VARIABLE ref ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT ref MATCHES "checksum ([0-9a-f]+)")
  message(FATAL_ERROR "mlcomm-run -n 1 heat2d failed (${rc}):\n${ref}\n${err}")
endif()
set(want ${CMAKE_MATCH_1})
execute_process(COMMAND ${MPIRUN} ${mpiflags} -np 4 ${HEAT} --patches-per-rank 3 ${common}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "checksum ([0-9a-f]+)")
  message(FATAL_ERROR "mpirun -np 4 heat2d failed (${rc}):\n${out}\n${err}")
endif()
set(got ${CMAKE_MATCH_1})
if(NOT out MATCHES "backend mpi" OR NOT out MATCHES "executor $ENV{MLC_EXCHANGE_EXEC}")
  message(FATAL_ERROR "heat2d did not run on mpi with executor $ENV{MLC_EXCHANGE_EXEC}:\n${out}")
endif()
message(STATUS "mpirun -np 4 x 3 patches: ${got}; 1 rank x 12 patches: ${want}")
if(NOT got STREQUAL want)
  message(FATAL_ERROR "checksum ${got} (mpi, 4 ranks) differs from ${want} (1 rank)")
endif()
