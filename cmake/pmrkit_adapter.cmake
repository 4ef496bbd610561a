# pmrkit_add_adapter(<name> SOURCES <files...>
#                    [COMPONENTS <other adapters it builds on...>]
#                    [THIRD_PARTY <library of cmake/pmrkit_dependencies.cmake, found already>]
#                    [HEADERS <extra public headers beside include/pmrkit/<name>/>]
#                    [DESCRIPTION <one line, for its .pc file>])
#
# One adapter = one library pmrkit_<name> (static unless BUILD_SHARED_LIBS; alias
# pmrkit::<name>) on top of the core, with
# its public headers in include/ and its own code in src/, installed as the package component
# <name> (find_package(pmrkit CONFIG COMPONENTS <name>)) and the pkg-config module pmrkit-<name>.
#
# The third-party library is linked PRIVATE through pmrkit_dependency::<library> and never
# appears in a public header. A static archive's export keeps it as
# $<LINK_ONLY:pmrkit_dependency::<library>>, which pmrkitConfig.cmake defines by finding the
# library again, the same way, when the component is asked for (see the table it records below);
# a shared library carries it itself.
function(pmrkit_add_adapter name)
  cmake_parse_arguments(ARG "" "THIRD_PARTY;DESCRIPTION" "SOURCES;COMPONENTS;HEADERS" ${ARGN})
  set(target pmrkit_${name})
  add_library(${target} ${ARG_SOURCES})
  add_library(pmrkit::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION}
                                             SOVERSION ${PMRKIT_SOVERSION})
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${CMAKE_CURRENT_SOURCE_DIR}/src)
  # Only the core's public headers: an adapter is built the way a user's code would be.
  target_link_libraries(${target} PUBLIC pmrkit::pmrkit)
  set(pc_requires pmrkit)
  foreach(component IN LISTS ARG_COMPONENTS)
    target_link_libraries(${target} PUBLIC pmrkit::${component})
    list(APPEND pc_requires pmrkit-${component})
  endforeach()
  if(ARG_THIRD_PARTY)
    if(NOT TARGET pmrkit_dependency::${ARG_THIRD_PARTY})
      message(FATAL_ERROR "pmrkit_add_adapter(${name}): "
                          "call pmrkit_find_third_party(${ARG_THIRD_PARTY}) first")
    endif()
    target_link_libraries(${target} PRIVATE pmrkit_dependency::${ARG_THIRD_PARTY})
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
  if(NOT ARG_DESCRIPTION)
    set(ARG_DESCRIPTION "pmrkit's ${name} adapter")
  endif()
  pmrkit_install_pkg_config(${target} NAME pmrkit-${name} DESCRIPTION "${ARG_DESCRIPTION}"
    REQUIRES ${pc_requires} THIRD_PARTY ${ARG_THIRD_PARTY})

  # What pmrkitConfig.cmake must find before it loads this component's targets.
  string(CONCAT entry
    "set(pmrkit_${name}_needs_components \"${ARG_COMPONENTS}\")\n"
    "set(pmrkit_${name}_needs_third_party \"${ARG_THIRD_PARTY}\")\n")
  set_property(GLOBAL APPEND_STRING PROPERTY PMRKIT_COMPONENT_TABLE "${entry}")
endfunction()
