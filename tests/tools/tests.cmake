gos_cc_test(NAME render_test SRCS render_test.cc DEPS gos::render)
gos_cc_test(NAME node_list_test SRCS node_list_test.cc DEPS gos::client)
