# pmrkit_add_adapter(<name> SOURCES <files...>
#                    [PUBLIC_LIBS <pmrkit targets...>]
#                    [THIRD_PARTY <target found at build time> INSTALLED_AS <plain library name>]
#                    [HEADERS <extra public headers beside include/pmrkit/<name>/>])
#
# One adapter = one static library pmrkit_<name> (alias pmrkit::<name>) on top of the core, with
# its public headers in include/ and its own code in src/, installed as the package component
# <name> (find_package(pmrkit CONFIG COMPONENTS <name>)).
#
# The third-party library is linked PRIVATE and never appears in a public header. The archive is
# static, so a consumer of the installed package still links that library: the export names it
# by its plain library name, since the consumer has no imported target for it unless it looks
# for one itself.
function(pmrkit_add_adapter name)
  cmake_parse_arguments(ARG "" "THIRD_PARTY;INSTALLED_AS" "SOURCES;PUBLIC_LIBS;HEADERS" ${ARGN})
  set(target pmrkit_${name})
  add_library(${target} ${ARG_SOURCES})
  add_library(pmrkit::${name} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${CMAKE_CURRENT_SOURCE_DIR}/src)
  # Only the core's public headers: an adapter is built the way a user's code would be.
  target_link_libraries(${target} PUBLIC pmrkit::pmrkit ${ARG_PUBLIC_LIBS})
  if(ARG_THIRD_PARTY)
    target_link_libraries(${target}
      PRIVATE $<BUILD_INTERFACE:${ARG_THIRD_PARTY}>
      INTERFACE $<INSTALL_INTERFACE:${ARG_INSTALLED_AS}>)
  endif()
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${name})
  pmrkit_target_defaults(${target})

  install(TARGETS ${target} EXPORT pmrkit-${name}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY include/pmrkit/${name} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pmrkit)
  if(ARG_HEADERS)
    install(FILES ${ARG_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pmrkit)
  endif()
  install(EXPORT pmrkit-${name}-targets NAMESPACE pmrkit::
    FILE pmrkit-${name}-targets.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pmrkit)
endfunction()
