# The MPI subset's pure parts (datatypes, ops, Comm_split grouping, context ids).
gos_cc_test(NAME mpi_unit_test SRCS mpi_unit_test.cc DEPS gos::mpi)
# With gos_rank, the MPI calls also run end to end in forked ranks against a minimal nodeagent
# inside the test (MpiLoopback.*).
if(TARGET gos_rank)
  target_compile_definitions(mpi_unit_test PRIVATE GOS_MPI_LOOPBACK)
endif()

# gos-cc / gos-c++ work: --showme prints the command, and a small MPI program compiles (as C
# and, through gos-c++, as C++) and links against build/lib. Only linked, never run.
if(TARGET gos_rank)
  set(_gos_cc ${PROJECT_BINARY_DIR}/bin/gos-cc)
  set(_gos_cxx ${PROJECT_BINARY_DIR}/bin/gos-c++)
  set(_check ${CMAKE_CURRENT_SOURCE_DIR}/mpi_link_check.c)
  set(_out ${CMAKE_CURRENT_BINARY_DIR})
  add_test(NAME mpi_gos_cc_showme COMMAND ${_gos_cc} --showme -O2 -o app app.c)
  set_tests_properties(mpi_gos_cc_showme PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION
    "-O2 -o app app.c -I[^ ]*/libgos/mpi/include -I[^ ]*/libgos/include -L[^ ]*/lib -lgos_mpi -lgos_rank -lstdc\\+\\+ -lm")
  add_test(NAME mpi_gos_cc_showme_compile_only COMMAND ${_gos_cc} --showme -c app.c)
  set_tests_properties(mpi_gos_cc_showme_compile_only PROPERTIES LABELS unit
    FAIL_REGULAR_EXPRESSION "-lgos_mpi" PASS_REGULAR_EXPRESSION "-c app.c -I")
  add_test(NAME mpi_gos_cc_link
    COMMAND ${_gos_cc} -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -o ${_out}/mpi_link_check_c
            ${_check})
  add_test(NAME mpi_gos_cxx_link
    COMMAND ${_gos_cxx} -x c++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -O1
            -o ${_out}/mpi_link_check_cxx ${_check})
  set_tests_properties(mpi_gos_cc_link mpi_gos_cxx_link PROPERTIES LABELS unit)
  # A call outside the subset fails to build (here: undefined at link time), never at run time.
  file(WRITE ${_out}/mpi_outside_subset.c
    "#include <mpi.h>\nint MPI_Win_lock(int, int, int, MPI_Win);\n"
    "int main(void) { MPI_Init(0, 0); MPI_Win_lock(1, 0, 0, MPI_WIN_NULL); "
    "return MPI_Finalize(); }\n")
  add_test(NAME mpi_gos_cc_rejects_outside_subset
    COMMAND ${_gos_cc} -o ${_out}/mpi_outside_subset ${_out}/mpi_outside_subset.c)
  set_tests_properties(mpi_gos_cc_rejects_outside_subset PROPERTIES LABELS unit WILL_FAIL TRUE)
  # Build systems interrogate MPI wrappers the Open MPI way (one dash) or the MPICH way.
  add_test(NAME mpi_gos_cc_open_mpi_and_mpich_queries
    COMMAND sh -c "${_gos_cc} -showme:compile && ${_gos_cc} -showme:link && ${_gos_cc} -show -c x.c && ${_gos_cc} -showme:incdirs")
  set_tests_properties(mpi_gos_cc_open_mpi_and_mpich_queries PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION
    "^-I[^ ]*/libgos/mpi/include -I[^ ]*/libgos/include\n-L[^ ]*/lib -lgos_mpi -lgos_rank -lstdc\\+\\+ -lm\n[^ ]*cc -c x.c -I[^\n]*\n[^ ]*/libgos/mpi/include [^ ]*/libgos/include\n$")
  # CMake's find_package(MPI) finds gos through the wrappers.
  add_test(NAME mpi_cmake_find_package
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/find_mpi_check.sh ${PROJECT_BINARY_DIR}/bin ${_check})
  set_tests_properties(mpi_cmake_find_package PROPERTIES LABELS unit)
endif()
