# SPDX-License-Identifier: BSD-3-Clause
# mlc_mpi_flavor(OUT): "Open MPI 4.1.4", "MPICH 4.0.2" or mpiexec's first line,
# from `mpiexec --version` (MLC_MPIEXEC_VERSION, read by the top-level
# CMakeLists.txt); "" when there is none.
function(mlc_mpi_flavor out)
  set(v "${MLC_MPIEXEC_VERSION}")
  set(name "")
  if(v MATCHES "Open MPI|OpenRTE")
    set(name "Open MPI")
  elseif(v MATCHES "HYDRA")
    set(name "MPICH")
  endif()
  if(name AND v MATCHES "([0-9]+\\.[0-9]+(\\.[0-9]+)?)")
    set(${out} "${name} ${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    string(REGEX REPLACE "\n.*" "" first "${v}")
    set(${out} "${first}" PARENT_SCOPE)
  endif()
endfunction()
