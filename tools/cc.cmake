# gos-cc / gos-c++: compiler wrappers for MPI programs (docs/mpi.md), generated into build/bin
# with this build's absolute include and library directories.
set(GOS_CC_MPI_INCLUDE ${PROJECT_SOURCE_DIR}/libgos/mpi/include)
set(GOS_CC_GOS_INCLUDE ${PROJECT_SOURCE_DIR}/libgos/include)
set(GOS_CC_LIB_DIR ${PROJECT_BINARY_DIR}/lib)
foreach(_wrapper gos-cc gos-c++)
  if(_wrapper STREQUAL "gos-cc")
    set(GOS_CC_NAME gos-cc)
    set(GOS_CC_ENV GOS_CC)
    set(GOS_CC_DEFAULT cc)
  else()
    set(GOS_CC_NAME gos-c++)
    set(GOS_CC_ENV GOS_CXX)
    set(GOS_CC_DEFAULT c++)
  endif()
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/gos-cc.in ${PROJECT_BINARY_DIR}/bin/${_wrapper}
    @ONLY
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                     WORLD_READ WORLD_EXECUTE)
endforeach()
