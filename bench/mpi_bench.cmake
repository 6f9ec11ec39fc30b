# Payloads of bench/gos-mpi-bench: the same MPI C sources built twice, against Open MPI
# (bench-ompi-<name>, when its C bindings are installed) and against gos's MPI subset
# (bench-gos-<name>, once gos_mpi and gos_rank exist), into build/bin. Plain C, no gos warning
# set. jacobi is examples/jacobi.c.
set(_gos_mpi_bench_sources
  pingpong ${CMAKE_CURRENT_LIST_DIR}/programs/mpi_pingpong.c
  collbench ${CMAKE_CURRENT_LIST_DIR}/programs/mpi_collbench.c
  jacobi ${PROJECT_SOURCE_DIR}/examples/jacobi.c)
find_package(MPI COMPONENTS C QUIET)
set(_flavours)
if(MPI_C_FOUND)
  list(APPEND _flavours ompi)
endif()
if(TARGET gos_mpi AND TARGET gos_rank)
  list(APPEND _flavours gos)
endif()
foreach(flavour ${_flavours})
  set(_list ${_gos_mpi_bench_sources})
  while(_list)
    list(POP_FRONT _list name source)
    set(target bench-${flavour}-${name})
    add_executable(${target} ${source})
    target_compile_definitions(${target} PRIVATE _DEFAULT_SOURCE)
    set_target_properties(${target} PROPERTIES C_STANDARD 11
                          RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
    if(flavour STREQUAL "ompi")
      target_link_libraries(${target} PRIVATE MPI::MPI_C m)
    else()
      target_link_libraries(${target} PRIVATE gos::mpi m)
      target_link_options(${target} PRIVATE ${GOS_SANITIZER_FLAGS})
    endif()
  endwhile()
endforeach()
