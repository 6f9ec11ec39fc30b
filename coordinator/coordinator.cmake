# A restarted job's replay log, cut back to the checkpoint it restarts from.
gos_cc_library(NAME log_cut SRCS log_cut.cc DEPS gos::storage gos::replay)
gos_cc_library(NAME coordinator SRCS coordinator.cc
  DEPS gos::gang gos::os gos::prim gos::storage gos::admin gos::replay gos::log_cut)
gos_cc_binary(NAME gos-coordinator SRCS main.cc DEPS gos::coordinator)
