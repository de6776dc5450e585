# dpipe_target_defaults(<target>): warnings and DPIPE_SANITIZE for dpipe's own targets.
# Everything is PRIVATE: nothing here reaches the exported interface.
function(dpipe_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion>)
  if(DPIPE_WERROR)
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-Werror>)
  endif()
  if(DPIPE_SANITIZE)
    # GCC's -Wmaybe-uninitialized reports false positives in instrumented code (std::regex, ...).
    target_compile_options(${target} PRIVATE
      -fsanitize=${DPIPE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
      $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
    target_link_options(${target} PRIVATE -fsanitize=${DPIPE_SANITIZE})
    # GCC warns that ThreadSanitizer does not model atomic_thread_fence (the transport's rings and
    # bells use fences; the data they guard is published with release/acquire pairs, which it
    # does model).
    if(DPIPE_SANITIZE MATCHES "thread")
      target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
    endif()
  endif()
endfunction()
