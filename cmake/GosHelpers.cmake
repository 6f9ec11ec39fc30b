# Helpers that keep each directory's CMakeLists.txt a few declarative lines
# (after Abseil's absl_cc_library / absl_cc_test).
#
#   gos_cc_library(NAME prim SRCS a.cc b.cc HDRS_DIR include DEPS gos::common PkgConfig::X)
#     -> target gos_prim, alias gos::prim
#   gos_cc_binary(NAME gos-run SRCS main.cc DEPS gos::prim)
#   gos_cc_test(NAME status_test SRCS status_test.cc DEPS gos::common [LABELS integration]
#               [TIMEOUT 300])
#     -> GoogleTest executable registered with CTest (tests are discovered one by one)

set(GOS_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
    # GCC 12 flags designated initializers that rely on member defaults.
    -Wno-missing-field-initializers)
if(GOS_WERROR)
  list(APPEND GOS_WARNINGS -Werror)
endif()
set(GOS_SANITIZER_FLAGS)
if(GOS_SANITIZE)
  set(GOS_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
endif()

function(_gos_common_flags target)
  target_compile_options(${target} PRIVATE ${GOS_WARNINGS} ${GOS_SANITIZER_FLAGS})
  target_link_options(${target} PRIVATE ${GOS_SANITIZER_FLAGS})
endfunction()

# Include paths enforce the layering (../shared/DESIGN.md): a component's code includes its
# own private headers relative to itself ("node_impl.h") and other components only through
# their public include trees (HDRS_DIR, on the PUBLIC path of their library targets), so the
# project root is on no component's include path. Only code under tests/ gets it, to reach
# the private headers of the component it tests and tests/support (scripts/check-layout
# checks which).
function(_gos_test_includes target)
  string(FIND "${CMAKE_CURRENT_SOURCE_DIR}/" "${PROJECT_SOURCE_DIR}/tests/" at)
  if(at EQUAL 0)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  endif()
endfunction()

function(gos_cc_library)
  cmake_parse_arguments(G "" "NAME;HDRS_DIR" "SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target gos_${G_NAME})
  add_library(${target} STATIC ${G_SRCS})
  add_library(gos::${G_NAME} ALIAS ${target})
  _gos_common_flags(${target})
  if(G_HDRS_DIR)
    target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/${G_HDRS_DIR})
  endif()
  _gos_test_includes(${target})
  target_link_libraries(${target} PUBLIC ${G_DEPS} PRIVATE ${G_PRIVATE_DEPS})
endfunction()

function(gos_cc_binary)
  cmake_parse_arguments(G "" "NAME;OUTPUT_DIR" "SRCS;DEPS" ${ARGN})
  add_executable(${G_NAME} ${G_SRCS})
  _gos_common_flags(${G_NAME})
  # Only the shared libraries a program calls are loaded when it starts: the tools that talk
  # to the coordinator over its unix socket do not load libfabric (~0.2 s, prim/provider.cc).
  target_link_options(${G_NAME} PRIVATE -Wl,--as-needed)
  _gos_test_includes(${G_NAME})
  target_link_libraries(${G_NAME} PRIVATE ${G_DEPS})
  if(G_OUTPUT_DIR)
    set_target_properties(${G_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${G_OUTPUT_DIR})
  else()
    set_target_properties(${G_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  endif()
endfunction()

function(gos_cc_test)
  cmake_parse_arguments(G "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${G_NAME} ${G_SRCS})
  _gos_common_flags(${G_NAME})
  target_include_directories(${G_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${G_NAME} PRIVATE ${G_DEPS} GTest::gtest GTest::gtest_main)
  set_target_properties(${G_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 120)
  endif()
  if(NOT G_LABELS)
    set(G_LABELS unit)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${G_NAME}
    PROPERTIES LABELS "${G_LABELS}" TIMEOUT ${G_TIMEOUT}
               # GOS_CONFIG=/dev/null: no test reads the machine's /etc/gos/gos.conf (docs/config.md).
               ENVIRONMENT "GOS_BIN_DIR=${PROJECT_BINARY_DIR}/bin;GOS_TEST_BIN_DIR=${PROJECT_BINARY_DIR}/tests;GOS_CONFIG=/dev/null"
    DISCOVERY_TIMEOUT 30)
endfunction()
