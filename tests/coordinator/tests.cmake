gos_cc_test(NAME gang_test SRCS gang_test.cc DEPS gos::gang)
# The cut of a restarted job's replay log, over a real RocksDB in a temp dir.
gos_cc_test(NAME coordinator_log_cut_test SRCS log_cut_test.cc DEPS gos::log_cut gos::storage)
# How a job's stored checkpoint settings are shown (gos-ckpt --list, gos-restart).
gos_cc_test(NAME coordinator_store_ops_test SRCS store_ops_test.cc DEPS gos::admin)
