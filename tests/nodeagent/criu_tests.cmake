# DumpRank / RestoreRank with real ranks, real cgroups and the real criu (need root).
gos_cc_binary(NAME criu_counter SRCS criu_counter.cc OUTPUT_DIR ${PROJECT_BINARY_DIR}/tests)
gos_cc_binary(NAME criu_zeros SRCS criu_zeros.cc OUTPUT_DIR ${PROJECT_BINARY_DIR}/tests)
gos_cc_test(NAME criu_test SRCS criu_test.cc DEPS gos::criu gos::test_support
  LABELS integration TIMEOUT 120)
# launcher_test_helper: rank_harness.h's SkipReason() looks for it.
add_dependencies(criu_test gos-rank-init criu_counter criu_zeros launcher_test_helper)
