# gos_configure_wrapper(NAME n INCLUDE_DIRS d LIB_DIR l [FORTRAN_INCLUDE f] TEMPLATE t OUT o):
# writes the MPI compiler wrapper n (gos-cc, gos-c++, gos-fort, gos-f90, gos-f77) from the
# template t (tools/gos-cc.in) into o, naming the include dirs d (a bash array's words,
# quoted), the library dir l and, for the Fortran ones, the dir f of mpif.h and the mpi module
# when it is not among d. Used for the build tree's wrappers
# (tools/CMakeLists.txt) and the installed ones (cmake/GosInstallGenerated.cmake).
function(gos_configure_wrapper)
  cmake_parse_arguments(W "" "NAME;INCLUDE_DIRS;LIB_DIR;FORTRAN_INCLUDE;TEMPLATE;OUT" "" ${ARGN})
  set(GOS_CC_NAME ${W_NAME})
  set(GOS_CC_INCLUDE_DIRS "${W_INCLUDE_DIRS}")
  set(GOS_CC_LIB_DIR "${W_LIB_DIR}")
  set(GOS_CC_LIBS "gos_mpi gos_rank stdc++ m")
  set(GOS_CC_EXTRA_COMPILE_FLAGS "")
  set(GOS_CC_LANG "mpi.h")
  if(W_NAME STREQUAL "gos-cc")
    set(GOS_CC_ENV GOS_CC)
    set(GOS_CC_DEFAULT cc)
    set(GOS_CC_CMAKE_LANG C)
    set(GOS_CC_CMAKE_ENV CC)
  elseif(W_NAME STREQUAL "gos-c++")
    set(GOS_CC_ENV GOS_CXX)
    set(GOS_CC_DEFAULT c++)
    set(GOS_CC_CMAKE_LANG CXX)
    set(GOS_CC_CMAKE_ENV CXX)
  else()
    # Fortran: mpif.h and the mpi module, the bindings' library first; mpi.h too, for the C
    # files of a mixed program (a PMPI tool, say). As mpifort, it adds no
    # -fallow-argument-mismatch: Fortran 77 code that passes buffers of different types to one
    # routine needs it with gfortran >= 10 (mpif.h declares no interfaces).
    if(W_FORTRAN_INCLUDE)
      set(GOS_CC_INCLUDE_DIRS "'${W_FORTRAN_INCLUDE}' ${W_INCLUDE_DIRS}")
    endif()
    set(GOS_CC_LIBS "gos_mpif gos_mpi gos_rank stdc++ m")
    set(GOS_CC_LANG "mpif.h and the mpi module, Fortran")
    set(GOS_CC_ENV GOS_FC)
    set(GOS_CC_DEFAULT gfortran)
    set(GOS_CC_CMAKE_LANG Fortran)
    set(GOS_CC_CMAKE_ENV FC)
  endif()
  configure_file("${W_TEMPLATE}" "${W_OUT}" @ONLY
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                     WORLD_READ WORLD_EXECUTE)
endfunction()
