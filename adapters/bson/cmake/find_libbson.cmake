# Finds Debian's libbson (libbson-dev) and defines pmrkit_libbson_target (a target to link) and
# pmrkit_libbson_FOUND. Included by the adapter and by its tests: an imported target is only
# visible in the directory that found it, and the tests live in a sibling directory.
set(pmrkit_libbson_FOUND FALSE)
find_package(bson-1.0 CONFIG QUIET)
if(TARGET mongo::bson_shared)
  set(pmrkit_libbson_target mongo::bson_shared)
  set(pmrkit_libbson_FOUND TRUE)
else()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(pmrkit_libbson_pc QUIET IMPORTED_TARGET libbson-1.0)
    if(pmrkit_libbson_pc_FOUND)
      set(pmrkit_libbson_target PkgConfig::pmrkit_libbson_pc)
      set(pmrkit_libbson_FOUND TRUE)
    endif()
  endif()
endif()
