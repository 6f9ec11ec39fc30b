# Real RocksDB in a temp dir per test; one test re-executes this binary as a writer process
# and SIGKILLs it.
gos_cc_test(NAME storage_tables_test SRCS tables_test.cc DEPS gos::storage)
