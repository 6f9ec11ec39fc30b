gos_cc_test(NAME bcs_client_test SRCS bcs_client_test.cc DEPS gos::rank Threads::Threads)
gos_cc_test(NAME bcs_replay_test SRCS bcs_replay_test.cc DEPS gos::rank Threads::Threads)
