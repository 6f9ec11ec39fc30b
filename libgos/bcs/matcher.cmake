# Deterministic BCS matching and slice scheduling: pure logic, no I/O (docs/bcs-matching.md).
gos_cc_library(NAME matcher SRCS matcher.cc DEPS gos::common)
# Users include it as "nodeagent/matcher.h".
target_include_directories(gos_matcher PUBLIC ${PROJECT_SOURCE_DIR})
