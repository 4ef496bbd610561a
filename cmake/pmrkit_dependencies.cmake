# pmrkit's third-party libraries, found the same way by the build and by the installed
# package (this file is installed beside pmrkitConfig.cmake, which includes it per component).
#
# pmrkit_find_third_party(<name>) finds one of them and defines the imported target
# pmrkit_dependency::<name> wrapping whatever was found, and sets pmrkit_dependency_<name>_FOUND
# in the caller. The adapters link that target, so the exported link interface names it,
# $<LINK_ONLY:pmrkit_dependency::<name>>, never a bare library name: a consumer links the library
# its own find located, through CMAKE_PREFIX_PATH like any package. The library's own CMake
# package is tried first, then its pkg-config module.
#
#   name          CMake package            its target               pkg-config   Debian package
#   libbson       bson-1.0 (CONFIG)        mongo::bson_shared       libbson-1.0  libbson-dev
#   libzstd       zstd (CONFIG)            zstd::libzstd_shared     libzstd      libzstd-dev
#   libprotobuf   Protobuf (FindProtobuf)  protobuf::libprotobuf    protobuf     libprotobuf-dev

# pmrkit_third_party_pkg_config_module(<name> <var>): the pkg-config module of <name>, for the
# Requires of pmrkit's own .pc files.
function(pmrkit_third_party_pkg_config_module name var)
  if(name STREQUAL "libbson")
    set(${var} libbson-1.0 PARENT_SCOPE)
  elseif(name STREQUAL "libzstd")
    set(${var} libzstd PARENT_SCOPE)
  elseif(name STREQUAL "libprotobuf")
    set(${var} protobuf PARENT_SCOPE)
  else()
    message(FATAL_ERROR "pmrkit: unknown third-party library '${name}' "
                        "(known: libbson, libzstd, libprotobuf)")
  endif()
endfunction()

function(pmrkit_find_third_party name)
  pmrkit_third_party_pkg_config_module(${name} pc_module)
  set(found_var pmrkit_dependency_${name}_FOUND)
  if(TARGET pmrkit_dependency::${name})
    set(${found_var} TRUE PARENT_SCOPE)
    return()
  endif()

  set(found "")
  if(name STREQUAL "libbson")
    find_package(bson-1.0 CONFIG QUIET)
    if(TARGET mongo::bson_shared)
      set(found mongo::bson_shared)
    endif()
  elseif(name STREQUAL "libzstd")
    find_package(zstd CONFIG QUIET)
    if(TARGET zstd::libzstd_shared)
      set(found zstd::libzstd_shared)
    elseif(TARGET zstd::libzstd_static)
      set(found zstd::libzstd_static)
    endif()
  elseif(name STREQUAL "libprotobuf")
    find_package(Protobuf QUIET)
    if(TARGET protobuf::libprotobuf)
      set(found protobuf::libprotobuf)
    endif()
  endif()
  if(NOT found)
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
      pkg_check_modules(pmrkit_pc_${name} QUIET IMPORTED_TARGET ${pc_module})
      if(TARGET PkgConfig::pmrkit_pc_${name})
        set(found PkgConfig::pmrkit_pc_${name})
      endif()
    endif()
  endif()

  if(found)
    add_library(pmrkit_dependency::${name} INTERFACE IMPORTED)
    target_link_libraries(pmrkit_dependency::${name} INTERFACE ${found})
    set(${found_var} TRUE PARENT_SCOPE)
  else()
    set(${found_var} FALSE PARENT_SCOPE)
  endif()
endfunction()
