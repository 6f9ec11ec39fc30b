# Dumping and restoring one rank with CRIU (runs the criu binary).
gos_cc_library(NAME criu SRCS criu.cc DEPS gos::launcher)
