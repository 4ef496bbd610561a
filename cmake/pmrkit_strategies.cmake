# The registry's strategies, from strategies folders. A strategies folder holds one .cpp per
# strategy (or per family sharing an option table), each defining a
# pmrkit::detail::strategy_definition named after the strategy in namespace
# pmrkit::detail::strategies (see src/strategy.hpp), and a list.txt naming the strategies in
# the order strategies() reports them, one per line ('#' starts a comment). Adding a strategy
# is one file and one line; no CMake file changes. See docs/architecture.md.

# pmrkit_strategy_sources(VAR FOLDER): the folder's strategy sources, re-globbed at build time.
function(pmrkit_strategy_sources var folder)
  file(GLOB sources CONFIGURE_DEPENDS ${folder}/*.cpp)
  set(${var} ${sources} PARENT_SCOPE)
endfunction()

# pmrkit_strategy_list(TARGET FOLDER...): (absolute FOLDERs) adds to TARGET the generated
# registered_strategies() listing the strategies of every FOLDER's list.txt, in that order.
function(pmrkit_strategy_list target)
  set(names "")
  foreach(folder IN LISTS ARGN)
    set(list_file ${folder}/list.txt)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list_file})
    file(STRINGS ${list_file} lines)
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "#.*" "" line "${line}")
      string(STRIP "${line}" line)
      if(line STREQUAL "")
        continue()
      endif()
      if(NOT line MATCHES "^[a-z][a-z0-9_]*$")
        message(FATAL_ERROR "${list_file}: '${line}' is not a strategy name "
                            "(lower-case letters, digits and '_')")
      endif()
      if(line IN_LIST names)
        message(FATAL_ERROR "${list_file}: strategy '${line}' is listed twice")
      endif()
      list(APPEND names ${line})
    endforeach()
  endforeach()
  set(PMRKIT_STRATEGY_DECLARATIONS "")
  set(PMRKIT_STRATEGY_ENTRIES "")
  foreach(name IN LISTS names)
    string(APPEND PMRKIT_STRATEGY_DECLARATIONS "extern const strategy_definition ${name};\n")
    string(APPEND PMRKIT_STRATEGY_ENTRIES "      &strategies::${name},\n")
  endforeach()
  set(PMRKIT_STRATEGY_FOLDERS "")
  foreach(folder IN LISTS ARGN)
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${folder})
    list(APPEND PMRKIT_STRATEGY_FOLDERS ${relative})
  endforeach()
  string(REPLACE ";" ", " PMRKIT_STRATEGY_FOLDERS "${PMRKIT_STRATEGY_FOLDERS}")
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/${target}_strategy_list.cpp)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/strategy_list.cpp.in ${generated} @ONLY)
  target_sources(${target} PRIVATE ${generated})
endfunction()
