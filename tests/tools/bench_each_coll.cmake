# SPDX-License-Identifier: BSD-3-Clause
# Run mlcomm-bench once per collective on 3 threads with checking, in place
# and out of place; fail on the first non-zero exit. Usage: cmake -DBENCH=... -P
foreach(coll allreduce allgather reduce_scatter broadcast reduce alltoall alltoallv gather scatter
             barrier sendrecv)
  execute_process(COMMAND ${BENCH} -t 3 ${coll} -b 0 -e 96K -f 16 -c 1 -w 1 -n 2 -r 2
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mlcomm-bench ${coll} exited ${rc}\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "every collective verified")
