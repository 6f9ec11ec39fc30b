# The MPI examples (ring, pi, jacobi, master_worker), built the way a user builds an MPI
# program: with gos-cc (tools/cc.cmake), unmodified C. Targets mpi-<name>, executables
# ${PROJECT_BINARY_DIR}/examples/<name>. Nothing is built until the gos MPI library and the
# rank side it links (gos_rank) exist.
if(TARGET gos_mpi AND TARGET gos_rank)
  foreach(example ring pi jacobi master_worker)
    set(_out ${PROJECT_BINARY_DIR}/examples/${example})
    add_custom_command(OUTPUT ${_out}
      COMMAND ${PROJECT_BINARY_DIR}/bin/gos-cc -O2 -std=c11 -D_DEFAULT_SOURCE
              ${GOS_SANITIZER_FLAGS} -o ${_out} ${CMAKE_CURRENT_LIST_DIR}/${example}.c -lm
      DEPENDS ${CMAKE_CURRENT_LIST_DIR}/${example}.c gos_mpi gos_rank
              ${PROJECT_BINARY_DIR}/bin/gos-cc
      COMMENT "gos-cc ${example}.c"
      VERBATIM)
    add_custom_target(mpi-${example} ALL DEPENDS ${_out})
  endforeach()
endif()
