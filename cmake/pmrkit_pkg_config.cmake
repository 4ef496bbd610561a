# pmrkit_install_pkg_config(<target> NAME <module> DESCRIPTION <text>
#                           [REQUIRES <pmrkit modules...>] [THIRD_PARTY <library>]
#                           [SYSTEM_LIBS <flags...>])
#
# Installs <module>.pc for <target> in <libdir>/pkgconfig, for make and Meson users. REQUIRES
# names the pmrkit modules it builds on (always public: its headers include theirs),
# THIRD_PARTY a library of cmake/pmrkit_dependencies.cmake (required by its Debian pkg-config
# module), SYSTEM_LIBS linker flags such as -ldl -pthread. pmrkit's libraries are static
# archives unless BUILD_SHARED_LIBS is on: an archive's dependencies are needed by every link,
# so they go in Requires/Libs; a shared library's go in Requires.private/Libs.private, used by
# pkg-config --static only.
function(pmrkit_install_pkg_config target)
  cmake_parse_arguments(ARG "" "NAME;DESCRIPTION;THIRD_PARTY" "REQUIRES;SYSTEM_LIBS" ${ARGN})
  set(requires ${ARG_REQUIRES})
  set(requires_private "")
  set(libs ${ARG_SYSTEM_LIBS})
  set(libs_private "")
  if(ARG_THIRD_PARTY)
    pmrkit_third_party_pkg_config_module(${ARG_THIRD_PARTY} third_party_module)
    list(APPEND requires_private ${third_party_module})
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    list(APPEND requires ${requires_private})
    set(requires_private "")
  else()
    set(libs_private ${libs})
    set(libs "")
  endif()
  foreach(list requires requires_private libs libs_private)
    list(JOIN ${list} " " ${list})
  endforeach()

  # The template's @pc_...@ fields; an empty field is left out rather than written empty.
  set(pc_name ${ARG_NAME})
  set(pc_description ${ARG_DESCRIPTION})
  set(pc_library ${target})
  set(pc_requires_fields "")
  if(requires)
    string(APPEND pc_requires_fields "Requires: ${requires}\n")
  endif()
  if(requires_private)
    string(APPEND pc_requires_fields "Requires.private: ${requires_private}\n")
  endif()
  set(pc_libs "")
  if(libs)
    set(pc_libs " ${libs}")
  endif()
  set(pc_libs_private_field "")
  if(libs_private)
    set(pc_libs_private_field "Libs.private: ${libs_private}")
  endif()
  # From <prefix>/<libdir>/pkgconfig back to <prefix>, so the file works wherever
  # `cmake --install --prefix` puts it.
  file(RELATIVE_PATH pc_prefix_from_here /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  string(REGEX REPLACE "/$" "" pc_prefix_from_here "${pc_prefix_from_here}")

  set(pc_file ${PROJECT_BINARY_DIR}/pkgconfig/${pc_name}.pc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/pmrkit.pc.in ${pc_file} @ONLY)
  install(FILES ${pc_file} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
