# pmrkit_find_libzstd(<out_var>): sets <out_var> to an imported target for libzstd (its CMake
# package, else pkg-config), or to "" if it is not installed. Used by the zstd adapter and by
# pmrkit::trace.
function(pmrkit_find_libzstd out_var)
  find_package(zstd CONFIG QUIET)
  if(TARGET zstd::libzstd_shared)
    set(${out_var} zstd::libzstd_shared PARENT_SCOPE)
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(pmrkit_libzstd_pc QUIET IMPORTED_TARGET GLOBAL libzstd)
  endif()
  if(TARGET PkgConfig::pmrkit_libzstd_pc)
    set(${out_var} PkgConfig::pmrkit_libzstd_pc PARENT_SCOPE)
  else()
    set(${out_var} "" PARENT_SCOPE)
  endif()
endfunction()
