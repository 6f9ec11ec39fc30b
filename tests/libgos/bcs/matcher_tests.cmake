# The matcher and slice scheduler, including seeded property tests of determinism.
gos_cc_test(NAME matcher_test SRCS ${CMAKE_CURRENT_LIST_DIR}/matcher_test.cc DEPS gos::matcher)
