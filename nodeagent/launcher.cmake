# Rank launching: freezer cgroups, a rank in a fresh PID namespace, and its init.
gos_cc_library(NAME launcher SRCS launcher.cc freezer.cc cpu_bind.cc DEPS gos::common)
# PID 1 of every rank's PID namespace; found by the nodeagent next to itself in bin/.
gos_cc_binary(NAME gos-rank-init SRCS rank_init_main.cc)
