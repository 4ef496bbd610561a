#----------------------------------------------------------------
# Generated CMake target import file for configuration "Release".
#----------------------------------------------------------------

# Commands may need to know the format version.
set(CMAKE_IMPORT_FILE_VERSION 1)

# Import target "pmrkit::pmrkit" for configuration "Release"
set_property(TARGET pmrkit::pmrkit APPEND PROPERTY IMPORTED_CONFIGURATIONS RELEASE)
set_target_properties(pmrkit::pmrkit PROPERTIES
  IMPORTED_LINK_INTERFACE_LANGUAGES_RELEASE "CXX"
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/lib/libpmrkit.a"
  )

list(APPEND _cmake_import_check_targets pmrkit::pmrkit )
list(APPEND _cmake_import_check_files_for_pmrkit::pmrkit "${_IMPORT_PREFIX}/lib/libpmrkit.a" )

# Commands beyond this point should not need to know the version.
set(CMAKE_IMPORT_FILE_VERSION)
