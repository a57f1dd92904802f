# SPDX-License-Identifier: BSD-3-Clause
# One scenario of the profiler trace test (see CMakeLists.txt):
#   cmake -DRUN=mlcomm-run -DOPS=trace_ops -DMERGE=mlcomm-trace -DCHECK=trace_check
#         -DSCENARIO=complete|killed|bad_input -DWORK=dir -P trace_test.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run_ok what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} exited ${rc}\n${out}\n${err}")
  endif()
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

function(run_fails what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what} should have failed\n${out}\n${err}")
  endif()
  message(STATUS "${what} failed as it should: ${err}")
endfunction()

# Merge the per-rank files and check one event per operation per rank.
function(merge_and_check)
  run_ok("mlcomm-trace" ${MERGE} -o ${WORK}/merged.json -p ${WORK}/trace.%r.json)
  set(merge_err "${last_err}")
  message(STATUS "mlcomm-trace: ${merge_err}")
  run_ok("trace_check" ${CHECK} ${WORK}/merged.json 2)
  set(merge_err "${merge_err}" PARENT_SCOPE)
endfunction()

# Does a per-rank file end with its closing bracket?
function(is_closed file result)
  file(READ ${file} text)
  string(STRIP "${text}" text)
  if(text MATCHES "\\]$")
    set(${result} TRUE PARENT_SCOPE)
  else()
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

set(ENV{MLC_BACKEND} shm)
set(ENV{MLC_PROFILE} ${WORK}/trace.%r.json)

if(SCENARIO STREQUAL "complete")
  run_ok("a 2-rank job with MLC_PROFILE" ${RUN} -n 2 --timeout 60 ${OPS})
  foreach(r 0 1)
    is_closed(${WORK}/trace.${r}.json closed)
    if(NOT closed)
      message(FATAL_ERROR "rank ${r}'s trace of a finished job is not closed")
    endif()
  endforeach()
  merge_and_check()

elseif(SCENARIO STREQUAL "killed")
  # Both ranks die with their trace open: the last rank by SIGKILL, rank 0 by the launcher.
  execute_process(COMMAND ${RUN} -n 2 --timeout 60 ${OPS} --kill ${WORK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 137)
    message(FATAL_ERROR "mlcomm-run should exit 137 (a rank killed by SIGKILL), exited ${rc}\n${out}\n${err}")
  endif()
  foreach(r 0 1)
    is_closed(${WORK}/trace.${r}.json closed)
    if(closed)
      message(FATAL_ERROR "rank ${r} was killed, yet its trace is closed: nothing tested")
    endif()
  endforeach()
  merge_and_check()
  # A rank killed in the middle of writing an event: that event is dropped.
  file(APPEND ${WORK}/trace.1.json ",\n{\"name\":\"allreduce\",\"cat\":\"mlcomm\",\"ph\":\"X\",\"pid\":1,\"ts\":12")
  merge_and_check()
  if(NOT merge_err MATCHES "dropped the last event")
    message(FATAL_ERROR "the cut event was not reported: ${merge_err}")
  endif()

elseif(SCENARIO STREQUAL "bad_input")
  # The tool refuses what is not a trace; the checker can fail.
  file(WRITE ${WORK}/garbled.json "[\n{\"name\":\"allreduce\",\"ph\":\"X\"},\n{bad}\n]\n")
  run_fails("mlcomm-trace on invalid JSON" ${MERGE} -o ${WORK}/out.json ${WORK}/garbled.json)
  file(WRITE ${WORK}/notrace.json "{\"traceEvents\":[]}\n")
  run_fails("mlcomm-trace on a non-array" ${MERGE} -o ${WORK}/out.json ${WORK}/notrace.json)
  run_fails("mlcomm-trace -p without a rank 0 file" ${MERGE} -o ${WORK}/out.json -p ${WORK}/none.%r.json)
  run_fails("mlcomm-trace -p without %r" ${MERGE} -o ${WORK}/out.json -p ${WORK}/garbled.json)
  # A failed merge leaves no document: no -o file, nothing on stdout.
  if(EXISTS ${WORK}/out.json)
    message(FATAL_ERROR "a failed merge left ${WORK}/out.json behind")
  endif()
  execute_process(COMMAND ${MERGE} ${WORK}/notrace.json ${WORK}/missing.json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT out STREQUAL "")
    message(FATAL_ERROR "mlcomm-trace with a missing file: exit ${rc}, stdout '${out}' (want a failure and no output)")
  endif()
  file(WRITE ${WORK}/invalid.json "{\"traceEvents\":[{\"ph\":\"X\",}]}")
  run_fails("trace_check on invalid JSON" ${CHECK} ${WORK}/invalid.json 2)
  # Valid JSON, valid events, but rank 1 is missing.
  set(ev "\"cat\":\"mlcomm\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":1.5,\"dur\":2e0,\"args\":{\"bytes\":8,\"algo\":\"rd\",\"seq\":0,\"status\":\"MLC_SUCCESS\"}")
  file(WRITE ${WORK}/rank0.json "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"rank 0 \\\"x\\\" \\u00e9\"}}")
  foreach(op allreduce allreduce allreduce allreduce broadcast broadcast allgather reduce_scatter barrier sendrecv)
    file(APPEND ${WORK}/rank0.json ",\n{\"name\":\"${op}\",${ev}}")
  endforeach()
  file(APPEND ${WORK}/rank0.json "\n]\n")
  run_ok("mlcomm-trace on a hand-written rank file" ${MERGE} -o ${WORK}/one.json ${WORK}/rank0.json)
  run_ok("trace_check on 1 rank" ${CHECK} ${WORK}/one.json 1)
  run_fails("trace_check with rank 1 missing" ${CHECK} ${WORK}/one.json 2)
else()
  message(FATAL_ERROR "unknown SCENARIO '${SCENARIO}'")
endif()
