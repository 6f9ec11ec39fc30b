# Gang matrix, node allocator and FCFS/backfill job queue: pure logic, no I/O.
gos_cc_library(NAME gang SRCS gang.cc DEPS gos::common)
