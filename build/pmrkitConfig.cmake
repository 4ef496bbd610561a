
####### Expanded from @PACKAGE_INIT@ by configure_package_config_file() #######
####### Any changes to this file will be overwritten by the next CMake run ####
####### The input file was pmrkitConfig.cmake.in                            ########

get_filename_component(PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/../../../" ABSOLUTE)

macro(set_and_check _var _file)
  set(${_var} "${_file}")
  if(NOT EXISTS "${_file}")
    message(FATAL_ERROR "File or directory ${_file} referenced by variable ${_var} does not exist !")
  endif()
endmacro()

macro(check_required_components _NAME)
  foreach(comp ${${_NAME}_FIND_COMPONENTS})
    if(NOT ${_NAME}_${comp}_FOUND)
      if(${_NAME}_FIND_REQUIRED_${comp})
        set(${_NAME}_FOUND FALSE)
      endif()
    endif()
  endforeach()
endmacro()

####################################################################################

# The static core links Boost.Pool (header-only), libdl and Threads privately; a static
# archive still needs its link dependencies at the consumer, so find them here.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(Boost 1.74)

include("${CMAKE_CURRENT_LIST_DIR}/pmrkitTargets.cmake")
foreach(component IN LISTS pmrkit_FIND_COMPONENTS)
  if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/pmrkit-${component}-targets.cmake")
    include("${CMAKE_CURRENT_LIST_DIR}/pmrkit-${component}-targets.cmake")
    set(pmrkit_${component}_FOUND TRUE)
  else()
    set(pmrkit_${component}_FOUND FALSE)
  endif()
endforeach()
check_required_components(pmrkit)
