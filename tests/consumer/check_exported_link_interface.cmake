# Checks the link interface pmrkit's installed package exports:
#   cmake -DPREFIX=<install prefix> -P tests/consumer/check_exported_link_interface.cmake
# Every entry of INTERFACE_LINK_LIBRARIES in the installed targets files must be a target
# (a name with '::', created by pmrkitConfig.cmake or by a package it finds), optionally inside
# $<LINK_ONLY:...>. A bare library name such as "bson-1.0" links only when that library sits
# in the linker's default paths, and an empty $<LINK_ONLY:> is a dependency that was lost on
# export. The only bare names allowed are the C runtime's own (libdl, libm, librt, libpthread),
# which live with libc wherever the compiler looks.
cmake_minimum_required(VERSION 3.20)
if(NOT PREFIX)
  message(FATAL_ERROR "usage: cmake -DPREFIX=<pmrkit install prefix> -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
set(c_runtime_libraries dl m rt pthread)

file(GLOB_RECURSE targets_files "${PREFIX}/*/cmake/pmrkit/pmrkitTargets.cmake"
                                "${PREFIX}/*/cmake/pmrkit/pmrkit-*-targets.cmake")
if(NOT targets_files)
  message(FATAL_ERROR "no pmrkit targets files under ${PREFIX} (is pmrkit installed there?)")
endif()

set(problems "")
foreach(file IN LISTS targets_files)
  get_filename_component(file_name "${file}" NAME)
  file(STRINGS "${file}" lines REGEX "INTERFACE_LINK_LIBRARIES")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "INTERFACE_LINK_LIBRARIES \"(.*)\"")
      continue()
    endif()
    string(REPLACE "\\$" "$" entries "${CMAKE_MATCH_1}")
    foreach(entry IN LISTS entries)
      set(name "${entry}")
      if(entry MATCHES "^\\$<LINK_ONLY:(.*)>$")
        set(name "${CMAKE_MATCH_1}")
        if(name STREQUAL "")
          string(APPEND problems "  ${file_name}: empty $<LINK_ONLY:> "
                                 "(a private dependency lost on export)\n")
          continue()
        endif()
      endif()
      if(name MATCHES "::" OR name IN_LIST c_runtime_libraries)
        continue()
      endif()
      string(APPEND problems "  ${file_name}: '${name}' is a bare library name, "
                             "not an imported target\n")
    endforeach()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "pmrkit's exported link interface names libraries a consumer may not "
                      "find:\n${problems}")
endif()
list(LENGTH targets_files count)
message(STATUS "pmrkit's exported link interface: ${count} targets files, imported targets only")
