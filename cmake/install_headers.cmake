# Installs Kiln's public headers, run by `cmake --install` (install(SCRIPT) in
# CMakeLists.txt). Public means: kiln.h, every header of the source tree it reaches through
# #include "...", and the few extra headers a program includes by path (KILN_EXTRA_HEADERS:
# the allocator's segment sources). Internal headers (kernel tables, CPU loops, the
# allocator's internals, validation helpers) stay out of the include tree. Walking the
# includes at install time keeps the set in step with the code without a list to maintain;
# tests/install/run_consumer.cmake checks that no installed header includes a missing one.
#
# Inputs: KILN_SOURCE_DIR, KILN_INCLUDE_DEST (relative to the prefix), KILN_EXTRA_HEADERS
# (paths relative to KILN_SOURCE_DIR).
set(todo ${KILN_SOURCE_DIR}/kiln.h)
foreach(extra IN LISTS KILN_EXTRA_HEADERS)
  list(APPEND todo ${KILN_SOURCE_DIR}/${extra})
endforeach()
set(public)
while(todo)
  list(POP_FRONT todo header)
  list(FIND public ${header} seen)  # (not IN_LIST: install scripts run under old policies)
  if(NOT seen EQUAL -1)
    continue()
  endif()
  list(APPEND public ${header})
  get_filename_component(dir ${header} DIRECTORY)
  file(STRINGS ${header} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" included "${line}")
    get_filename_component(path ${dir}/${included} ABSOLUTE)
    if(EXISTS ${path})
      list(APPEND todo ${path})
    endif()
  endforeach()
endwhile()

foreach(header IN LISTS public)
  file(RELATIVE_PATH relative ${KILN_SOURCE_DIR} ${header})
  get_filename_component(relative_dir ${relative} DIRECTORY)
  file(INSTALL ${header} DESTINATION ${CMAKE_INSTALL_PREFIX}/${KILN_INCLUDE_DEST}/kiln/${relative_dir})
endforeach()
