gos_cc_test(NAME gang_test SRCS gang_test.cc DEPS gos::gang)
