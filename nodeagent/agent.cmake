gos_cc_library(NAME agent
  SRCS agent.cc jobs.cc checkpoint.cc restore.cc recording.cc bcs_engine.cc bcs_recording.cc
  DEPS gos::launcher gos::os gos::prim gos::matcher gos::criu gos::storage gos::chunks gos::replay)
gos_cc_binary(NAME gos-nodeagent SRCS main.cc DEPS gos::agent)
