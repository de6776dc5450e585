# Builds and runs a consumer project against dpipe.
#   MODE=find_package:     installs the built dpipe into WORK_DIR/prefix, then find_package(dpipe).
#   MODE=add_subdirectory: the consumer adds DPIPE_SOURCE_DIR as a subdirectory.
cmake_minimum_required(VERSION 3.21)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGV}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(config_args -DCMAKE_BUILD_TYPE=${CONFIG})
if(DEFINED CONFIG_CXX_FLAGS)  # the flags of the dpipe build under test, for that configuration
  string(TOUPPER "${CONFIG}" config_upper)
  list(APPEND config_args "-DCMAKE_CXX_FLAGS_${config_upper}=${CONFIG_CXX_FLAGS}")
endif()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${DPIPE_BINARY_DIR} --prefix ${WORK_DIR}/prefix --config ${CONFIG})
  list(APPEND config_args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  list(APPEND config_args -DDPIPE_SOURCE_DIR=${DPIPE_SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build ${config_args})
# Only what the consumer needs: an add_subdirectory consumer does not build dpipe::io.
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG} --target consumer)
run(${WORK_DIR}/build/consumer)
