gos_cc_library(NAME agent SRCS agent.cc bcs_engine.cc
  DEPS gos::launcher gos::os gos::prim gos::matcher gos::criu gos::chunks gos::replay)
gos_cc_binary(NAME gos-nodeagent SRCS main.cc DEPS gos::agent)
