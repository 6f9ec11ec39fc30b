# The MPI examples (ring, pi, jacobi, master_worker), built against gos's MPI subset like any
# user's MPI program: plain C, no gos warning set. Targets mpi-<name>, executables
# ${PROJECT_BINARY_DIR}/examples/<name>. Nothing is built until the gos MPI library and the
# rank side it links (gos_rank) exist.
if(TARGET gos_mpi AND TARGET gos_rank)
  foreach(example ring pi jacobi master_worker)
    add_executable(mpi-${example} ${CMAKE_CURRENT_LIST_DIR}/${example}.c)
    target_link_libraries(mpi-${example} PRIVATE gos::mpi m)
    target_compile_definitions(mpi-${example} PRIVATE _DEFAULT_SOURCE)
    # A sanitized gos_mpi (GOS_SANITIZE) needs the sanitizer runtimes at link time.
    target_link_options(mpi-${example} PRIVATE ${GOS_SANITIZER_FLAGS})
    set_target_properties(mpi-${example} PROPERTIES
      OUTPUT_NAME ${example}
      C_STANDARD 11
      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples)
  endforeach()
endif()
