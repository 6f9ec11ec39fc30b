# Rank launching and the freezer, with real processes and real cgroups (need root).
gos_cc_binary(NAME launcher_test_helper SRCS launcher_test_helper.cc
  OUTPUT_DIR ${PROJECT_BINARY_DIR}/tests)
gos_cc_test(NAME launcher_test SRCS launcher_test.cc DEPS gos::launcher gos::test_support
  LABELS integration)
add_dependencies(launcher_test gos-rank-init launcher_test_helper)
gos_cc_test(NAME freezer_test SRCS freezer_test.cc DEPS gos::launcher gos::test_support
  LABELS integration)
add_dependencies(freezer_test gos-rank-init launcher_test_helper)
gos_cc_test(NAME cpu_bind_test SRCS cpu_bind_test.cc DEPS gos::launcher LABELS unit)
