gos_cc_library(NAME store_ops SRCS store_ops.cc DEPS gos::storage gos::os)
# A restarted job's replay log, cut back to the checkpoint it restarts from.
gos_cc_library(NAME log_cut SRCS log_cut.cc DEPS gos::storage gos::replay)
gos_cc_library(NAME coordinator
  SRCS coordinator.cc clients.cc agent_frames.cc strobe.cc epochs.cc restart.cc replay.cc
       staging.cc ps.cc
  DEPS gos::gang gos::os gos::prim gos::storage gos::store_ops gos::replay gos::log_cut)
gos_cc_binary(NAME gos-coordinator SRCS main.cc DEPS gos::coordinator)
