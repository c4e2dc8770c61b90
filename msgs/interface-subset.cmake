# Build only the interfaces the palletizer uses of a large upstream interface package, where
# scripts/setup builds it from source (no ROS install provides it). Included at the end of the
# package's project() call (-DCMAKE_PROJECT_<package>_INCLUDE=this file): its own
# rosidl_generate_interfaces call then generates only the files listed in
# PALLETIZER_INTERFACES_<package> (msgs/upstream-interfaces.tsv and what those need, as
# scripts/fetch-ros-sources --cmake-args computes it); the rest of the call is unchanged, so the
# generated types and their hashes are the package's own. The package's source is not touched.
find_package(rosidl_default_generators REQUIRED)
# ament's package configs are included once per directory: the package's own find_package of
# rosidl_default_generators returns early, and this override stays.
macro(rosidl_generate_interfaces _pz_target)
  set(_pz_kept)
  foreach(_pz_arg ${ARGN})
    if(_pz_arg MATCHES "\\.(msg|srv|action|idl)$"
        AND NOT _pz_arg IN_LIST PALLETIZER_INTERFACES_${PROJECT_NAME})
      continue()
    endif()
    list(APPEND _pz_kept "${_pz_arg}")
  endforeach()
  _rosidl_generate_interfaces(${_pz_target} ${_pz_kept})
endmacro()
