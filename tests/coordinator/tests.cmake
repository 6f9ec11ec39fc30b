gos_cc_test(NAME gang_test SRCS gang_test.cc DEPS gos::gang)
# The cut of a restarted job's replay log, over a real RocksDB in a temp dir.
gos_cc_test(NAME coordinator_log_cut_test SRCS log_cut_test.cc DEPS gos::log_cut gos::storage)
