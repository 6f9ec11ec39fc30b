# The MPI subset (mpi.h) on gos.h: a static, position-independent archive in build/lib that
# gos-cc links into MPI programs. Only libc, libstdc++ and libm.
gos_cc_library(NAME mpi HDRS_DIR mpi/include
  SRCS mpi/init.cc mpi/comm.cc mpi/group.cc mpi/attr.cc mpi/errhandler.cc mpi/p2p.cc
       mpi/request.cc mpi/coll.cc mpi/icoll.cc mpi/topo.cc mpi/type.cc mpi/info.cc mpi/rma.cc
       mpi/datatype.cc mpi/comm_logic.cc)
# gos.h (and its enums, which the pure parts use too) lives in libgos/include.
target_include_directories(gos_mpi PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
set_target_properties(gos_mpi PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
# gos_rank comes from libgos/bcs (another component); until it exists only the pure parts
# (datatype.cc, comm_logic.cc) can be linked, which is what the unit test needs.
if(TARGET gos_rank)
  target_link_libraries(gos_mpi PUBLIC gos::rank)
endif()
