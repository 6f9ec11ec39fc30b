gos_cc_library(NAME render SRCS render.cc DEPS gos::os)
