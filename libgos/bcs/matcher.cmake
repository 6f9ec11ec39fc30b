# Deterministic BCS matching and slice scheduling: pure logic, no I/O (docs/bcs-matching.md).
# The nodeagent runs it; gos::replay recomputes the matches of a recorded run with it.
gos_cc_library(NAME matcher HDRS_DIR include SRCS ${CMAKE_CURRENT_LIST_DIR}/matcher.cc
  DEPS gos::common)
