# Rank launching: freezer cgroups, a rank in a fresh PID namespace, and its init.
gos_cc_library(NAME launcher SRCS launcher.cc freezer.cc cpu_bind.cc DEPS gos::common)
# PID 1 of every rank's PID namespace; found by the nodeagent next to itself in bin/.
gos_cc_binary(NAME gos-rank-init SRCS rank_init_main.cc)
# Linked statically: every rank start execs it, and the dynamic loader's work for libstdc++
# (symbol lookups and relocations) was ~0.5 ms of each start. Not with the sanitizers.
if(NOT GOS_SANITIZE)
  target_link_options(gos-rank-init PRIVATE -static)
endif()
