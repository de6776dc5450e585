# dpipe_add_header_check(<target>): compiles every header of include/dpipe, the detail/ folders'
# too, in a translation unit of its own, so that a header that does not stand alone (a missing
# include, a name it uses but does not declare, an include loop that works in one order only)
# fails the build (range-v3's TestHeaders idea).
function(dpipe_add_header_check target)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/include
       ${PROJECT_SOURCE_DIR}/include/dpipe/*.hpp)
  set(sources)
  foreach(header ${headers})
    string(REGEX REPLACE "[/.]" "_" stem "${header}")
    set(source ${CMAKE_CURRENT_BINARY_DIR}/header_check/${stem}.cpp)
    set(text "#include <${header}>\n#include <${header}>  // and guarded against a second inclusion\n")
    if(EXISTS ${source})
      file(READ ${source} old)
    endif()
    if(NOT old STREQUAL text)
      file(WRITE ${source} "${text}")
    endif()
    list(APPEND sources ${source})
  endforeach()
  add_library(${target} OBJECT ${sources})
  target_link_libraries(${target} PRIVATE dpipe::dpipe)
  dpipe_target_defaults(${target})
endfunction()
