gos_cc_test(NAME render_test SRCS render_test.cc DEPS gos::render)
