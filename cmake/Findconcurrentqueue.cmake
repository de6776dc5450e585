# Provides concurrentqueue::concurrentqueue.
# Upstream >= 1.0.4 installs concurrentqueueConfig.cmake (headers in include/concurrentqueue/moodycamel/);
# Debian's libconcurrentqueue-dev 1.0.3 ships only include/concurrentqueue/*.h (no config, no .pc).
find_package(concurrentqueue CONFIG QUIET)
if(NOT TARGET concurrentqueue::concurrentqueue)
  find_path(concurrentqueue_INCLUDE_DIR NAMES concurrentqueue/concurrentqueue.h)
  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(concurrentqueue REQUIRED_VARS concurrentqueue_INCLUDE_DIR)
  if(concurrentqueue_FOUND AND NOT TARGET concurrentqueue::concurrentqueue)
    add_library(concurrentqueue::concurrentqueue INTERFACE IMPORTED)
    set_target_properties(concurrentqueue::concurrentqueue PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${concurrentqueue_INCLUDE_DIR}")
  endif()
else()
  set(concurrentqueue_FOUND TRUE)
endif()
